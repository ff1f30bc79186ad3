"""Paired bootstrap resampling (Koehn 2004) for corpus-level BLEU / chrF: the plugin's one significance test.

Each resample draws n sentence indices with replacement and scores both
systems on the same draw from their per-sentence sufficient statistics
(sacrebleu's n-gram counts), so one resample costs a sum, not a re-score.
The p-value is the share of resamples in which the system is *not* better
than the baseline (``p_value_worse``: not worse); a difference is significant
when the two-sided p (:func:`two_sided`: twice the smaller one) is at most
0.05, the plugin's one level (posnet_fairseq.evaluation.crossed.LEVEL; the
PosNet paper's one-sided p <= 0.05 each way is a two-sided 10% test). :func:`against_first` scores
several systems on the same resamples and adds each one's bootstrap mean and
95% interval (the recipes' evaluation and ``posnet-compare`` both use it); :func:`difference` gives
the 95% interval of one system's difference from another.

    python -m posnet_fairseq.evaluation.bootstrap --ref REF --system HYP --baseline HYP
        [--metric bleu|chrf] [--tokenize 13a] [--lowercase] [--samples 1000] [--seed 12345]
"""
import argparse
import json

import numpy as np


def make_metric(metric="bleu", tokenize="13a", lowercase=False):
    from sacrebleu.metrics import BLEU, CHRF

    if metric == "bleu":
        return BLEU(tokenize=tokenize, lowercase=lowercase)
    if metric == "bleu-nosmooth":  # tokenized BLEU as multi-bleu.perl / fairseq-score compute it
        return BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method="none", force=True)
    if metric == "chrf":
        return CHRF(lowercase=lowercase)
    raise ValueError(f"--metric {metric}: expected bleu, bleu-nosmooth or chrf")


def sentence_stats(metric, hyps, refs):
    return np.asarray(metric._extract_corpus_statistics(hyps, [refs]), dtype=np.int64)


def corpus_score(metric, stats):
    return metric._compute_score_from_stats(stats.sum(axis=0).tolist()).score


def _resampled(stats, score, samples, seed):
    """[systems x samples] corpus scores on ``samples`` draws of n sentence indices with replacement, every
    system scored on the same draws; ``stats``: one [n x statistics] array per system."""
    rng = np.random.default_rng(seed)
    n = len(stats[0])
    scores = np.empty((len(stats), samples))
    for s in range(samples):
        idx = rng.integers(0, n, size=n)
        for k, rows in enumerate(stats):
            scores[k, s] = score(rows[idx])
    return scores


def _ends(ordered):
    """The 95% percentile interval of sorted resamples: the values n // 40 from either end (sacreBLEU's
    estimate_ci)."""
    cut = len(ordered) // 40
    return ordered[cut], ordered[len(ordered) - cut - 1]


def interval(resampled):
    """(mean, 95% half-width) of one system's resampled scores: half the width of :func:`_ends`."""
    ordered = np.sort(resampled)
    low, high = _ends(ordered)
    return float(ordered.mean()), float(0.5 * (high - low))


def _paired(sys_stats, base_stats, score, samples, seed):
    """Resamples sentence indices with replacement; ``score(stats rows)`` is the corpus score of a resample."""
    resampled = _resampled([sys_stats, base_stats], score, samples, seed)
    deltas = resampled[0] - resampled[1]
    return {
        "system": round(score(sys_stats), 4),
        "baseline": round(score(base_stats), 4),
        "mean_delta": round(float(np.mean(deltas)), 4),
        "samples": samples,
        "seed": seed,
        "p_value": round(int(np.sum(deltas <= 0)) / samples, 4),
        "p_value_worse": round(int(np.sum(deltas >= 0)) / samples, 4),
    }


def against_first(metric, systems, refs, samples=1000, seed=12345):
    """Every system of ``systems`` ([hypotheses per system]) on the same resamples: [{"score", "mean",
    "ci" (95% half-width), "p_value", "p_value_worse" (against the first system; None for the first)}]."""
    for hyps in systems:
        _check_sizes(hyps, systems[0], refs)
    stats = [sentence_stats(metric, hyps, refs) for hyps in systems]
    score = lambda rows: corpus_score(metric, rows)  # noqa: E731
    resampled = _resampled(stats, score, samples, seed)
    results = []
    for k, rows in enumerate(stats):
        mean, ci = interval(resampled[k])
        deltas = resampled[k] - resampled[0]
        first = k == 0
        results.append({"score": score(rows), "mean": mean, "ci": ci,
                        "p_value": None if first else int(np.sum(deltas <= 0)) / samples,
                        "p_value_worse": None if first else int(np.sum(deltas >= 0)) / samples})
    return results


def difference(metric, system, baseline, refs, samples=1000, seed=12345):
    """(system - baseline corpus score, low, high): the difference and its 95% interval, the ends of the
    sorted paired differences (:func:`_ends`) over ``samples`` resamples of the sentences."""
    _check_sizes(system, baseline, refs)
    stats = [sentence_stats(metric, hyps, refs) for hyps in (system, baseline)]
    score = lambda rows: corpus_score(metric, rows)  # noqa: E731
    resampled = _resampled(stats, score, samples, seed)
    low, high = _ends(np.sort(resampled[0] - resampled[1]))
    return score(stats[0]) - score(stats[1]), float(low), float(high)


def _check_sizes(system, baseline, refs):
    if not (len(system) == len(baseline) == len(refs)):
        raise ValueError(f"paired bootstrap needs equal sizes: system {len(system)}, baseline {len(baseline)}, "
                         f"references {len(refs)}")


def paired_bootstrap(metric, system, baseline, refs, samples=1000, seed=12345):
    """Scores of both systems, the mean resampled difference, p = P(system <= baseline) and
    p_value_worse = P(system >= baseline): the system is significantly better (worse) when p (p_value_worse)
    is at most the threshold."""
    _check_sizes(system, baseline, refs)
    sys_stats, base_stats = sentence_stats(metric, system, refs), sentence_stats(metric, baseline, refs)
    return _paired(sys_stats, base_stats, lambda stats: corpus_score(metric, stats), samples, seed)


def paired_bootstrap_means(system_scores, baseline_scores, samples=1000, seed=12345):
    """The same test for a metric whose corpus score is the mean of sentence scores (COMET, BLEURT, METEOR)."""
    _check_sizes(system_scores, baseline_scores, system_scores)
    as_rows = lambda scores: np.asarray(scores, dtype=np.float64).reshape(-1, 1)  # noqa: E731
    return _paired(as_rows(system_scores), as_rows(baseline_scores), lambda rows: float(rows.mean()), samples, seed)


def two_sided(result):
    """The two-sided p-value of a bootstrap result: twice the smaller one-sided one, at most 1."""
    return min(1.0, 2 * min(result["p_value"], result.get("p_value_worse", 1.0)))


def significance(result, threshold=0.05):
    """'better' or 'worse' when the bootstrap result's two-sided p (:func:`two_sided`) is at most ``threshold``
    and the system is ahead (behind), else None."""
    if two_sided(result) > threshold:
        return None
    return "better" if result["p_value"] < result.get("p_value_worse", 1.0) else "worse"


def _read(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", required=True)
    parser.add_argument("--system", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--metric", default="bleu", choices=["bleu", "bleu-nosmooth", "chrf"])
    parser.add_argument("--tokenize", default="13a")
    parser.add_argument("--lowercase", action="store_true")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args(argv)
    metric = make_metric(args.metric, args.tokenize, args.lowercase)
    try:
        result = paired_bootstrap(metric, _read(args.system), _read(args.baseline), _read(args.ref),
                                  args.samples, args.seed)
    except ValueError as err:
        parser.error(str(err))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
