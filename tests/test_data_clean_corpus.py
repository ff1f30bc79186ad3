"""posnet_fairseq/data/clean_corpus.py: the clean-corpus filter of the data recipes (Moses clean-corpus-n)."""
import pytest

from posnet_fairseq.data import clean_corpus

from files_testing import read_lines as _read, write_lines as _write


@pytest.mark.parametrize("src,tgt,keep", [
    ("a b c", "x y z", True),
    ("a b c", "x", False),             # ratio 3 > 1.5
    ("a b", "x y z", True),            # ratio exactly 1.5
    ("", "x", False),                  # empty side
    ("a " * 6, "x " * 6, False),       # 6 > max 5
    ("a", "x", False),                 # 1 < min 2
])
def test_keep_pair(src, tgt, keep):
    assert clean_corpus.keep_pair(src.strip(), tgt.strip(), 2, 5, ratio=1.5) is keep


def test_clean_corpus_files_normalise_whitespace(tmp_path):
    _write(tmp_path / "c.de", ["  ein   haus ", "zu lang zu lang zu lang", "kurz"])
    _write(tmp_path / "c.en", ["a  house", "too long", "this is far too long"])
    kept, total = clean_corpus.clean_corpus(str(tmp_path / "c"), "de", "en", str(tmp_path / "o"), 1, 10, 1.5)
    assert (kept, total) == (1, 3)
    assert _read(tmp_path / "o.de") == ["ein haus"] and _read(tmp_path / "o.en") == ["a house"]


def test_clean_corpus_rejects_unequal_sides(tmp_path):
    _write(tmp_path / "c.de", ["a", "b"])
    _write(tmp_path / "c.en", ["a"])
    with pytest.raises(SystemExit):
        clean_corpus.main([str(tmp_path / "c"), "de", "en", str(tmp_path / "o"), "1", "10"])
