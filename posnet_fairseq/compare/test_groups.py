"""Kept % balanced by groups of the test set: ``posnet-compare --test-groups FILE`` (issue 47).

Kept % divides BLEU on a bucket beyond the training lengths by BLEU on the reference bucket within them
(the longest scored one). When the test set mixes groups that translate unequally well, the two buckets
hold different mixes, and the ratio divides BLEU on one mix by BLEU on another: on the Bible test set the
17-32-piece bucket is 62% John, the 49-96 bucket 40% John and 24% Ruth, and the Transformer's BLEU at 17-32
pieces is 25.1 on John and 19.0 on Romans. FILE gives one label per natural test sentence, in the order of
the test set (any string, e.g. the book of each verse). With it:

* **Balanced reference.** For each bucket beyond, the reference bucket's per-sentence statistics are
  weighted so that each group has the share it has in that bucket: a sentence of group g weighs

      w = (b_g / b) / (r_g / r),                                                                (1)

  with b_g and r_g the group's sentences beyond and within, b and r the two buckets' sentences (of the
  groups both hold); the weights sum to r. sacreBLEU's corpus BLEU is a function of the summed
  sufficient statistics, so BLEU of the weighted sums is exact, and the crossed test's influence terms
  take the same weights (:func:`posnet_fairseq.evaluation.crossed.bleu_influence`).
* **A group beyond with no sentence within** cannot be balanced: its sentences are left out of that bucket
  (its kept % and its verdict), and results.md names the group and how many were left out.
* **Joined examples** (--concat-test K) take the group of their first pair when all K pairs share it, else
  :data:`MIXED`: a joined example that crosses a group boundary belongs to no group of the reference, so
  it is left out as above.
"""
import os
from collections import Counter

import numpy as np

from ..data.text import read_lines
from . import concatenated, verdict

MIXED = "mixed"  # the group of a joined example whose pairs' groups differ


def read(path, sentences, left_out=0):
    """The label of each natural test sentence from ``path``; ValueError naming --test-groups, the file and
    both counts when it does not hold one line per sentence (and ``left_out``: the test pairs the run left
    out as longer than its models take, where that is why)."""
    groups = [line.strip() for line in read_lines(path, "--test-groups")]
    if len(groups) != sentences:
        why = (f"; {left_out} test pairs were left out as longer than the models take: label the others"
               if left_out and len(groups) == sentences + left_out else "")
        raise ValueError(f"--test-groups {path}: {len(groups)} lines, but the test set has {sentences} natural "
                         f"test sentences (one label per sentence, in the test set's order){why}")
    return groups


def of_joined(groups, natural_refs, joined_refs, k):
    """The group of each joined example (``joined_refs``, in the order of the test split): the runs of ``k``
    consecutive natural pairs (``natural_refs``, :func:`posnet_fairseq.compare.concatenated.join_runs`) are
    matched in order by their joined reference, since a run longer than the models take was left out."""
    runs = concatenated.join_runs(natural_refs, natural_refs, k)[0]
    labels = [groups[r * k] if len(set(groups[r * k:(r + 1) * k])) == 1 else MIXED for r in range(len(runs))]
    out, run = [], 0
    for i, ref in enumerate(joined_refs):
        while run < len(runs) and runs[run] != ref:
            run += 1
        if run == len(runs):
            raise ValueError(f"--test-groups: joined test example {i + 1} is no run of {k} consecutive test pairs")
        out.append(labels[run])
        run += 1
    return out


def weights(within_groups, beyond_groups):
    """(the weight of each reference sentence, eq. 1; the indices of ``beyond_groups`` kept; {group: its
    sentences beyond left out, having none within}); weights None when no group beyond is within."""
    within, beyond = Counter(within_groups), Counter(beyond_groups)
    kept = [i for i, g in enumerate(beyond_groups) if g in within]
    left_out = {g: n for g, n in beyond.items() if g not in within}
    if not kept:
        return None, kept, left_out
    share = {g: beyond[g] / len(kept) for g in within}
    return [share[g] * len(within_groups) / within[g] for g in within_groups], kept, left_out


def balance(groups, within, beyond, beyond_groups=None):
    """(``beyond`` less the sentences of groups absent ``within``, {bucket label: each reference sentence's
    weight}) for the subsets of :func:`posnet_fairseq.compare.verdict.kept_subsets` (``groups``: of the natural
    sentences), or of :func:`~posnet_fairseq.compare.verdict.joined_kept_subsets` with ``beyond_groups``, the
    joined examples' groups; a bucket with no group within is dropped."""
    kept_ids, weight_of = {}, {}
    beyond_groups = groups if beyond_groups is None else beyond_groups
    for label, ids in beyond.items():
        w, kept, _ = weights([groups[i] for i in within], [beyond_groups[i] for i in ids])
        if w is not None:
            kept_ids[label], weight_of[label] = [ids[i] for i in kept], w
    return kept_ids, weight_of


def for_run(path, info):
    """(the group of each natural test sentence, of each joined example or None without --concat-test) of a
    run whose data step gave ``info`` (:class:`posnet_fairseq.compare.data.DataInfo`); ValueError (:func:`read`,
    :func:`of_joined`) naming --test-groups."""
    groups = read(path, info.test_sentences, (info.too_long or {}).get("test", 0))
    if not info.concatenated:
        return groups, None
    refs, natural = read_lines(info.references), info.test_sentences
    return groups, of_joined(groups, refs[:natural], refs[natural:], info.concatenated["k"])


def _mix(groups):
    """{group: sentences}, the largest first (ties by name)."""
    return dict(sorted(Counter(groups).items(), key=lambda item: (-item[1], item[0])))


def _bucket_kept(models, within_of, beyond_of, w, row):
    """{model: balanced kept %} of one bucket beyond (``row``: quality.json's); ``within_of(model)`` /
    ``beyond_of(model)``: its [n x 10] statistics. A model without a BLEU in the bucket, or with BLEU 0
    within, has none (as in the unbalanced table)."""
    out = {}
    for model in models:
        if not isinstance(row["scores"].get(model, {}).get("score"), float):
            continue
        share = verdict.kept_share(within_of(model)[None], beyond_of(model)[None], w)[0][0]
        if np.isfinite(share):  # BLEU 0 within: no kept %
            out[model] = float(share)
    return out


def summary(metric, path, within, natural, joined, rows):
    """quality.json's "test_groups": {"file": FILE's name, "mix": the reference bucket's {group: sentences},
    "buckets": {bucket name: {"label", "mix" (the groups kept), "left_out" ({group: sentences}), "kept"
    ({model: balanced kept %})}}} for every scored bucket beyond of ``rows`` (quality.json's buckets).
    ``within``: the reference bucket's ids (:func:`posnet_fairseq.compare.verdict.kept_subsets`);
    ``natural`` and ``joined`` (None without --concat-test): ({model: hypotheses}, references, lengths,
    groups) of the natural sentences and the joined examples."""
    hyps, refs, _, groups = natural
    reference = [groups[i] for i in within]
    within_of = lambda model: verdict.sentence_stats(  # noqa: E731
        metric, [hyps[model][i] for i in within], [refs[i] for i in within])
    out = {"file": os.path.basename(path), "mix": _mix(reference), "buckets": {}}
    for row in rows:
        if not row["beyond_training"] or row.get("too_small"):
            continue
        part_hyps, part_refs, lengths, part_groups = joined if row.get("concatenated") else natural
        ids = [i for i, n in enumerate(lengths) if row["lo"] <= n <= row["hi"]]
        w, kept, left_out = weights(reference, [part_groups[i] for i in ids])
        ids = [ids[i] for i in kept]
        beyond_of = lambda model: verdict.sentence_stats(  # noqa: E731
            metric, [part_hyps[model][i] for i in ids], [part_refs[i] for i in ids])
        out["buckets"][concatenated.bucket_name(row["lo"], row["hi"], row.get("concatenated"))] = {
            "label": concatenated.bucket_label(row["lo"], row["hi"], row.get("concatenated")),
            "mix": _mix([part_groups[i] for i in ids]), "left_out": left_out,
            "kept": {} if w is None else _bucket_kept(list(row["scores"]), within_of, beyond_of, w, row)}
    return out


def table_kept(groups_summary, bucket, model, unbalanced):
    """The kept % results.md's kept table prints for ``model`` in ``bucket`` (its name): ``unbalanced`` without
    --test-groups (``groups_summary`` None), else the balanced one of :func:`summary` (None: it has none)."""
    if groups_summary is None or bucket not in groups_summary["buckets"]:
        return unbalanced
    return groups_summary["buckets"][bucket]["kept"].get(model)


def _shares(mix):
    total = sum(mix.values())
    return ", ".join(f"{group} {100 * n / total:.0f}%" for group, n in mix.items())


def note(groups_summary, reference_label):
    """The lines under results.md's kept table: what the figures are balanced by, each bucket's group mix,
    and the groups left out; none without --test-groups."""
    if groups_summary is None:
        return ""
    buckets = groups_summary["buckets"].values()
    lines = [f"Balanced by the groups of `{groups_summary['file']}` (--test-groups): for each bucket, the "
             f"sentences of {reference_label} are weighted so that each group has the share it has in that bucket, "
             "and a group with no sentence there is left out of the bucket (posnet_fairseq.compare.test_groups); "
             f"a joined example takes its first pair's group, or \"{MIXED}\" when its pairs' groups differ.",
             f"Group mix: {reference_label} (reference, n={sum(groups_summary['mix'].values())}): "
             f"{_shares(groups_summary['mix'])}; "
             + "; ".join(f"{b['label']} (n={sum(b['mix'].values())}): {_shares(b['mix']) or 'none'}" for b in buckets)
             + "."]
    lines += [f"{b['label']}: left out " + ", ".join(f"{n} sentence{'s' * (n != 1)} of `{g}`"
                                                  for g, n in b["left_out"].items())
              + f", a group with no sentence in {reference_label}." for b in buckets if b["left_out"]]
    return "\n\n".join(lines)
