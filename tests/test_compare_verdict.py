"""posnet_fairseq/compare/verdict.py, evaluation/crossed.py and seeds.py on constructed data where the answer is
known: the vectorised BLEU is sacreBLEU's, the delta-method variance is the paired bootstrap's, a clearly better
system is "better", identical ones show no detectable difference, noise across seeds widens the interval, the
seeds advice, Holm over a report's family, the kept share and its tests, the Verdict lines (two decimals, the
detectable difference); the seeds' names and their mean ± sd."""
import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from posnet_fairseq.compare import seeds, verdict
from posnet_fairseq.evaluation import crossed

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


def _test(base, model):
    return verdict.Test.of(verdict.compare(base, model), len(base), len(base[0]))


def test_bleu_of_summed_statistics_is_sacrebleus_corpus_bleu():
    metric = BLEU(force=True)
    refs = _refs(100)
    stats = verdict.sentence_stats(metric, _system(refs, 0.5, 1), refs)
    rng = np.random.default_rng(3)
    subsets = [rng.integers(0, len(refs), size=rng.integers(1, 12)) for _ in range(200)] + [np.arange(len(refs))]
    for ids in subsets:  # small subsets reach the smoothing and the no-match cases
        expected = metric._compute_score_from_stats(stats[ids].sum(axis=0).tolist()).score
        assert crossed.bleu(stats[ids].sum(axis=0)) == pytest.approx(expected, abs=1e-9)
    empty = verdict.sentence_stats(metric, [""] * 3, refs[:3])
    assert crossed.bleu(empty.sum(axis=0)) == 0.0 and metric.corpus_score([""] * 3, [refs[:3]]).score == 0.0


def test_a_bleu_the_vectorised_score_does_not_compute_is_refused():
    with pytest.raises(ValueError, match="exp smoothing"):
        verdict.sentence_stats(BLEU(smooth_method="floor"), ["a"], ["a"])


@pytest.mark.parametrize("kept, short", [(0.5, 1.0), (0.7, 0.8)])  # 0.8: below the reference length
def test_the_delta_method_variance_is_the_bootstraps(kept, short):
    """One seed pair: n x the variance of the sentences' influence is the variance of the BLEU difference
    over 2,000 paired resamples of the sentences (Koehn 2004), to their Monte Carlo error (3%, x3)."""
    refs = _refs(300)
    base = verdict.sentence_stats(BLEU(force=True), _system(refs, 0.5, 1), refs)
    hyps = [" ".join(h.split()[:max(1, int(short * len(h.split())))]) for h in _system(refs, kept, 2)]
    model = verdict.sentence_stats(BLEU(force=True), hyps, refs)
    counts = np.random.default_rng(0).multinomial(len(refs), np.full(len(refs), 1 / len(refs)), size=2000)
    resampled = crossed.bleu(counts @ model) - crossed.bleu(counts @ base)
    assert _test([base], [model]).se ** 2 == pytest.approx(resampled.var(), rel=0.1)


def test_a_clearly_better_system_is_better_and_identical_ones_are_not_different():
    refs = _refs()
    base = _stats(refs, 0.5, 0.5, 0.5)
    better = _stats(refs, 0.8, 0.8, 0.8, offset=10)
    result = _test(base, better)
    assert result.verdict == "better" and result.seeds == 3 and result.df == 2
    assert 0 < result.low < result.effect < result.high
    assert _test(better, base).verdict == "worse"
    same = _test(base, base)
    assert (same.effect, same.se, same.p, same.verdict) == (0.0, 0.0, 1.0, "no detectable difference")


def test_noise_across_seeds_widens_the_interval():
    refs = _refs()
    base = _stats(refs, 0.6, 0.6, 0.6)
    steady = _test(base, _stats(refs, 0.7, 0.7, 0.7, offset=20))
    # the same quality on average, but the seeds disagree
    noisy = _test(base, _stats(refs, 0.5, 0.7, 0.9, offset=20))
    assert noisy.high - noisy.low > 2 * (steady.high - steady.low)
    assert noisy.verdict == "no detectable difference" and steady.verdict == "better"
    assert noisy.seeds_needed(noisy.effect) is None or noisy.seeds_needed(noisy.effect) > 3
    assert noisy.detectable() > abs(noisy.effect)


def test_seeds_needed_falls_with_the_difference_and_stops_at_the_sentence_noise():
    need = [crossed.seeds_needed(d, seed_var=4.0, common=0.01) for d in (1.0, 2.0, 4.0, 8.0)]
    assert need[0] > need[1] > need[2] > need[3] >= 2
    # that many seeds detect 4 BLEU with 80% power: (t_.975 + t_.8 on k - 1 df) x sd(mean) <= 4 ...
    k = need[2]
    assert crossed.detectable(np.sqrt(4.0 / k + 0.01), k - 1) <= 4.0
    # ... and one seed fewer would not
    assert crossed.detectable(np.sqrt(4.0 / (k - 1) + 0.01), k - 2) > 4.0
    assert crossed.seeds_needed(0.5, seed_var=4.0, common=0.5) is None  # sd 0.71 of the shared sentences alone


def test_holm_adjusts_a_family():
    assert crossed.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert crossed.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # kept monotone: 0.9 x 1 < 0.5 x 2


def test_the_verdicts_of_a_report_are_corrected_together():
    """A p of 0.03 alone is "better"; in a family of two with a p of 0.5 its Holm-adjusted p is 0.06."""
    refs = _refs()
    alone = _test(_stats(refs, 0.5, 0.5), _stats(refs, 0.8, 0.8, offset=10)).as_json()
    close = dict(alone, effect=0.4, p=0.03)
    far = dict(alone, effect=-0.1, p=0.5)
    given = {"m": {"in range": close, "beyond": far, "joined": None}}
    found, kept = verdict.corrected(given, {})
    assert found["m"]["in range"]["adjusted_p"] == pytest.approx(0.06) and found["m"]["in range"]["family"] == 2
    assert found["m"]["in range"]["verdict"] == "no detectable difference" and close["p"] <= 0.05
    assert given["m"]["in range"] is close and close["adjusted_p"] is None  # the caller's mapping left as it was


def test_kept_share_and_its_tests():
    refs = _refs(200)
    lengths = [len(r.split()) for r in refs]
    within, beyond = [i for i, n in enumerate(lengths) if n <= 12], [i for i, n in enumerate(lengths) if n > 12]
    metric = BLEU(force=True)
    hyps = {seeds.key(a, s, 1): _system(refs, kept, 10 * s + (a == "m")) for s in (1, 2, 3)
            for a, kept in (("b", 0.5), ("m", 0.5))}
    for s in (1, 2, 3):  # the model drops the last word of every long sentence: it keeps less
        hyps[seeds.key("m", s, 1)] = [" ".join(h.split()[:-1]) if n > 12 else h
                                      for h, n in zip(hyps[seeds.key("m", s, 1)], lengths)]
    share, _ = verdict.kept_share(
        [verdict.sentence_stats(metric, [hyps["b"][i] for i in within], [refs[i] for i in within])],
        [verdict.sentence_stats(metric, [hyps["b"][i] for i in beyond], [refs[i] for i in beyond])])
    expected = 100 * (metric.corpus_score([hyps["b"][i] for i in beyond], [[refs[i] for i in beyond]]).score
                      / metric.corpus_score([hyps["b"][i] for i in within], [[refs[i] for i in within]]).score)
    assert share[0] == pytest.approx(expected)
    tests = verdict.kept(metric, ["b", "m"], [1, 2, 3], hyps, lambda a, s: seeds.key(a, s, 1), refs, within,
                         {"13-24": beyond})
    base, model = tests["b"]["13-24"], tests["m"]["13-24"]
    assert base["against"] is None and base["kept"]["sentences"] == len(within) + len(beyond)
    assert base["kept"]["low"] < base["kept"]["effect"] < base["kept"]["high"]
    assert model["against"]["verdict"] == "worse" and model["against"]["effect"] < 0
    found, kept = verdict.corrected({"m": {"in range": None, "beyond": None}}, tests)
    text = "\n".join(verdict.lines(found, kept, "b", [1, 2, 3], 12, "words", "1-12"))
    assert f"- `m` 13-24 (n={len(beyond)}, of {len(within)} within): " in text and "against `b` worse (" in text


def test_joined_buckets_are_kept_against_the_natural_reference():
    """--concat-test's joined examples: their buckets' kept % and its test over the natural reference bucket;
    the model halves every joined hypothesis, so it keeps less there and as much on the natural sentences."""
    refs = _refs(200)
    lengths = [len(r.split()) for r in refs]
    within, beyond = [i for i, n in enumerate(lengths) if n <= 12], [i for i, n in enumerate(lengths) if n > 12]
    joined_refs = [refs[i] + " " + refs[i + 1] for i in range(0, 200, 2)]
    metric, name = BLEU(force=True), lambda a, s: seeds.key(a, s, 1)  # noqa: E731
    hyps, joined = {}, {}
    for s in (1, 2, 3):
        for a in ("b", "m"):
            hyps[name(a, s)] = _system(refs, 0.5, 10 * s + (a == "m"))
            whole = [hyps[name(a, s)][i] + " " + hyps[name(a, s)][i + 1] for i in range(0, 200, 2)]
            joined[name(a, s)] = [h if a == "b" else " ".join(h.split()[:len(h.split()) // 2]) for h in whole]
    buckets = [{"lo": 20, "hi": 60, "concatenated": 2, "too_small": False},
               {"lo": 61, "hi": 99, "concatenated": 2, "too_small": True}]
    subsets = verdict.joined_kept_subsets(buckets, [len(r.split()) for r in joined_refs])
    assert list(subsets) == ["\u22952 20-60"] and subsets["\u22952 20-60"]
    tests = verdict.kept(metric, ["b", "m"], [1, 2, 3], hyps, name, refs, within, {"13-24": beyond},
                         joined=(joined, joined_refs, subsets))
    entry, ids = tests["m"]["\u22952 20-60"], subsets["\u22952 20-60"]
    assert entry["sentences"] == len(ids) and entry["kept"]["sentences"] == len(within) + len(ids)
    assert entry["against"]["verdict"] == "worse" and tests["m"]["13-24"]["against"]["verdict"] != "worse"
    per_seed = [100 * metric.corpus_score([joined[name("m", s)][i] for i in ids], [[joined_refs[i] for i in ids]]).score
                / metric.corpus_score([hyps[name("m", s)][i] for i in within], [[refs[i] for i in within]]).score
                for s in (1, 2, 3)]
    assert entry["kept"]["effect"] == pytest.approx(np.mean(per_seed), rel=1e-9)
    found, kept = verdict.corrected({"m": {"in range": None, "beyond": None}}, tests)
    assert kept["m"]["\u22952 20-60"]["against"]["family"] == 2  # both kept verdicts against the baseline


def test_verdicts_split_in_range_from_beyond():
    """The model copies the references of short sentences and drops every word of long ones: better in range,
    worse beyond; no sentence beyond the limit gives no verdict there."""
    refs = _refs(120)
    lengths = [len(r.split()) for r in refs]
    model = [r if n <= 12 else "zz" for r, n in zip(refs, lengths)]
    hyps = {seeds.key(a, s, 1): h for s in (1, 2) for a, h in (("base", _system(refs, 0.5, s)), ("model", model))}
    name = lambda a, s: seeds.key(a, s, 1)  # noqa: E731
    found = verdict.verdicts(BLEU(force=True), ["base", "model"], [1, 2], hyps, name, refs,
                             verdict.by_length(lengths, 12))
    assert found["model"]["in range"]["verdict"] == "better" and found["model"]["beyond"]["verdict"] == "worse"
    assert verdict.verdicts(BLEU(force=True), ["base", "model"], [1, 2], hyps, name, refs,
                            verdict.by_length(lengths, 100))["model"]["beyond"] is None
    found, kept = verdict.corrected(found, {})
    text = "\n".join(verdict.lines(found, kept, "base", [1, 2], 12, "words"))
    assert "## Verdict" in text and "- `model`: in range better (+" in text and "beyond worse (-" in text
    assert "This report makes 2 tests" in text and "Holm" in text and "ignores seed variance" not in text
    effect = found["model"]["in range"]["effect"]
    assert f"better ({effect:+.2f} BLEU, 95% interval " in text  # two decimals
    one = "\n".join(verdict.lines(found, kept, "base", [1], 12, "words"))
    assert "this verdict ignores seed variance" in one


def test_an_undecided_verdict_says_what_the_run_would_detect():
    refs = _refs()
    base = _stats(refs, 0.6, 0.6, 0.6)
    test = _test(base, _stats(refs, 0.45, 0.65, 0.85, offset=20))
    found, _ = verdict.corrected({"m": {"in range": test.as_json(), "beyond": None}}, {})
    line = verdict.lines(found, {}, "b", [1, 2, 3], 12, "words")[-2]
    assert line.startswith("- `m`: in range no detectable difference (")
    test = verdict.Test.read(found["m"]["in range"])  # a family of one: the level is 0.05
    assert test.alpha == pytest.approx(0.05) and f"detectable: ±{test.detectable():.2f} BLEU" in line
    need = test.seeds_needed(test.effect)
    assert (f"{need} seeds would detect" if need else "no number of seeds would detect") in line


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
