"""data/bible.py and data/sword_text.py: the Bible corpus from two SWORD modules, on the fixture modules of
tests/fixtures/sword (a few verses of the Reina-Valera 1909 and the World English Bible in the zText format,
written by tests/fixtures/make_bible_fixture.py); no SWORD package is needed. Also
recipes/data/prepare-bible-es-en.sh on them."""
import json
import math
import os
import random
import shutil
import subprocess
import sys

import pytest

from posnet_fairseq.data import bible, sword_text

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWORD = os.path.join(REPO, "tests", "fixtures", "sword")
ES, EN = "spaRV1909fix", "engWEB2015fix"
VALID, TEST = ("Eccl",), ("Rom", "John", "Ruth")  # the order of a flag does not matter


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def _split(out, split):
    """{ref: (es, en)} of one written split, and its refs in file order."""
    refs = _lines(os.path.join(out, f"{split}.ref"))
    es, en = _lines(os.path.join(out, f"{split}.es")), _lines(os.path.join(out, f"{split}.en"))
    assert len(refs) == len(es) == len(en)
    return dict(zip(refs, zip(es, en))), refs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("bible"))
    stats = bible.build(sword_text.open_module(ES, [SWORD]), sword_text.open_module(EN, [SWORD]), out,
                        VALID, TEST, spm_vocab=100, spm_dir=os.path.join(out, "spm"))
    return out, stats


def test_aligned_by_key_in_canonical_order(corpus):
    out, _ = corpus
    _, train = _split(out, "train")
    # Jonah 1:17 (empty in the RV), Acts 8:37 (only a footnote in the WEB), 3 John 1:15 and Tobit (not in
    # the KJV versification) and the held-out books are not there; the rest is in canonical order.
    assert train == ["Gen.1.1", "Gen.1.2", "Gen.1.3", "Ps.3.1", "Ps.3.2", "Song.1.2", "Jonah.1.16", "Matt.1.1",
                     "Matt.1.2", "3John.1.14", "Rev.22.21"]
    pairs, _ = _split(out, "train")
    assert pairs["Gen.1.3"] == ("Y dijo Dios: Sea la luz: y fué la luz.",
                                "God said, “Let there be light,” and there was light.")


def test_whole_books_held_out_in_document_order(corpus):
    out, stats = corpus
    _, valid = _split(out, "valid")
    _, test = _split(out, "test")
    assert valid == ["Eccl.1.1", "Eccl.1.2"]
    # canonical order, not the flag's: consecutive lines are consecutive verses within a book
    assert test == ["Ruth.1.1", "Ruth.1.2", "John.3.16", "John.3.17", "Rom.1.1", "Rom.1.2"]
    books = {split: set(stats["splits"][split]["books"]) for split in bible.SPLITS}
    assert books["valid"] == {"Eccl"} and books["test"] == {"Ruth", "John", "Rom"}
    assert not books["train"] & (books["valid"] | books["test"])


def test_markup_becomes_plain_text(corpus):
    out, _ = corpus
    pairs = {}
    for split in bible.SPLITS:
        pairs.update(_split(out, split)[0])
    # a footnote between two words leaves a space (pysword's cleaner gives "Godcreated")
    assert pairs["Gen.1.1"][1] == "In the beginning, God created the heavens and the earth."
    # the canonical psalm title is text, as in the RV's verse 1; the poetry lines are spaces
    assert pairs["Ps.3.1"] == ("Salmo de David, cuando huía de delante de Absalom su hijo. ¡OH Jehová, cuánto se han "
                               "multiplicado mis enemigos! muchos se levantan contra mí.",
                               "A Psalm by David, when he fled from Absalom his son. Yahweh, how my adversaries have "
                               "increased! Many are those who rise up against me.")
    assert pairs["Song.1.2"][1].startswith("Let him kiss me")  # the speaker label "Beloved" is gone
    assert "only born Son, that whoever" in pairs["John.3.16"][1]
    # the glossary after the end of Revelation is not verse text
    assert pairs["Rev.22.21"][1] == "The grace of the Lord Jesus Christ be with all the saints. Amen."
    # an added word (<transChange>) written without spaces around it is a word of its own
    assert "llamado á ser apóstol" in pairs["Rom.1.1"][0]
    for es, en in pairs.values():
        for text in (es, en):
            assert not set("<>&\x00") & set(text) and "strong" not in text and "  " not in text
            assert text == text.strip()


@pytest.mark.parametrize("raw, source_type, plain", [
    ('dijo: <w lemma="strong:H1">sáca</w><transChange type="added">lo</transChange> fuera', "OSIS", "dijo: sácalo fuera"),
    ('allí<transChange type="added">también</transChange>bdelio', "OSIS", "allí también bdelio"),
    ('<w>díjo</w><transChange type="added">le</transChange><w>Dios</w>: Pide', "OSIS", "díjole Dios: Pide"),
    ('las <w>gentes</w><transChange type="added">lo</transChange><w>oyeron</w>', "OSIS", "las gentes lo oyeron"),
    ('the deep<note placement="foot">or, <rdg type="alternate">abyss</rdg></note>. (<transChange>is</transChange> it',
     "OSIS", "the deep. (is it"),
    ('<title type="x-heading">The Creation</title><milestone type="x-p"/>Salt &amp; light', "OSIS", "Salt & light"),
    ("In the beginning<WH7225> God<RF>Elohim<Rf><WH430> created<CM>the heaven", "GBF",
     "In the beginning God created the heaven"),
    ('In the beginning<sync type="Strongs" value="H7225"/> God<note>Elohim</note> created<scripRef>Jn 1:1</scripRef>.',
     "ThML", "In the beginning God created."),
    ("  plain\ttext  ", "Plaintext", "plain text"),
])
def test_plain_text(raw, source_type, plain):
    assert sword_text.plain_text(raw, source_type) == plain


def test_plain_text_refuses_unknown_markup():
    with pytest.raises(ValueError, match="SourceType=TEI"):
        sword_text.plain_text("x", "TEI")


def test_stats_json(corpus):
    out, stats = corpus
    for split in bible.SPLITS:
        assert stats["pairs"][split] == stats["splits"][split]["pairs"] == len(_lines(os.path.join(out, f"{split}.es")))
        for lang in ("es", "en"):
            lines = _lines(os.path.join(out, f"{split}.{lang}"))
            words = [len(line.split()) for line in lines]
            assert stats["splits"][split][lang]["words"] == {
                "total": sum(words), "mean": round(sum(words) / len(words), 2), "max": max(words)}
            pieces = [len(line.split()) for line in _lines(os.path.join(out, "spm", f"{split}.{lang}"))]
            assert stats["splits"][split][lang]["pieces"]["total"] == sum(pieces) > sum(words) / 2
    assert os.path.isfile(os.path.join(out, "spm", "spm.model"))
    assert stats["source"] == {"module": ES, "description": "Reina Valera 1909 (test fixture: a few verses)",
                               "version": "2.60", "versification": "KJV", "source_type": "OSIS", "lang": "es"}
    assert stats["target"]["version"] == "426.0" and stats["target"]["versification"] == "NRSVA"
    skipped = stats["skipped"]
    assert skipped["empty in the source"] == {"verses": 1, "books": {"Jonah": 1}, "refs": ["Jonah.1.17"]}
    assert skipped["empty in the target"]["refs"] == ["Acts.8.37"]
    only_target = skipped["only in the target's versification"]["books"]
    assert only_target["3John"] == 1 and only_target["Tob"] == 242
    assert "only in the source's versification" not in skipped
    assert stats["length_check"]["chapters_numbered_differently"] == []


def _synthetic_pairs(seed=0):
    """Three chapters of 12 verses of lengths 20-240 characters, the target 5% longer with noise: chapter 2
    numbered differently (each target verse is the next one's), one long target in chapter 3, and a short
    aligned pair whose log length ratio is far from the others'."""
    rng = random.Random(seed)
    pairs = []
    for chapter in (1, 2, 3):
        lengths = [rng.randint(20, 240) for _ in range(13)]
        for verse in range(1, 13):
            tgt_len = lengths[verse] if chapter == 2 else lengths[verse - 1]
            tgt_len = round(tgt_len * 1.05 * math.exp(rng.gauss(0, 0.08)))
            pairs.append((("Book", chapter, verse), "a" * lengths[verse - 1], "b" * tgt_len))
    pairs[30] = (pairs[30][0], pairs[30][1], pairs[30][2] + "c" * 400)
    pairs.append((("Book", 3, 13), "No matarás.", "You shall not murder."))
    return pairs


def test_length_checks():
    pairs = _synthetic_pairs()
    kept, dropped, model = bible.check_lengths(pairs)
    assert model["chapters_numbered_differently"] == ["Book.2"]
    assert dropped["chapter numbered differently"] == [key for key, _, _ in pairs if key[1] == 2]
    assert dropped["length outlier"] == [("Book", 3, 7)]
    # the short pair stays: Gale & Church's deviation scales with the square root of the length
    assert ("Book", 3, 13) in [key for key, _, _ in kept]
    assert len(kept) == len(pairs) - 13


def test_split_errors():
    pairs = [(("Ruth", 1, 1), "a", "b"), (("John", 1, 1), "a", "b"), (("Rom", 1, 1), "a", "b")]
    with pytest.raises(ValueError, match="--test-books: no aligned verse of Lam"):
        bible.split_books(pairs, (), ("Lam", "John"))
    with pytest.raises(ValueError, match="--valid-books and --test-books both name John"):
        bible.split_books(pairs, ("John",), ("John",))
    with pytest.raises(ValueError, match="no training pair"):
        bible.split_books(pairs, ("Ruth",), ("John", "Rom"))


def test_missing_module_says_where_to_get_it(monkeypatch, tmp_path):
    monkeypatch.delenv("SWORD_PATH", raising=False)
    with pytest.raises(FileNotFoundError) as err:
        sword_text.open_module("NoSuchBible", [SWORD])
    message = str(err.value)
    assert "NoSuchBible" in message and SWORD in message
    assert "apt-get install sword-text-sparv sword-text-web" in message and "crosswire.org" in message
    with pytest.raises(FileNotFoundError, match="--sword-path .*nowhere: neither a module .zip nor a folder"):
        sword_text.open_module(ES, [str(tmp_path / "nowhere")])


def test_missing_pysword_names_the_package(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "pysword", None)
    monkeypatch.setitem(sys.modules, "pysword.modules", None)
    with pytest.raises(ImportError, match=r"optional package pysword: pip install pysword==0\.2\.8"):
        sword_text.open_module(ES, [SWORD])
    with pytest.raises(SystemExit) as exit_:
        bible.main(["--out-dir", str(tmp_path), "--sword-path", SWORD, "--source-module", ES])
    assert exit_.value.code == 2 and "pip install pysword==0.2.8" in capsys.readouterr().err


def test_module_zip_as_crosswire_ships_it(tmp_path):
    archive = shutil.make_archive(str(tmp_path / "modules"), "zip", SWORD)
    zipped = list(sword_text.verses(sword_text.open_module(ES, [archive])))
    folder = list(sword_text.verses(sword_text.open_module(ES, [SWORD])))
    assert zipped == folder and len(zipped) == 31102  # the KJV versification's verses


def test_recipe(tmp_path):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
               PYTHON=sys.executable)
    out = tmp_path / "bible"
    command = ["bash", os.path.join(REPO, "recipes", "data", "prepare-bible-es-en.sh"), "--out", str(out),
               "--sword-path", SWORD, "--source-module", ES, "--target-module", EN, "--valid-books", "Eccl",
               "--test-books", "Ruth,John,Rom", "--binarize", "--vocab-size", "100", "--workers", "1"]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["pairs"] == {"train": 11, "valid": 2, "test": 6}
    assert _lines(out / "raw" / "test.ref")[0] == "Ruth.1.1"
    # the book of each test line, for posnet-compare --test-groups
    assert _lines(out / "raw" / "test.book") == [ref.split(".")[0] for ref in _lines(out / "raw" / "test.ref")]
    assert set(_lines(out / "raw" / "test.book")) == {"Ruth", "John", "Rom"}
    assert f"--test-groups {out}/raw/test.book" in done.stderr
    assert (out / "data-bin" / "test.es-en.es.idx").is_file() and (out / "bpe" / "spm.model").is_file()
    assert f"--raw-test {out}/raw/test.es {out}/raw/test.en" in done.stderr
    again = subprocess.run(command, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "nothing to do" in again.stderr
    # a corpus prepared before test.book was written gets it from its test.ref
    books = (out / "raw" / "test.book").read_text()
    (out / "raw" / "test.book").unlink()
    again = subprocess.run(command, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and (out / "raw" / "test.book").read_text() == books
    refused = subprocess.run(command[:2] + ["--out", str(tmp_path / "x"), "--bogus"], env=env, capture_output=True,
                             text=True)
    assert refused.returncode != 0 and "unknown option --bogus" in refused.stderr
