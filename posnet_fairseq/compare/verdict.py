"""The verdict of a ``posnet-compare`` run: is each model better than the baseline (the first architecture),
worse, or not detectably different, within the training lengths and beyond them, and does it keep more of its
BLEU beyond them, counting the variance between training seeds as well as the variance between test
sentences.

Every model trains once per seed (Clark et al. 2011, "Better hypothesis testing for statistical machine
translation: controlling for optimizer instability", ACL), the baseline's seed s is paired with the model's
seed s, and every seed is scored on the same test sentences: a crossed design. The test is
:func:`posnet_fairseq.evaluation.crossed.t_test` (a t-test on the mean per-seed effect whose variance sums
the seed variance and the sentence variance common to the seeds, on the seed level's k - 1 degrees of
freedom; the module's eqs. 1-3), with each sentence's influence on corpus BLEU from the delta method. Two kinds of
effect, each the mean over the seed pairs:

* BLEU: corpus BLEU(model) - corpus BLEU(baseline) on a subset of the test sentences (in range, beyond,
  the joined examples of --concat-test);
* kept: 100 x BLEU on a bucket beyond the training lengths (of natural sentences, or of the joined examples of
  --concat-test) / BLEU on the longest bucket of natural sentences within them (:func:`kept`), its interval for
  each model and its difference from the baseline's.

A report asks many questions at once, so its verdicts are corrected together (:func:`corrected`): the family
is every BLEU verdict and every kept-against-the-baseline verdict of the report, and Holm's procedure keeps
the chance of any false better/worse in it at most 5%. A model is better (worse) when its Holm-adjusted p is
at most 0.05 and its effect is positive (negative); else it shows no detectable difference, which is not
evidence of equality: the line gives the smallest difference the run would detect with 80% power and, from
the run's own variances, how many seeds the observed difference would need. With one seed the test only
counts the test sentences, and the verdict says that it ignores seed variance.

Corpus BLEU is sacreBLEU's (its signature in results.md), computed from summed per-sentence statistics
(:func:`posnet_fairseq.evaluation.bootstrap.sentence_stats`). docs/verdict-calibration.md has the method's
calibration (tests/test_verdict_calibration.py).
"""
import copy
import dataclasses
from typing import Optional

import numpy as np

from ..evaluation import bootstrap, crossed
from .concatenated import bucket_label

BETTER, WORSE, UNDECIDED = "better", "worse", "no detectable difference"


def sentence_stats(metric, hyps, refs):
    """[sentences x 10] BLEU statistics of ``hyps`` against ``refs``; ValueError for a BLEU that
    :func:`posnet_fairseq.evaluation.crossed.bleu` does not compute as sacreBLEU does (not exp smoothing,
    another order, effective order)."""
    if (metric.smooth_method, metric.max_ngram_order, metric.effective_order) != ("exp", crossed.ORDER, False):
        raise ValueError("the verdict computes sacreBLEU's corpus BLEU with exp smoothing and 4-grams only")
    return bootstrap.sentence_stats(metric, hyps, refs)


def decided(p):
    """Whether a test with (adjusted) p-value ``p`` says better or worse: two-sided, at the plugin's one level."""
    return np.asarray(p) <= 1 - crossed.LEVEL


def compare(base, model):
    """The crossed test (a dict of arrays, :func:`posnet_fairseq.evaluation.crossed.t_test`) of corpus
    BLEU(model) - corpus BLEU(base); ``base``, ``model``: [..., k seeds, n sentences, 10] statistics (or a
    list of k [n x 10] arrays), seed pairs in the same order, every seed on the same sentences."""
    base_score, base_influence = crossed.bleu_influence(np.asarray(base))
    model_score, model_influence = crossed.bleu_influence(np.asarray(model))
    return crossed.t_test(model_score - base_score, model_influence - base_influence)


def kept_share(within, beyond, weights=None):
    """(kept [..., k], influence [..., k, n_within + n_beyond]) of 100 x BLEU(beyond) / BLEU(within) per seed
    from the statistics [..., k, n, 10] of two disjoint sets of test sentences (each influence centred on
    its own set); NaN where BLEU within is 0. ``weights`` [n_within]: each sentence's weight within (a
    group-balanced reference, :mod:`posnet_fairseq.compare.test_groups`); None: all 1."""
    return _kept_of(crossed.bleu_influence(np.asarray(within), weights), beyond)


def _kept_of(reference, beyond):
    """:func:`kept_share` from ``reference``, the (score, influence) of the set within
    (:func:`~posnet_fairseq.evaluation.crossed.bleu_influence`), which :func:`kept` computes once per model for
    the buckets that weight it alike."""
    score_in, influence_in = reference
    score_out, influence_out = crossed.bleu_influence(np.asarray(beyond))
    with np.errstate(divide="ignore", invalid="ignore"):
        kept = 100 * score_out / score_in
        influence = np.concatenate([(-kept / score_in)[..., None] * influence_in,
                                    (100 / score_in)[..., None] * influence_out], axis=-1)
    return kept, influence


@dataclasses.dataclass(frozen=True)
class Test:
    """One test of the report, as quality.json keeps it (:meth:`as_json`, :meth:`read`)."""

    effect: float
    se: float
    df: float
    low: float
    high: float
    p: float
    seeds: int
    sentences: int
    seed_var: Optional[float]  # the per-seed effects' variance; None with one seed
    common: float  # the sentence variance common to the seeds (one seed: its sentence variance)
    adjusted_p: Optional[float] = None  # Holm over the report's family (:func:`corrected`)
    family: Optional[int] = None  # the number of tests in that family

    @classmethod
    def of(cls, result, seeds, sentences):
        value = {key: float(result[key]) for key in ("effect", "se", "df", "low", "high", "p", "common")}
        seed_var = float(result["seed_var"])
        return cls(**value, seeds=seeds, sentences=sentences, seed_var=None if np.isnan(seed_var) else seed_var)

    @classmethod
    def read(cls, entry):
        return cls(**{f.name: entry.get(f.name) for f in dataclasses.fields(cls)})

    @property
    def verdict(self):
        if not decided(self.p if self.adjusted_p is None else self.adjusted_p):
            return UNDECIDED
        return BETTER if self.effect > 0 else WORSE

    def as_json(self):
        return dict(dataclasses.asdict(self), verdict=self.verdict)

    @property
    def alpha(self):
        """The level a test of the family must reach for sure: Bonferroni's 0.05 / m, which Holm's procedure
        is at least as lenient as (0.05 alone, before :func:`corrected`)."""
        return (1 - crossed.LEVEL) / (self.family or 1)

    def detectable(self):
        """The smallest true difference this test detects with 80% power at :attr:`alpha`."""
        return float(crossed.detectable(self.se, self.df, self.alpha))

    def seeds_needed(self, difference):
        """Seeds that would detect a true ``difference`` with 80% power at :attr:`alpha`; None: none would (or
        one seed: no seed variance to go by)."""
        if self.seed_var is None:
            return None
        return crossed.seeds_needed(difference, self.seed_var, self.common, self.alpha)


def by_length(lengths, train_limit):
    """The test sentences within and beyond the training lengths: {"in range": ids, "beyond": ids};
    ``lengths``: each test sentence's source length."""
    return {"in range": [i for i, n in enumerate(lengths) if n <= train_limit],
            "beyond": [i for i, n in enumerate(lengths) if n > train_limit]}


def _stats_of(metric, seeds, hypotheses, name, refs):
    """stats(arch, ids): [k seeds x len(ids) x 10], every seed of ``arch`` on the test sentences ``ids``."""
    def stats(arch, ids):
        return np.stack([sentence_stats(metric, [hypotheses[name(arch, s)][i] for i in ids], [refs[i] for i in ids])
                         for s in seeds])
    return stats


def verdicts(metric, archs, seeds, hypotheses, name, refs, subsets):
    """{arch: {SUBSET: Test.as_json() or None}} for every arch but the first (the baseline) and every subset
    of ``subsets`` ({SUBSET: ids of test sentences}, e.g. :func:`by_length`); ``hypotheses[name(arch, seed)]``:
    its translation of every test sentence. None: no test sentence in that subset. Uncorrected: see
    :func:`corrected`."""
    stats = _stats_of(metric, seeds, hypotheses, name, refs)
    base = {subset: stats(archs[0], ids) for subset, ids in subsets.items() if ids}
    return {arch: {subset: Test.of(compare(base[subset], stats(arch, ids)), len(seeds), len(ids)).as_json()
                   if ids else None for subset, ids in subsets.items()} for arch in archs[1:]}


def kept_subsets(buckets, lengths, train_limit):
    """(ids of the kept reference bucket, {bucket label: ids} beyond the training lengths) for ``buckets``
    ([(lo, hi, too_small)] of the natural test sentences): the reference is the longest scored bucket within
    them, as results.md's kept table has it; (None, {}) without one."""
    scored = [(lo, hi) for lo, hi, small in buckets if not small]
    within = [b for b in scored if b[0] <= train_limit]
    if not within:
        return None, {}
    ids = lambda lo, hi: [i for i, n in enumerate(lengths) if lo <= n <= hi]  # noqa: E731
    return ids(*within[-1]), {bucket_label(lo, hi): ids(lo, hi) for lo, hi in scored if lo > train_limit}


def joined_kept_subsets(rows, lengths):
    """{bucket label: ids} of the joined examples (``lengths``: their source lengths) in each scored bucket of
    ``rows`` (quality.json's buckets) that holds them, all beyond the training lengths."""
    return {bucket_label(row["lo"], row["hi"], row["concatenated"]):
            [i for i, n in enumerate(lengths) if row["lo"] <= n <= row["hi"]]
            for row in rows if row.get("concatenated") and not row["too_small"]}


def _references(stats, weight, buckets):
    """{bucket: the (score, influence) of the reference bucket's statistics ``stats`` as ``weight(bucket)``
    weights them}: one pair shared by every bucket without weights of its own (all of them in an unbalanced
    run), one per balanced bucket."""
    plain = crossed.bleu_influence(stats) if any(weight(b) is None for b in buckets) else None
    return {b: plain if weight(b) is None else crossed.bleu_influence(stats, weight(b)) for b in buckets}


def kept(metric, archs, seeds, hypotheses, name, refs, within, beyond, weights=None, joined=None):
    """{arch: {bucket label: {"kept": Test.as_json() of the arch's kept %, "against": of its difference from
    the baseline's (None for the baseline), "sentences": the bucket's, "within": the reference bucket's}}}
    for ``within`` and ``beyond`` of :func:`kept_subsets`; a bucket where a model has no BLEU within the
    training lengths is left out. ``weights``: {bucket label: the weight of each sentence of ``within``}, a
    reference balanced to that bucket's groups (:func:`posnet_fairseq.compare.test_groups.balance`; its
    entries then say so: "balanced"); None: unweighted. ``joined``: (hypotheses, references, {bucket label:
    ids}) of the joined examples (:func:`joined_kept_subsets`), their buckets kept against the same natural
    reference bucket. A joined example is made of test pairs, some of them in that bucket: the test takes the
    two as independent sentences, leaving out their covariance, which is positive where a pair translated
    better alone is translated better joined too; the interval is then wider than it need be."""
    natural = _stats_of(metric, seeds, hypotheses, name, refs)
    parts = [(natural, beyond)]
    if joined:
        parts.append((_stats_of(metric, seeds, joined[0], name, joined[1]), joined[2]))
    sizes = {bucket: len(ids) for _, buckets in parts for bucket, ids in buckets.items()}
    if within is None or not sizes:  # no reference bucket, or none beyond it
        return {arch: {} for arch in archs}
    weight = (weights or {}).get
    shares = {}
    for arch in archs:
        reference = _references(natural(arch, within), weight, sizes)
        shares[arch] = {bucket: _kept_of(reference[bucket], stats(arch, ids))
                        for stats, buckets in parts for bucket, ids in buckets.items()}
    out = {arch: {} for arch in archs}
    for arch in archs:
        for bucket, (share, influence) in shares[arch].items():
            base_share, base_influence = shares[archs[0]][bucket]
            if not (np.isfinite(share).all() and np.isfinite(base_share).all()):
                continue
            n = len(within) + sizes[bucket]
            against = (None if arch == archs[0] else
                       Test.of(crossed.t_test(share - base_share, influence - base_influence), len(seeds), n).as_json())
            out[arch][bucket] = {"kept": Test.of(crossed.t_test(share, influence), len(seeds), n).as_json(),
                                 "against": against, "sentences": sizes[bucket], "within": len(within)}
            if weights:
                out[arch][bucket]["balanced"] = True
    return out


def _family(verdict, kept_tests):
    """Every test of the report's family, as (its entry's dict, the key it sits under)."""
    for sides in verdict.values():
        for side, entry in sides.items():
            if entry is not None:
                yield sides, side
    for per_bucket in (kept_tests or {}).values():
        for entry in per_bucket.values():
            if entry["against"] is not None:
                yield entry, "against"


def corrected(verdict, kept_tests):
    """``verdict`` (:func:`verdicts`, with "joined" added where the run has it) and ``kept_tests``
    (:func:`kept`) with Holm's adjusted p-values and verdicts over their family: every BLEU verdict and every
    kept-against-the-baseline verdict of the report; the arguments are left as they were."""
    verdict, kept_tests = copy.deepcopy(verdict), copy.deepcopy(kept_tests)
    members = list(_family(verdict, kept_tests))
    adjusted = crossed.holm([holder[key]["p"] for holder, key in members])
    for (holder, key), p in zip(members, adjusted):
        holder[key] = dataclasses.replace(Test.read(holder[key]), adjusted_p=float(p),
                                          family=len(members)).as_json()
    return verdict, kept_tests


def _advice(test, unit, digits):
    """Why an undecided verdict is not evidence of equality, with the run's numbers (item of the verdict line)."""
    need, effect = test.seeds_needed(test.effect), f"{test.effect:+.{digits}f}"
    seeds = ("one seed cannot say how many seeds it would need" if test.seed_var is None
             else f"{need} seeds would detect {effect} with 80% power" if need
             else f"no number of seeds would detect {effect}: the test sentences' noise hides it")
    return f"; detectable: ±{test.detectable():.{digits}f} {unit}; {seeds}"


def _phrase(entry, unit="BLEU", digits=2):
    if entry is None:
        return "no test sentences"
    test = Test.read(entry)
    p = "" if test.adjusted_p is None else f", adjusted p {test.adjusted_p:.3f}"
    text = (f"{test.verdict} ({test.effect:+.{digits}f} {unit}, 95% interval {test.low:+.{digits}f} to "
            f"{test.high:+.{digits}f}{p}")
    return text + (_advice(test, unit, digits) if test.verdict == UNDECIDED else "") + ")"


def _method(base, seeds, train_limit, unit):
    if len(seeds) == 1:
        what = (f"one seed ({seeds[0]}): this verdict ignores seed variance, since the test can only count the "
                "test sentences; train more seeds (--seeds 3) for a verdict that counts it")
    else:
        what = (f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), the baseline's seed s paired with the "
                "model's seed s")
    return (f"Each model against `{base}`, in range (sources of at most {train_limit} {unit}) and beyond: better, "
            "worse or no detectable difference, with the mean BLEU difference over the seeds and its 95% interval "
            "from a t-test over the seeds and the test sentences (every seed scored on the same sentences: the "
            "variance between the seeds plus the sentence variance they share, on Student's t with k - 1 degrees "
            f"of freedom for k seeds; Clark et al. 2011; docs/verdict-calibration.md); {what}.")


def _family_line(verdict, kept_tests, base):
    m = sum(1 for _ in _family(verdict, kept_tests))
    return (f"This report makes {m} tests: every BLEU verdict below and every kept verdict against `{base}`. "
            "They are corrected together by Holm's procedure (Holm 1979): a verdict is better or worse when its "
            "adjusted p is at most 0.05, so the chance of any false better/worse among the "
            f"{m} is at most 5%. Each interval is its own test's 95% interval, uncorrected. No detectable "
            "difference is not evidence of equality: such a line gives the smallest difference the run would "
            f"detect with 80% power (detectable) and how many seeds its observed difference would need, both at "
            f"0.05 / {m} (Bonferroni's level, which Holm's is at least as lenient as).")


def _kept_lines(kept_tests, base, within_label):
    balanced = any(entry.get("balanced") for per_bucket in kept_tests.values() for entry in per_bucket.values())
    out = ["", f"Kept: BLEU beyond the training lengths in % of the model's own BLEU on {within_label}"
           + (" (balanced to each bucket's groups: see the kept table)" if balanced else "") + ", the mean "
           "over the seeds with its 95% interval over the seeds and the sentences of both buckets (n: the "
           f"bucket's sentences, then the reference bucket's), and its difference from `{base}`'s in points:", ""]
    for arch, per_bucket in kept_tests.items():
        for bucket, entry in per_bucket.items():
            test = Test.read(entry["kept"])
            against = "" if entry["against"] is None else f"; against `{base}` {_phrase(entry['against'], 'points', 1)}"
            out.append(f"- `{arch}` {bucket} (n={entry['sentences']}, of {entry['within']} within): "
                       f"{test.effect:.1f}% (95% interval {test.low:.1f} to {test.high:.1f}){against}")
    return out


def lines(verdict, kept_tests, base, seeds, train_limit, unit, within_label=None):
    """The "Verdict" section of results.md: one line per model, within and beyond the training lengths (and
    on the joined test examples of --concat-test beyond them, where the run has them), then the kept share
    per bucket beyond them (``within_label``: the reference bucket's label)."""
    out = ["## Verdict", "", _method(base, seeds, train_limit, unit), ""]
    if not verdict:
        return out + ["No model to compare with the baseline.", ""]
    out += [_family_line(verdict, kept_tests, base), ""]
    for arch, sides in verdict.items():
        joined = f"; joined test examples (--concat-test) {_phrase(sides['joined'])}" if "joined" in sides else ""
        out.append(f"- `{arch}`: in range {_phrase(sides['in range'])}; beyond {_phrase(sides['beyond'])}{joined}")
    if kept_tests and any(kept_tests.values()):
        out += _kept_lines(kept_tests, base, within_label)
    return out + [""]
