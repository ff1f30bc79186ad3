"""posnet_fairseq/data/text.py: the text steps of the data recipes (IWSLT/SGML extraction, hold-out, Moses)."""
import pytest

from posnet_fairseq.data import text

from files_testing import read_lines as _read, write_lines as _write


def test_iwslt_train_filter():
    lines = ["<url>http://x</url>\n", "<talkid>1</talkid>\n", "<keywords>a</keywords>\n",
             "<title>Der Titel</title>\n", "<description>Eine Rede</description>\n", "Hallo Welt.\n"]
    assert list(text.iwslt_train_lines(lines)) == ["Der Titel", "Eine Rede", "Hallo Welt."]


def test_seg_lines_xml_and_sgm():
    lines = ['<doc docid="1">\n', '<seg id="1"> It\u2019s here. </seg>\n', '<seg id=2>Two</seg>\n', "</doc>\n"]
    assert list(text.seg_lines(lines)) == ["It's here.", "Two"]


def test_holdout_every_nth(tmp_path):
    _write(tmp_path / "c.a", [str(i) for i in range(1, 8)])
    _write(tmp_path / "c.b", [str(i) for i in range(1, 8)])
    counts = text.holdout(str(tmp_path / "c"), "a", "b", str(tmp_path / "t"), str(tmp_path / "v"), 3)
    assert counts == (5, 2)
    assert _read(tmp_path / "v.a") == ["3", "6"] and _read(tmp_path / "t.b") == ["1", "2", "4", "5", "7"]


def test_long_pair_joins_the_corpus_pairs(tmp_path):
    _write(tmp_path / "v.src", ["a b c", "d e"])
    _write(tmp_path / "v.tgt", ["x y", "z"])
    assert text.append_long_pair(str(tmp_path / "v"), "src", "tgt", 6) == (13, 8)  # both sides over 6
    assert _read(tmp_path / "v.src")[2] == "a b c d e a b c d e a b c"
    assert _read(tmp_path / "v.tgt")[2] == "x y z x y z x y"
    _write(tmp_path / "e.src", [""])
    _write(tmp_path / "e.tgt", [""])
    with pytest.raises(ValueError, match="no pair over 3 tokens"):
        text.append_long_pair(str(tmp_path / "e"), "src", "tgt", 3)


def test_moses_tokenisation_matches_tokenizer_perl_conventions():
    line = "It's a well-known fact & \u201cquoted\u201d."
    assert text.tokenize_line(line, "en") == "It &apos;s a well-known fact &amp; \u201c quoted \u201d ."
    assert "well @-@ known" in text.tokenize_line(line, "en", aggressive=True)
    assert text.tokenize_line(line, "en", normalize=True, lowercase=True).startswith("it &apos;s")
    assert text.remove_non_printing("a\u200bb\x07c") == "a b c"


def test_a_byte_order_mark_is_no_character_of_any_text_input(tmp_path):
    """Issue 49 item 8: a BOM in --raw-test stayed the first reference's first character (a perfect translation
    scored 89.3 sentence-BLEU); every reader of data/text.py drops it, and only at the start of a file."""
    from posnet_fairseq.compare.data import _pairs

    bom = "\ufeff"
    (tmp_path / "t.src").write_bytes(f"{bom}Hallo Welt .\nZwei {bom}\n".encode("utf-8"))
    (tmp_path / "t.tgt").write_bytes(f"{bom}Hello world .\nTwo\n".encode("utf-8"))
    assert text.read_lines(tmp_path / "t.src") == ["Hallo Welt .", f"Zwei {bom}"]
    assert _pairs(tmp_path / "t.src", tmp_path / "t.tgt", "--raw-test") == [("Hallo Welt .", "Hello world ."),
                                                                          (f"Zwei {bom}", "Two")]
    (tmp_path / "ro.txt").write_bytes(f"{bom}\u015ei\n".encode("utf-8"))
    text.main(["romanian", str(tmp_path / "ro.txt"), str(tmp_path / "ro.out")])
    assert _read(tmp_path / "ro.out") == ["\u0218i"]
    text.main(["tokenize", "-l", "en", str(tmp_path / "t.tgt"), str(tmp_path / "t.tok")])
    assert _read(tmp_path / "t.tok") == ["Hello world .", "Two"]
    text.holdout(str(tmp_path / "t"), "src", "tgt", str(tmp_path / "tr"), str(tmp_path / "va"), 2)
    assert _read(tmp_path / "tr.tgt") == ["Hello world ."]


def test_replace_unicode_punctuation_comes_before_normalisation():
    """replace-unicode-punctuation.perl, which the hard-coded Gaussian authors run on WMT16 En-Ro before
    normalize-punctuation.perl (process_enro.sh): full-width punctuation becomes ASCII."""
    line = "Da\uff0c \u00een 2016\uff1a \u201eBine\u201d\u3002"
    assert text.tokenize_line(line, "ro", normalize=True) == "Da \uff0c în 2016 \uff1a &quot; Bine &quot; \u3002"
    assert text.tokenize_line(line, "ro", normalize=True, replace_unicode=True) == \
        "Da , în 2016 : &quot; Bine &quot; ."


def test_printing_removes_non_printing_characters_then_normalises_spaces(tmp_path):
    """``text printing``: control, format and private-use characters become spaces, then one space between words
    and none at either end (the Chinese side of WMT18 before its segmentation)."""
    _write(tmp_path / "in", ["\u4e2d\u6587\u200b\u6d4b\u8bd5 ", "\ta\x07 b\ue000c  ", ""])
    text.main(["printing", str(tmp_path / "in"), str(tmp_path / "out")])
    assert _read(tmp_path / "out") == ["\u4e2d\u6587 \u6d4b\u8bd5", "a b c", ""]
