"""posnet_fairseq/evaluation/bootstrap.py: paired bootstrap resampling of corpus metrics and of sentence-score means;
better/worse is a two-sided test at 5%."""
import pytest

from posnet_fairseq.evaluation import bootstrap


REFS = [f"the cat number {i} sat on the mat today" for i in range(40)]
GOOD = list(REFS)
BAD = [f"a dog number {i} stood near a rug" for i in range(40)]


def test_bootstrap_identical_systems_are_not_significant():
    res = bootstrap.paired_bootstrap(bootstrap.make_metric("bleu"), GOOD, GOOD, REFS, samples=200)
    assert res["p_value"] == 1.0 and res["mean_delta"] == 0.0


def test_bootstrap_clearly_better_system():
    metric = bootstrap.make_metric("bleu")
    res = bootstrap.paired_bootstrap(metric, GOOD, BAD, REFS, samples=200)
    assert res["p_value"] == 0.0 and res["system"] == 100.0 and res["baseline"] < 30
    reverse = bootstrap.paired_bootstrap(metric, BAD, GOOD, REFS, samples=200)
    assert reverse["p_value"] == 1.0


def test_bootstrap_mixed_system_is_seed_deterministic_and_matches_corpus_score():
    mixed = GOOD[:20] + BAD[20:]
    metric = bootstrap.make_metric("chrf")
    a = bootstrap.paired_bootstrap(metric, mixed, BAD, REFS, samples=100, seed=7)
    b = bootstrap.paired_bootstrap(metric, mixed, BAD, REFS, samples=100, seed=7)
    assert a == b
    assert a["system"] == pytest.approx(metric.corpus_score(mixed, [REFS]).score, abs=1e-3)
    # half the sentences perfect, the other half as the baseline's: better in every resample, never worse
    assert (a["p_value"], a["p_value_worse"], bootstrap.significance(a)) == (0.0, 1.0, "better")


def test_bootstrap_unequal_sizes():
    with pytest.raises(ValueError, match="equal sizes"):
        bootstrap.paired_bootstrap(bootstrap.make_metric("bleu"), GOOD[:3], GOOD, REFS)


def test_bootstrap_of_sentence_score_means():
    res = bootstrap.paired_bootstrap_means([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], samples=50)
    assert (res["system"], res["p_value"], res["p_value_worse"]) == (2.5, 1.0, 1.0)
    assert bootstrap.significance(res) is None
    res = bootstrap.paired_bootstrap_means([0.5] * 20, [0.4] * 20, samples=50)
    assert (res["p_value"], res["p_value_worse"], bootstrap.significance(res)) == (0.0, 1.0, "better")


@pytest.mark.parametrize("p_value, p_value_worse, two_sided, direction", [
    (0.04, 0.96, 0.08, None),  # one-sided 4%: a two-sided 8%, not significant at the plugin's 5%
    (0.02, 0.98, 0.04, "better"),
    (0.99, 0.01, 0.02, "worse"),
    (0.6, 0.6, 1.0, None),  # ties counted both ways: capped at 1
])
def test_significance_is_two_sided_at_5_percent(p_value, p_value_worse, two_sided, direction):
    result = {"p_value": p_value, "p_value_worse": p_value_worse}
    assert bootstrap.two_sided(result) == pytest.approx(two_sided)
    assert bootstrap.significance(result) == direction


def test_difference_and_its_interval():
    metric = bootstrap.make_metric("bleu")
    assert bootstrap.difference(metric, GOOD, GOOD, REFS, samples=100) == (0.0, 0.0, 0.0)
    delta, low, high = bootstrap.difference(metric, GOOD, BAD, REFS, samples=200)
    res = bootstrap.paired_bootstrap(metric, GOOD, BAD, REFS, samples=200)
    assert delta == pytest.approx(res["system"] - res["baseline"], abs=1e-3)
    assert 0 < low <= high  # better in every resample: the interval excludes 0
    mixed = GOOD[:20] + BAD[20:]
    delta, low, high = bootstrap.difference(metric, mixed, BAD, REFS, samples=200)
    assert low < delta < high and high - low > 1  # half the sentences differ: resamples spread
    with pytest.raises(ValueError, match="equal sizes"):
        bootstrap.difference(metric, GOOD[:3], GOOD, REFS)
