"""Paired bootstrap resampling (Koehn 2004) for corpus-level BLEU / chrF.

Each resample draws n sentence indices with replacement and scores both
systems on the same draw from their per-sentence sufficient statistics
(sacrebleu's n-gram counts), so one resample costs a sum, not a re-score.
The p-value is the share of resamples in which the system is *not* better
than the baseline; the PosNet paper marks differences with p <= 0.05.

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


def paired_bootstrap(metric, system, baseline, refs, samples=1000, seed=12345):
    """Returns scores of both systems, the mean resampled difference and p = P(system <= baseline)."""
    if not (len(system) == len(baseline) == len(refs)):
        raise ValueError(f"paired bootstrap needs equal sizes: system {len(system)}, baseline {len(baseline)}, "
                         f"references {len(refs)}")
    sys_stats, base_stats = sentence_stats(metric, system, refs), sentence_stats(metric, baseline, refs)
    rng = np.random.default_rng(seed)
    n = len(refs)
    not_better, deltas = 0, []
    for _ in range(samples):
        idx = rng.integers(0, n, size=n)
        delta = corpus_score(metric, sys_stats[idx]) - corpus_score(metric, base_stats[idx])
        deltas.append(delta)
        not_better += delta <= 0
    return {
        "system": round(corpus_score(metric, sys_stats), 4),
        "baseline": round(corpus_score(metric, base_stats), 4),
        "mean_delta": round(float(np.mean(deltas)), 4),
        "samples": samples,
        "seed": seed,
        "p_value": round(not_better / samples, 4),
    }


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
