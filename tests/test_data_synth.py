"""posnet_fairseq/data/synth.py, synth_grammar.py, synth_lexicon.py: the embedded synthetic corpus (grammar, lexicon,
reordering, determinism, splits)."""
import random
import runpy
import sys

import pytest

from posnet_fairseq.data import synth, synth_lexicon
from posnet_fairseq.data.synth_grammar import NP, PP, Clause, RelClause, Sentence, render, sample_sentence

SPLITS = ("train", "valid", "test")


@pytest.fixture(scope="module")
def sample():
    return synth.generate_pairs(2000, seed=1)


def one_clause(subject, verb, obj=None, pp=None):
    return render(Sentence((Clause(subject, verb, obj, pp),)))


# --- determinism and corpus shape ----------------------------------------------------


def test_same_seed_same_pairs_and_different_seed_differs():
    a = synth.generate_pairs(300, seed=7)
    assert a == synth.generate_pairs(300, seed=7)
    b = synth.generate_pairs(300, seed=8)
    assert len(set(a) & set(b)) < 30


def test_smaller_request_is_a_prefix():
    assert synth.generate_pairs(50, seed=3) == synth.generate_pairs(120, seed=3)[:50]


def test_write_corpus_is_byte_identical_and_splits_disjoint(tmp_path):
    sizes = dict(train=1500, valid=200, test=200)
    stats = synth.write_corpus(tmp_path / "a", seed=5, **sizes)
    synth.write_corpus(tmp_path / "b", seed=5, **sizes)
    lines = {}
    for split in SPLITS:
        for lang in ("src", "tgt"):
            name = f"{split}.{lang}"
            data = (tmp_path / "a" / name).read_bytes()
            assert data == (tmp_path / "b" / name).read_bytes()
            lines[split, lang] = data.decode("utf-8").splitlines()
        assert len(lines[split, "src"]) == len(lines[split, "tgt"]) == sizes[split] == stats[split]
    pairs = {s: set(zip(lines[s, "src"], lines[s, "tgt"])) for s in SPLITS}
    assert not pairs["train"] & pairs["valid"]
    assert not pairs["train"] & pairs["test"]
    assert not pairs["valid"] & pairs["test"]
    # no source sentence appears twice, even with a different translation
    all_src = [src for s in SPLITS for src in lines[s, "src"]]
    assert len(set(all_src)) == len(all_src)
    assert stats["mean_tgt_len"] > stats["mean_src_len"]
    assert stats["src_tgt_ratio"] == pytest.approx(stats["mean_src_len"] / stats["mean_tgt_len"], abs=2e-3)


def test_test_split_does_not_depend_on_train_size(tmp_path):
    synth.write_corpus(tmp_path / "small", train=100, valid=50, test=50, seed=2)
    synth.write_corpus(tmp_path / "large", train=900, valid=50, test=50, seed=2)
    for name in ("test.src", "test.tgt", "valid.tgt"):
        assert (tmp_path / "small" / name).read_bytes() == (tmp_path / "large" / name).read_bytes()


def test_lengths(sample):
    src_lens = [len(src.split()) for src, _ in sample]
    tgt_lens = [len(tgt.split()) for _, tgt in sample]
    assert max(src_lens + tgt_lens) <= 60
    assert sum(n > 30 for n in src_lens) >= 20
    assert 12 <= sum(src_lens) / len(sample) <= 20
    assert sum(tgt_lens) > 1.1 * sum(src_lens)
    short = synth.generate_pairs(300, seed=1, max_len=15)
    assert max(max(len(s.split()), len(t.split())) for s, t in short) <= 15


def test_format_and_vocabularies(sample):
    src_vocab = {w for src, _ in sample for w in src.split()}
    tgt_vocab = {w for _, tgt in sample for w in tgt.split()}
    for src, tgt in sample:
        assert src.endswith(" .") and tgt.endswith(" .")
        assert src == src.lower() and "  " not in src and "  " not in tgt
    # nothing can be translated by copying, apart from the final "."
    assert src_vocab & tgt_vocab == {"."}
    assert 100 <= len(src_vocab) <= 250 and 100 <= len(tgt_vocab) <= 250


def test_translation_is_a_function_of_the_source():
    # An ambiguous grammar would give one source string two translations.
    rng = random.Random(0)
    seen = {}
    for _ in range(5000):
        src, tgt = render(sample_sentence(rng))
        assert seen.setdefault(src, tgt) == tgt


def test_length_buckets_cover_the_lengths_evenly():
    assert synth.length_buckets(50, 5) == [(1, 10), (11, 20), (21, 30), (31, 40), (41, 50)]
    assert synth.length_buckets(25, 2) == [(1, 12), (13, 25)]
    with pytest.raises(ValueError):
        synth.length_buckets(3, 5)


def test_sample_sentence_with_a_fixed_number_of_clauses():
    rng = random.Random(4)
    for clauses in (1, 4, 7):
        sentence = sample_sentence(rng, clauses)
        assert len(sentence.clauses) == clauses and len(sentence.conjunctions) == clauses - 1
    with pytest.raises(ValueError):
        sample_sentence(rng, 0)


def test_length_stratified_test_set(tmp_path):
    sizes = dict(train=300, valid=30, test=50, max_len=12, test_max_len=45, test_buckets=3, seed=6)
    synth.write_corpus(tmp_path / "a", **sizes)
    synth.write_corpus(tmp_path / "b", **dict(sizes, train=100))

    def lines(run, name):
        return (tmp_path / run / name).read_text().splitlines()

    test_src = lines("a", "test.src")
    counts = [sum(lo <= len(s.split()) <= hi for s in test_src) for lo, hi in [(1, 15), (16, 30), (31, 45)]]
    assert counts == [17, 17, 16] and len(test_src) == 50
    for split in ("train", "valid"):
        for lang in ("src", "tgt"):
            assert max(len(s.split()) for s in lines("a", f"{split}.{lang}")) <= 12
    # every test sentence is a translation the grammar defines, none is seen in training
    assert not set(test_src) & set(lines("a", "train.src") + lines("a", "valid.src"))
    assert len(set(test_src)) == len(test_src)
    assert all(t.endswith(" .") for t in lines("a", "test.tgt"))
    # the test set depends neither on the train size nor on chance
    assert lines("a", "test.tgt") == lines("b", "test.tgt")
    assert lines("a", "valid.src") == lines("b", "valid.src")


def test_cli_length_control(tmp_path, capsys):
    out = tmp_path / "corpus"
    assert synth.main(["--out-dir", str(out), "--train", "50", "--valid", "5", "--test", "20", "--max-len", "10",
                       "--test-max-len", "40", "--test-buckets", "4"]) == 0
    lengths = sorted(len(s.split()) for s in (out / "test.src").read_text().splitlines())
    assert lengths[-1] > 30 and lengths[0] <= 10
    assert max(len(s.split()) for s in (out / "train.tgt").read_text().splitlines()) <= 10


# --- transfer rules on constructed examples --------------------------------------------


def test_lexicon_and_determiner_agreement_follow_the_noun_class():
    assert one_clause(NP("dog"), "sleep") == ("the dog sleeps .", "ko nuzon gefni ro .")
    assert one_clause(NP("cat"), "sleep") == ("the cat sleeps .", "ke bolor gefni re .")
    assert one_clause(NP("hat", plural=True, definite=False), "sleep") == (
        "some hats sleep .", "mas nisuras gefni ras .")
    # same source determiner and adjectives, different noun class -> different target determiner
    for noun, (stem, vowel) in synth_lexicon.NOUNS.items():
        src, tgt = one_clause(NP(noun, definite=False, adjectives=("big", "red")), "run")
        assert src.split()[:4] == ["a", "big", "red", noun]
        assert tgt.split()[:2] == ["m" + vowel, stem]


def test_adjectives_follow_the_noun_in_mirror_order():
    src, tgt = one_clause(NP("dog", adjectives=("big", "red")), "sleep")
    assert src == "the big red dog sleeps ."
    assert tgt.split()[:4] == ["ko", "nuzon", synth_lexicon.ADJECTIVES["red"], synth_lexicon.ADJECTIVES["big"]]


def test_prepositions_become_postpositions():
    src, tgt = one_clause(NP("dog", pp=PP("with", NP("hat"))), "sleep", pp=PP("in", NP("house", definite=False)))
    assert src == "the dog with the hat sleeps in a house ."
    assert tgt == "ko nuzon ka nisur kom ma sebul ini gefni ro ."


def test_verb_moves_to_the_end_of_the_clause_with_object_particle():
    obj = NP("cat", definite=False, adjectives=("old",), pp=PP("of", NP("king", plural=True)))
    src, tgt = one_clause(NP("dog"), "see", obj, PP("near", NP("river", adjectives=("blue",))))
    assert src.split()[2] == "sees"
    assert src == "the dog sees a old cat of the kings near the blue river ."
    tgt = tgt.split()
    assert tgt[-3:] == [synth_lexicon.TRANSITIVE_VERBS["see"], "ro", "."]
    assert synth_lexicon.TRANSITIVE_VERBS["see"] not in tgt[:-3]
    # the object is marked by "nu" directly after the whole object NP
    assert tgt[tgt.index("nu") - 1] == synth_lexicon.NP_PREPOSITIONS["of"]


def test_main_verb_agrees_with_a_distant_subject():
    # the subject head is separated from its verb by a relative clause, object and PP
    subject = NP("frog", plural=True, rc=RelClause("help", NP("tiger", adjectives=("tired",)), subject_gap=True))
    src, tgt = one_clause(subject, "keep", NP("book"), PP("behind", NP("tower")))
    assert src == "the frogs that help the tired tiger keep the book behind the tower ."
    assert synth_lexicon.NOUNS["frog"][1] == "a" and synth_lexicon.NOUNS["tiger"][1] == "o"
    tgt = tgt.split()
    assert tgt[-3:] == [synth_lexicon.TRANSITIVE_VERBS["keep"], "ras", "."]
    # the relative clause is verb-final too and agrees with its head noun ("frogs")
    rc_verb = tgt.index(synth_lexicon.TRANSITIVE_VERBS["help"])
    assert tgt[rc_verb - 1] == "nu" and tgt[rc_verb + 1] == "ras"
    # with a singular o-class subject the same sentence gets "ro"
    _, tgt_sg = one_clause(NP("tiger"), "keep", NP("book"))
    assert tgt_sg.split()[-2] == "ro"


def test_object_relative_agrees_with_its_own_subject():
    head = NP("hat", rc=RelClause("see", NP("dog", plural=True), subject_gap=False))
    src, tgt = one_clause(head, "fall")
    assert src == "the hat that the dogs see falls ."
    assert tgt == "ka nisur ki kos nuzonos libbu ros subse ra ."


def test_coordinated_clauses_are_translated_one_by_one():
    first = Clause(NP("dog"), "sleep")
    second = Clause(NP("cat", plural=True), "like", NP("flower"))
    src, tgt = render(Sentence((first, second), ("but",)))
    assert src == "the dog sleeps but the cats like the flower ."
    assert tgt == "ko nuzon gefni ro ama kes bolores ke fuban nu sandi res ."


def test_generated_single_clauses_agree_with_their_subject(sample):
    # data-level check of rule 6: the subject head is the first noun form in the source
    forms = {noun: (noun, False) for noun in synth_lexicon.NOUNS}
    forms.update({noun + "s": (noun, True) for noun in synth_lexicon.NOUNS})
    checked = 0
    for src, tgt in sample:
        if any(conj in src.split() for conj in synth_lexicon.CONJUNCTIONS):
            continue
        noun, plural = next(forms[w] for w in src.split() if w in forms)
        assert tgt.split()[-2] == "r" + synth_lexicon.NOUNS[noun][1] + ("s" if plural else "")
        checked += 1
    assert checked > 500


@pytest.mark.parametrize("sentence", [
    Sentence((Clause(NP("dog", pp=PP("in", NP("house"))), "sleep"),)),  # adverbial prep inside NP
    Sentence((Clause(NP("dog"), "sleep", pp=PP("with", NP("hat"))),)),  # NP prep on a clause
    Sentence((Clause(NP("dog"), "see"),)),  # transitive verb without object
    Sentence((Clause(NP("dog", rc=RelClause("see", NP("cat", rc=RelClause("like", NP("cow"))))), "run"),)),
    Sentence((Clause(NP("dog", adjectives=("big", "red", "old")), "run"),)),
    Sentence((Clause(NP("unicorn"), "run"),)),
    Sentence((Clause(NP("dog"), "run"), Clause(NP("cat"), "run"))),  # missing conjunction
])
def test_render_rejects_structures_outside_the_grammar(sentence):
    with pytest.raises(ValueError):
        render(sentence)


# --- command line -------------------------------------------------------------------


def test_cli_writes_six_files(tmp_path, capsys):
    out = tmp_path / "corpus"
    assert synth.main(["--out-dir", str(out), "--train", "40", "--valid", "5", "--test", "6",
                       "--src-lang", "de", "--tgt-lang", "en", "--seed", "3"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(f"{s}.{lang}" for s in SPLITS for lang in ("de", "en"))
    assert len((out / "test.en").read_text().splitlines()) == 6
    assert "train=40" in capsys.readouterr().out


@pytest.mark.parametrize("args, flag", [
    (["--train", "0"], "--train"),
    (["--valid", "-3"], "--valid"),
    (["--max-len", "5"], "--max-len"),
    (["--src-lang", "x", "--tgt-lang", "x"], "--src-lang"),
    (["--test-max-len", "12", "--test-buckets", "5"], "--test-max-len"),
    (["--test", "3", "--test-max-len", "50", "--test-buckets", "5"], "--test"),
])
def test_cli_rejects_bad_flags(tmp_path, capsys, args, flag):
    with pytest.raises(SystemExit) as exc:
        synth.main(["--out-dir", str(tmp_path / "c"), *args])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


@pytest.mark.filterwarnings("ignore:'posnet_fairseq.data.synth' found in sys.modules:RuntimeWarning")
def test_python_dash_m_entry_point(tmp_path, monkeypatch):
    # runpy executes the module as "__main__" like ``python -m`` does, without
    # paying for a fresh interpreter that imports fairseq.
    argv = ["posnet_fairseq.data.synth", "--out-dir", str(tmp_path), "--train", "20", "--valid", "5", "--test", "5"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exc:
        runpy.run_module("posnet_fairseq.data.synth", run_name="__main__")
    assert exc.value.code == 0
    assert len(list(tmp_path.iterdir())) == 6
