"""Long test inputs made of real text: ``posnet-compare --concat-test K``.

After Varis & Bojar 2021, "Sequence length is a domain: Length-based overfitting in transformer models":
a real corpus has few sentences far beyond a training limit, but consecutive sentences of a document,
joined, are a longer input of the same text. Here:

* **Runs.** The test pairs, in the order of the test split (for a test file in document order,
  consecutive sentences), are cut into non-overlapping runs of K: pairs 1..K, K+1..2K, ... Each run
  becomes one example, its K sources joined with a space and its K references likewise, in the same
  order, so both sides hold the same K pairs. The last N mod K pairs, too few for a run, are not
  joined (a shorter run would put another length under the same label); results.md counts them.
  A run is K consecutive lines of the test split as given (empty pairs dropped), before any
  over-long pair is left out, so it may span a gap the test file itself has (a skipped verse, the
  end of one book and the start of the next).
* **Data.** The joined pairs are encoded with the run's SentencePiece model and appended to the test
  split after the natural pairs (one data-bin, one fairseq-generate per model). A joined example
  longer than every model of the run takes is left out and counted, as a natural pair is.
* **Scores.** The overall BLEU and chrF and the ordinary length buckets are the natural test
  sentences' only. The joined examples have length buckets of their own, all beyond the training
  lengths (from the training limit + 1, one training limit wide, at most MAX_BUCKETS), marked
  ``MARK``K in results.md, results.csv (``bleu_len_concatK_LO_HI``) and the plot. A joined example
  within the training lengths is counted, never scored: the in-range figures are of natural sentences,
  and a joined input is there only to reach beyond.
"""
import os
from typing import Dict, List, NamedTuple

from ..data.text import read_lines

MARK = "\u2295"  # (+): "joined", in the headers of results.md and under the plot's ticks
MAX_BUCKETS = 4


def join_runs(sources, targets, k):
    """([joined source], [joined target], tail): the non-overlapping runs of ``k`` consecutive pairs,
    each side joined with a space, and the number of pairs after the last full run (not joined)."""
    runs = len(sources) // k

    def join(side):
        return [" ".join(side[r * k:(r + 1) * k]) for r in range(runs)]

    return join(sources), join(targets), len(sources) - runs * k


def joined_test(raw_dir, k):
    """The joined pairs of ``raw_dir``/test.{src,tgt} (:func:`join_runs`) and the tail; ValueError naming
    --concat-test when the test split has fewer than ``k`` pairs."""
    sources, targets = (read_lines(os.path.join(raw_dir, f"test.{lang}")) for lang in ("src", "tgt"))
    if len(sources) < k:
        raise ValueError(f"--concat-test {k}: the test split has only {len(sources)} pairs, fewer than one run")
    return join_runs(sources, targets, k)


def _append(path, lines):
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def append_to_test(joined, k, raw_dir, text_dir, encode, positions=None):
    """Appends the ``joined`` pairs (:func:`joined_test`) to the test split: the raw text (the references)
    in ``raw_dir``, their pieces (``encode``: the run's SentencePiece model) in ``text_dir``; a pair over
    ``positions`` (the most (source, target) positions of the run's models, EOS included) is left out.
    Returns what results.md says of them: {k, runs, tail, examples, too_long}."""
    sources, targets, tail = joined
    kept = []
    for src, tgt in zip(sources, targets):
        pieces = encode(src), encode(tgt)
        if positions is None or all(len(p.split()) < n for p, n in zip(pieces, positions)):
            kept.append(((src, tgt), pieces))
    for side, lang in enumerate(("src", "tgt")):
        _append(os.path.join(raw_dir, f"test.{lang}"), [text[side] for text, _ in kept])
        _append(os.path.join(text_dir, f"test.{lang}"), [pieces[side] for _, pieces in kept])
    return {"k": k, "runs": len(sources), "tail": tail, "examples": len(kept), "too_long": len(sources) - len(kept)}


def separate(test_lengths, joined):
    """(the natural test sentences' lengths, ``joined`` with the joined examples' lengths): the test split
    holds the natural sentences first, then ``joined["examples"]`` joined ones. ``joined`` None: no
    --concat-test."""
    if not joined:
        return test_lengths, joined
    natural = len(test_lengths) - joined["examples"]
    return test_lengths[:natural], dict(joined, lengths=test_lengths[natural:])


def split_outputs(outputs, refs, src_tokens, tgt_tokens, natural):
    """The natural test sentences' part and the joined examples' part of the translations (``outputs[arch]``
    = (hypotheses, skipped ids)), references and token lengths; ids of the joined part start at 0."""
    def part(lo, hi):
        return ({arch: (hyps[lo:hi], [i - lo for i in skipped if lo <= i < hi])
                 for arch, (hyps, skipped) in outputs.items()}, refs[lo:hi], src_tokens[lo:hi], tgt_tokens[lo:hi])
    return part(0, natural), part(natural, len(refs))


class JoinedExamples(NamedTuple):
    """The joined examples of a run as its kept test and its test groups read them: each model's hypotheses,
    the references, the source lengths and {bucket label: ids} of the scored buckets beyond the training
    lengths (:func:`posnet_fairseq.compare.verdict.joined_kept_subsets`; with --test-groups, as
    :func:`posnet_fairseq.compare.test_groups.balance` leaves them)."""

    hypotheses: Dict[str, List[str]]
    references: List[str]
    lengths: List[int]
    beyond: Dict[str, List[int]]


def buckets(lengths, train_limit):
    """Length buckets (lo, hi) of the joined examples beyond ``train_limit``: one training limit wide from
    train_limit + 1, at most MAX_BUCKETS (the last takes everything longer)."""
    longest = max(lengths, default=0)
    spans, lo = [], train_limit + 1
    while lo <= longest:
        hi = longest if len(spans) == MAX_BUCKETS - 1 else min(lo + train_limit - 1, longest)
        spans.append((lo, hi))
        lo = hi + 1
    return spans


def bucket_name(lo, hi, k=None):
    """A bucket's name in results.csv and results.json's table (bleu_len_NAME): LO_HI, or concatK_LO_HI
    for joined examples (a joined bucket may span the same lengths as a natural one)."""
    return f"{lo}_{hi}" if not k else f"concat{k}_{lo}_{hi}"


def bucket_label(lo, hi, k=None):
    """A bucket's span as results.md and the plot show it: LO-HI, or (+)K LO-HI for joined examples."""
    return f"{lo}-{hi}" if not k else f"{MARK}{k} {lo}-{hi}"


def legend(summary, unit):
    """The lines of results.md that say what the joined buckets are (``summary``: quality.json's
    "concatenated"); none without --concat-test."""
    if not summary:
        return []
    k = summary["k"]
    return [f"- {MARK}{k}: concatenated, not natural sentences (`--concat-test {k}`, after Varis & Bojar 2021): "
            f"each example is {k} consecutive test pairs, sources joined with a space and references likewise; "
            f"{summary['runs']} non-overlapping runs, the last {summary['tail']} test pairs (fewer than {k}) not "
            f"joined; {summary['too_long']} left out as longer than the models take, "
            f"{summary['within_training']} not scored as within the training lengths. Only the {MARK}{k} buckets "
            f"hold them (source length in {unit}, all beyond the training lengths); BLEU and chrF of the whole test "
            "set and the other buckets are the natural sentences'."]


def plot_note(ax, buckets):
    """Sets the joined buckets apart in the BLEU-by-length heat map ``ax`` (one column per bucket of
    ``buckets``, results.json's): a dotted line before the first, and returns the line the x axis label
    gets to say what they are ("" without --concat-test)."""
    joined = [(c, b["concatenated"]) for c, b in enumerate(buckets) if b.get("concatenated")]
    if not joined:
        return ""
    ax.axvline(joined[0][0] - 0.5, color="0.2", linestyle=":", linewidth=1.6)
    k = joined[0][1]
    return (f"\nright of the dotted line, {MARK}{k}: concatenated, not natural sentences: {k} consecutive test "
            "pairs joined (--concat-test)")
