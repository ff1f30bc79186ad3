"""A test of a corpus score over training seeds and test sentences at once, for a crossed design: every seed
of both systems is scored on the same test sentences.

The estimate is the mean over k seed pairs of a per-seed effect d_s (e.g. corpus BLEU(model seed s) - corpus
BLEU(baseline seed s)). It varies with the seeds and with the test sentences; as the sentences are shared
by the seeds, their variance is one term common to all seeds plus a seed-by-sentence interaction (a
two-way crossed random-effects model; Searle, Casella & McCulloch 1992, "Variance Components", ch. 4):

    Var(mean d) = C + (tau^2 + I) / k,                                                   (1)

with tau^2 the seed variance, C the sentence variance common to the seeds and I the interaction. The
sample variance of the d_s estimates tau^2 + I (the common part cancels between seeds), and the sentence
covariance of two seeds' effects estimates C, so

    V = s_d^2 / k + C_hat,   C_hat = mean over seed pairs s != t of n * cov_i(z_si, z_ti),  (2)

where z_si is sentence i's influence on d_s: the delta method's linear term of a corpus score in its summed
sentence statistics (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", section 21.3; the same
variance as Koehn 2004's paired bootstrap over sentences, without resampling). The reference distribution
is Student's t on the seed level's k - 1 degrees of freedom:

    (mean d - effect) / sqrt(V) ~ t_{k-1}.                                               (3)

It is exact when the seed term dominates V, and conservative when the precisely known sentence term C_hat
does. Satterthwaite's (1946) degrees of freedom for the sum of the two terms would be larger, but they are
estimated from the same few seeds: when s_d^2 is small by chance they grow with it, and a simulation
(tests/test_verdict_calibration.py, docs/verdict-calibration.md) called a false better/worse in 7-10% of
replicates with 2 seeds. So few seeds widen the interval: t on k - 1 df, not a bootstrap that cannot reach
beyond the range of k per-seed effects; Clark et al. 2011 ("Better hypothesis testing for statistical
machine translation: controlling for optimizer instability", ACL) give the reason to count the seeds at
all. With one seed there is no seed variance to estimate: V is the one seed's sentence variance on n - 1
df, and the test ignores seed variance.

Everything is vectorised over leading axes, so a simulation tests thousands of replicates in one call.
"""
import numpy as np

LEVEL = 0.95  # two-sided: the one significance level of the plugin's tests
POWER = 0.80  # the power at which "the smallest detectable difference" is quoted
ORDER = 4  # BLEU's n-gram orders: statistics = [hypothesis length, reference length, matches 1-4, n-grams 1-4]


def _t():
    from scipy import stats  # pinned in requirements/runtime.txt

    return stats.t


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


def bleu_influence(stats, weights=None):
    """(corpus BLEU [...], each sentence's influence on it [..., n]) of per-sentence statistics [..., n, 10]:
    the gradient of :func:`bleu` at the summed statistics times each sentence's deviation from the mean
    sentence (the delta method's linear term; its sum over sentences is 0). d log BLEU / d matches_m =
    1 / (4 matches_m), d / d n-grams_m = -1 / (4 n-grams_m) (a smoothed order's too), and below the
    reference length d / d hypothesis length = ref / hyp^2, d / d reference length = -1 / hyp.

    ``weights`` [n] (None: all 1) scale each sentence's statistics before they are summed: corpus BLEU is a
    function of the summed statistics, so the weighted sum is exactly the BLEU of a test set holding each
    sentence ``weight`` times, and each sentence's influence is that of its weighted statistics
    (posnet_fairseq.compare.test_groups: a reference bucket balanced to another bucket's mix of groups)."""
    stats = np.asarray(stats, dtype=np.float64)
    if weights is not None:
        stats = stats * np.asarray(weights, dtype=np.float64)[:, None]
    summed = stats.sum(axis=-2)
    score = bleu(summed)
    sys_len, ref_len = summed[..., 0], summed[..., 1]
    correct, total = summed[..., 2:2 + ORDER], summed[..., 2 + ORDER:]
    grad = np.zeros_like(summed)
    with np.errstate(divide="ignore", invalid="ignore"):
        short = (sys_len < ref_len) & (sys_len > 0)
        grad[..., 0] = np.where(short, ref_len / sys_len ** 2, 0.0)
        grad[..., 1] = np.where(short, -1.0 / sys_len, 0.0)
        grad[..., 2:2 + ORDER] = np.where(correct > 0, 1.0 / (ORDER * correct), 0.0)
        grad[..., 2 + ORDER:] = np.where(total > 0, -1.0 / (ORDER * total), 0.0)
    grad *= score[..., None]  # d BLEU = BLEU * d log BLEU; a score of 0 has no slope
    deviations = stats - stats.mean(axis=-2, keepdims=True)
    return score, np.einsum("...ij,...j->...i", deviations, grad)


def t_test(effects, influence):
    """The crossed test of the mean of ``effects`` [..., k] (one per seed pair), given each sentence's
    influence on each seed's effect ``influence`` [..., k, n] (centred per stratum of sentences): a dict of
    arrays {"effect", "se", "df", "low", "high", "p", "seed_var" (s_d^2, NaN for one seed), "common"
    (C_hat, eq. 2; for one seed that seed's sentence variance)}, the interval at :data:`LEVEL`."""
    effects, influence = np.asarray(effects, dtype=np.float64), np.asarray(influence, dtype=np.float64)
    k, n = influence.shape[-2:]
    scale = n / (n - 1)  # the sentence variance of a sum over n sentences drawn from a population
    per_seed = scale * (influence ** 2).sum(axis=-1)
    if k == 1:
        seed_var, common = np.full(effects.shape[:-1], np.nan), per_seed[..., 0]
        variance, df = common, np.full(common.shape, n - 1.0)
    else:
        of_mean = scale * (influence.mean(axis=-2) ** 2).sum(axis=-1)
        common = np.maximum((k * k * of_mean - per_seed.sum(axis=-1)) / (k * (k - 1)), 0.0)  # eq. 2
        seed_var = effects.var(axis=-1, ddof=1)
        variance, df = seed_var / k + common, np.full(common.shape, k - 1.0)
    effect, se = effects.mean(axis=-1), np.sqrt(variance)
    t = _t()
    with np.errstate(divide="ignore", invalid="ignore"):
        half = t.ppf(0.5 + LEVEL / 2, df) * se
        p = np.where(se > 0, 2 * t.sf(np.abs(effect) / se, df), np.where(effect == 0, 1.0, 0.0))
    return {"effect": effect, "se": se, "df": df, "low": effect - half, "high": effect + half, "p": p,
            "seed_var": seed_var, "common": common}


def detectable(se, df, alpha=1 - LEVEL):
    """The smallest true difference a two-sided test at level ``alpha`` detects with :data:`POWER`:
    (t_{1-alpha/2} + t_{power}) * se on the test's df."""
    t = _t()
    return (t.ppf(1 - alpha / 2, df) + t.ppf(POWER, df)) * se


def seeds_needed(difference, seed_var, common, alpha=1 - LEVEL, most=100):
    """The fewest seeds k (2 to ``most``) with which :func:`t_test` at level ``alpha`` would detect a true
    ``difference`` with :data:`POWER`, from a run's seed variance and common sentence variance (eqs. 1-3);
    None when even ``most`` seeds would not (the test set's common sentence noise alone hides it)."""
    for k in range(2, most + 1):
        if detectable(np.sqrt(seed_var / k + common), k - 1, alpha) <= abs(difference):
            return k
    return None


def holm(p_values):
    """Holm's (1979, "A simple sequentially rejective multiple test procedure", Scand. J. Statistics 6(2))
    adjusted p-values of a family of tests: the i-th smallest p times (m - i + 1), kept monotone, capped at
    1. A test is significant at :data:`LEVEL` when its adjusted p is at most 1 - LEVEL; the chance of any false
    verdict in the family is then at most 1 - level."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(np.maximum.accumulate(p[order] * (m - np.arange(m))), 1.0)
    return adjusted
