"""The verdict of a ``posnet-compare`` run: is each model better than the baseline (the first architecture),
worse, or not detectably different, within the training lengths and beyond them, counting the variance
between training seeds as well as the variance between test sentences.

The test is a two-level paired bootstrap. Several trainings of one system differ by their seed as much as
systems differ (Clark et al. 2011, "Better hypothesis testing for statistical machine translation:
controlling for optimizer instability", ACL): a test over the sentences of one training each ignores that.
Following their advice, every model trains once per seed and the baseline's seed s is paired with the
model's seed s. Each of ``samples`` resamples then

1. draws k seed pairs with replacement from the k pairs (the seed level), and
2. for each drawn pair, draws the n test sentences of the subset with replacement (the sentence level,
   Koehn 2004's paired bootstrap: both systems of a pair are scored on the same draw),

and takes the mean over the drawn pairs of corpus BLEU(model) - corpus BLEU(baseline): resampling the
clusters (seeds) and then the units inside them is the hierarchical bootstrap of Davison & Hinkley 1997,
"Bootstrap methods and their application", section 3.8. The effect is the mean over the seed pairs of the
corpus BLEU difference on the whole subset; its 95% interval the 2.5 and 97.5 percentiles of the
resampled differences. A model is better (worse) when the interval lies above (below) zero, and else
shows no detectable difference. With one seed the seed level draws the one pair every time: the test is
the paired bootstrap over sentences, and the verdict says that it ignores seed variance. With few seeds
the seed level sees little of the seed variance (k seeds are drawn from k), so the interval is, if
anything, too narrow.

Corpus BLEU is sacreBLEU's (its signature in results.md) computed from summed per-sentence sufficient
statistics (:func:`posnet_fairseq.evaluation.bootstrap.sentence_stats`), all resamples at once
(:func:`bleu`); the resampling is seeded (:data:`SEED`), so a verdict is reproducible.
"""
import numpy as np

from ..evaluation import bootstrap
from .quality import SEED  # the resampling's seed: the sentence-level bootstrap's

LEVEL = 0.95
ORDER = 4  # BLEU's n-gram orders: statistics = [hypothesis length, reference length, matches 1-4, n-grams 1-4]


def sentence_stats(metric, hyps, refs):
    """[sentences x 10] BLEU statistics of ``hyps`` against ``refs``; ValueError for a BLEU that
    :func:`bleu` does not compute as sacreBLEU does (not exp smoothing, another order, effective order)."""
    if (metric.smooth_method, metric.max_ngram_order, metric.effective_order) != ("exp", ORDER, False):
        raise ValueError("the verdict computes sacreBLEU's corpus BLEU with exp smoothing and 4-grams only")
    return bootstrap.sentence_stats(metric, hyps, refs)


def bleu(stats):
    """sacreBLEU's corpus BLEU (exp smoothing, 4-grams) of summed statistics [..., 10], for every row at once:
    the brevity penalty times the geometric mean of the n-gram precisions, where the m-th order without a
    match counts 1 / 2^m matches (mteval's smoothing), and an order without n-grams (and those above it)
    ends the score."""
    stats = np.asarray(stats, dtype=np.float64)
    sys_len, ref_len = stats[..., 0], stats[..., 1]
    correct, total = stats[..., 2:2 + ORDER], stats[..., 2 + ORDER:]
    with np.errstate(divide="ignore", invalid="ignore"):
        penalty = np.where(sys_len >= ref_len, 1.0, np.where(sys_len > 0, np.exp(1 - ref_len / sys_len), 0.0))
        unmatched = correct == 0
        precision = np.where(unmatched, 100.0 / (2.0 ** np.cumsum(unmatched, axis=-1) * total),
                             100.0 * correct / total)
        ended = np.cumsum(total == 0, axis=-1) > 0
        # sacreBLEU floors log(0) at -9999999999: the score is then 0 to float precision.
        logs = np.where(ended, -9999999999.0, np.log(np.where(ended, 1.0, precision)))
    score = penalty * np.exp(logs.mean(axis=-1))
    return np.where(correct.sum(axis=-1) > 0, score, 0.0)


def compare(base, model, samples=1000, seed=SEED):
    """The two-level paired bootstrap of ``model`` against ``base`` (each a list, one [sentences x 10]
    statistics array per seed, seed pairs in the same order): {"effect", "low", "high", "verdict",
    "seeds"}."""
    k, n = len(base), len(base[0])
    rng = np.random.default_rng(seed)
    effect = float(np.mean([bleu(m.sum(axis=0)) - bleu(b.sum(axis=0)) for b, m in zip(base, model)]))
    deltas = np.zeros(samples)
    for _ in range(k):  # one drawn seed pair per pass
        pairs = rng.integers(0, k, size=samples)
        drawn_ids = rng.integers(0, n, size=(samples, n)) + n * np.arange(samples)[:, None]
        counts = np.bincount(drawn_ids.ravel(), minlength=samples * n).reshape(samples, n).astype(np.float64)
        for q in range(k):
            chosen = pairs == q
            if chosen.any():
                drawn = counts[chosen]
                deltas[chosen] += bleu(drawn @ model[q]) - bleu(drawn @ base[q])
    deltas /= k
    low, high = (float(v) for v in np.percentile(deltas, [50 * (1 - LEVEL), 100 - 50 * (1 - LEVEL)]))
    verdict = "better" if low > 0 else "worse" if high < 0 else "no detectable difference"
    return {"effect": effect, "low": low, "high": high, "verdict": verdict, "seeds": k}


def by_length(lengths, train_limit):
    """The test sentences within and beyond the training lengths: {"in range": ids, "beyond": ids};
    ``lengths``: each test sentence's source length."""
    return {"in range": [i for i, n in enumerate(lengths) if n <= train_limit],
            "beyond": [i for i, n in enumerate(lengths) if n > train_limit]}


def verdicts(metric, archs, seeds, hypotheses, name, refs, subsets, samples=1000):
    """{arch: {SUBSET: result or None}} for every arch but the first (the baseline) and every subset of
    ``subsets`` ({SUBSET: ids of test sentences}, e.g. :func:`by_length`); ``hypotheses[name(arch, seed)]``:
    its translation of every test sentence. None: no test sentence in that subset."""
    stats = {}

    def of(arch, seed, ids):
        hyps = hypotheses[name(arch, seed)]
        return sentence_stats(metric, [hyps[i] for i in ids], [refs[i] for i in ids])

    result = {}
    for arch in archs[1:]:
        result[arch] = {}
        for subset, ids in subsets.items():
            if not ids:
                result[arch][subset] = None
                continue
            for a in (archs[0], arch):
                for s in seeds:
                    if (a, s, subset) not in stats:
                        stats[a, s, subset] = of(a, s, ids)
            result[arch][subset] = compare([stats[archs[0], s, subset] for s in seeds],
                                           [stats[arch, s, subset] for s in seeds], samples)
    return result


def _phrase(result):
    if result is None:
        return "no test sentences"
    return (f"{result['verdict']} ({result['effect']:+.1f} BLEU, 95% interval {result['low']:+.1f} to "
            f"{result['high']:+.1f})")


def lines(verdict, base, seeds, samples, train_limit, unit):
    """The "Verdict" section of results.md: one line per model, within and beyond the training lengths (and
    on the joined test examples of --concat-test beyond them, where the run has them)."""
    out = ["## Verdict", ""]
    if len(seeds) == 1:
        what = (f"one seed ({seeds[0]}): this verdict ignores seed variance, since the test can only resample "
                "test sentences; train more seeds (--seeds 3) for a verdict that counts it")
    else:
        what = (f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), the baseline's seed s paired with the "
                "model's seed s")
    out += [f"Each model against `{base}`, in range (sources of at most {train_limit} {unit}) and beyond: better, "
            "worse or no detectable difference, with the mean BLEU difference over the seeds and its 95% "
            f"interval from a two-level paired bootstrap ({samples} resamples, seed {SEED}: seed pairs, then the "
            f"test sentences; Clark et al. 2011); {what}.", ""]
    if not verdict:
        out += ["No model to compare with the baseline.", ""]
    for arch, sides in verdict.items():
        joined = f"; joined test examples (--concat-test) {_phrase(sides['joined'])}" if "joined" in sides else ""
        out.append(f"- `{arch}`: in range {_phrase(sides['in range'])}; beyond {_phrase(sides['beyond'])}{joined}")
    return out + [""]
