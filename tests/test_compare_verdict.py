"""posnet_fairseq/compare/verdict.py and seeds.py on constructed data where the answer is known: the two-level
paired bootstrap's BLEU is sacreBLEU's, a clearly better system is "better", identical ones show no detectable
difference, noise across seeds widens the interval; the seeds' names and their mean ± sd."""
import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from posnet_fairseq.compare import seeds, verdict

WORDS = [f"w{i}" for i in range(40)]


def _refs(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(3, 25))) for _ in range(n)]


def _system(refs, kept, seed):
    """Each reference word kept with probability ``kept``, else replaced by a word no reference has."""
    rng = np.random.default_rng(seed)
    return [" ".join(w if rng.random() < kept else "zz" for w in ref.split()) for ref in refs]


def _stats(refs, *kept_per_seed, offset=0):
    metric = BLEU(force=True)
    return [verdict.sentence_stats(metric, _system(refs, kept, offset + i), refs)
            for i, kept in enumerate(kept_per_seed)]


def test_bleu_of_summed_statistics_is_sacrebleus_corpus_bleu():
    metric = BLEU(force=True)
    refs = _refs(100)
    stats = verdict.sentence_stats(metric, _system(refs, 0.5, 1), refs)
    rng = np.random.default_rng(3)
    subsets = [rng.integers(0, len(refs), size=rng.integers(1, 12)) for _ in range(200)] + [np.arange(len(refs))]
    for ids in subsets:  # small subsets reach the smoothing and the no-match cases
        expected = metric._compute_score_from_stats(stats[ids].sum(axis=0).tolist()).score
        assert verdict.bleu(stats[ids].sum(axis=0)) == pytest.approx(expected, abs=1e-9)
    empty = verdict.sentence_stats(metric, [""] * 3, refs[:3])
    assert verdict.bleu(empty.sum(axis=0)) == 0.0 and metric.corpus_score([""] * 3, [refs[:3]]).score == 0.0


def test_a_bleu_the_vectorised_score_does_not_compute_is_refused():
    with pytest.raises(ValueError, match="exp smoothing"):
        verdict.sentence_stats(BLEU(smooth_method="floor"), ["a"], ["a"])


def test_a_clearly_better_system_is_better_and_identical_ones_are_not_different():
    refs = _refs()
    base = _stats(refs, 0.5, 0.5, 0.5)
    better = _stats(refs, 0.8, 0.8, 0.8, offset=10)
    result = verdict.compare(base, better, samples=300)
    assert result["verdict"] == "better" and result["seeds"] == 3
    assert 0 < result["low"] < result["effect"] < result["high"]
    assert verdict.compare(better, base, samples=300)["verdict"] == "worse"
    same = verdict.compare(base, base, samples=300)
    assert same == {"effect": 0.0, "low": 0.0, "high": 0.0, "verdict": "no detectable difference", "seeds": 3}
    assert verdict.compare(base, better, samples=300) == result  # seeded: the same interval again


def test_noise_across_seeds_widens_the_interval():
    refs = _refs()
    base = _stats(refs, 0.6, 0.6, 0.6)
    steady = verdict.compare(base, _stats(refs, 0.65, 0.65, 0.65, offset=20), samples=400)
    # the same quality on average, but the seeds disagree
    noisy = verdict.compare(base, _stats(refs, 0.45, 0.65, 0.85, offset=20), samples=400)
    assert noisy["high"] - noisy["low"] > 2 * (steady["high"] - steady["low"])
    assert noisy["verdict"] == "no detectable difference" and steady["verdict"] == "better"


def test_verdicts_split_in_range_from_beyond():
    """The model copies the references of short sentences and drops every word of long ones: better in range,
    worse beyond; no sentence beyond the limit gives no verdict there."""
    refs = _refs(120)
    lengths = [len(r.split()) for r in refs]
    base = _system(refs, 0.5, 1)
    model = [r if n <= 12 else "zz" for r, n in zip(refs, lengths)]
    hyps = {seeds.key(a, s, 1): h for s in (1, 2) for a, h in (("base", base), ("model", model))}
    found = verdict.verdicts(BLEU(force=True), ["base", "model"], [1, 2], hyps, lambda a, s: seeds.key(a, s, 1), refs,
                             verdict.by_length(lengths, 12), samples=200)
    assert found["model"]["in range"]["verdict"] == "better" and found["model"]["beyond"]["verdict"] == "worse"
    assert verdict.verdicts(BLEU(force=True), ["base", "model"], [1, 2], hyps, lambda a, s: seeds.key(a, s, 1),
                            refs, verdict.by_length(lengths, 100), samples=50)["model"]["beyond"] is None
    text = "\n".join(verdict.lines(found, "base", [1, 2], 200, 12, "words"))
    assert "## Verdict" in text and "- `model`: in range better (+" in text and "beyond worse (-" in text
    assert "ignores seed variance" not in text
    one = "\n".join(verdict.lines(found, "base", [1], 200, 12, "words"))
    assert "this verdict ignores seed variance" in one


@pytest.mark.parametrize("text, seed_list", [("3", [5, 6, 7]), ("1", [5]), ("2,9,4", [2, 9, 4]), ("7,", [7])])
def test_seeds_parse(text, seed_list):
    assert seeds.parse(text, 5) == seed_list


@pytest.mark.parametrize("text", ["0", "a", "1,1", "1,x"])
def test_bad_seeds_name_the_flag(text):
    with pytest.raises(ValueError, match="--seeds"):
        seeds.parse(text, 1)


def test_seed_names_keep_the_bare_name_for_the_first_seed():
    assert seeds.key("rope_transformer_tiny", 1, 1) == "rope_transformer_tiny"
    assert seeds.key("rope_transformer_tiny", 2, 1) == "rope_transformer_tiny.seed2"
    assert seeds.split("rope_transformer_tiny.seed2", 1) == ("rope_transformer_tiny", 2)
    assert seeds.split("rope_transformer_tiny", 1) == ("rope_transformer_tiny", 1)


def test_combine_gives_mean_sd_and_each_seed():
    row = seeds.combine([{"bleu": 10.0, "cell": "beyond its 16 positions"},
                         {"bleu": 14.0, "cell": "beyond its 16 positions"}], [1, 2])
    assert row == {"bleu": 12.0, "bleu_sd": pytest.approx(2 ** 0.5 * 2), "bleu_seed1": 10.0, "bleu_seed2": 14.0,
                   "cell": "beyond its 16 positions"}
    assert seeds.mean_sd(row, "bleu") == "12.0 ± 2.8" and seeds.mean_sd(row, "cell") == "beyond its 16 positions"
