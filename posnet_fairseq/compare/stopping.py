"""Where decoding stopped: per source-length bucket, the share of a model's test hypotheses that ended too
early, about right or too late, and the share that ran to fairseq-generate's length limit without EOS.

The bucket's hypothesis / reference length (``length_ratio`` of :mod:`posnet_fairseq.compare.quality`) is
one number for the whole bucket: 0.8 may be every sentence a fifth short, or a third of them cut in half
and the rest right. This table tells them apart, sentence by sentence:

* **ratio** r = hypothesis / reference length in sacreBLEU's tokens (those of the bucket's length ratio);
* **too early**: r < :data:`EARLY` (0.8); **about right**: 0.8 <= r <= :data:`LATE` (1.2); **too late**:
  r > 1.2. Why these bounds: on the synthetic corpus the reference is the one correct translation and an
  in-range model's sentences sit at r = 1 (a dropped or repeated word moves a 20-word sentence by 0.05),
  so +-20 % is a stopping error, not a wording one; on real text a translator's own length varies by
  sentence, and a fifth is the width beyond which BLEU's brevity penalty alone costs a fifth of the
  score (exp(1 - 1 / 0.8) = 0.78). The three shares add up to 1.
* **at the limit**: fairseq-generate stops a hypothesis by force after
  ``min(int(a * S + b), max_target_positions - 1)`` tokens (``SequenceGenerator``: S is the width of the
  batch's source tensor, its longest source plus EOS; a, b: ``--max-len-a``/``--max-len-b``, 2 and 10 in
  posnet-compare), appending EOS there. A hypothesis of at least :func:`limit` tokens (that bound with
  S = its own source length + 1, the smallest S of any batch it can be in) reached it or came within the
  longer limit of its batch: the model had not ended by then. The length is counted in model tokens,
  from fairseq-generate's P- line (one score per token, EOS included). Usually a subset of too late.

Sentences that fairseq-generate skipped (longer than the model takes) are counted, not classified.
``python -m posnet_fairseq.compare.stopping OUT`` prints the table of a finished ``posnet-compare`` run.
"""
import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Optional

from ..evaluation import generate_output
from . import data, quality
from .concatenated import bucket_label, bucket_name
from .steps import Steps
from .training import AVERAGE

EARLY, LATE = 0.8, 1.2
KINDS = ("early", "right", "late")


def limit(source_tokens, max_len_a, max_len_b, target_positions):
    """The fewest tokens (EOS excluded) after which fairseq-generate forces EOS on a hypothesis of a source
    of ``source_tokens`` (EOS excluded): its batch's source tensor is at least that plus EOS wide."""
    return min(int(max_len_a * (source_tokens + 1) + max_len_b), target_positions - 1)


def kind(ratio):
    """too "early", about "right" or too "late" for a hypothesis / reference length ``ratio``."""
    return "early" if ratio < EARLY else "late" if ratio > LATE else "right"


@dataclass(frozen=True)
class Stop:
    """How one hypothesis ended: None for a sentence fairseq-generate skipped."""

    ratio: Optional[float]
    at_limit: Optional[bool]  # None: its length in model tokens is unknown (no P- line)


def stops(hypotheses, references, hyp_tokens, limits, skipped, bleu):
    """One :class:`Stop` per test sentence: ``hyp_tokens[i]`` its hypothesis's model tokens (None: unknown),
    ``limits[i]`` its :func:`limit`, ``skipped``: ids without a hypothesis, ``bleu``: the run's sacreBLEU
    BLEU (its tokenizer counts the lengths)."""
    skipped = set(skipped)
    result = []
    for i, (hyp, ref) in enumerate(zip(hypotheses, references)):
        if i in skipped:
            result.append(Stop(None, None))
            continue
        score = bleu.corpus_score([hyp], [[ref]])  # (sentence_score warns on every call; the lengths are the same)
        at_limit = None if hyp_tokens[i] is None else hyp_tokens[i] >= limits[i]
        result.append(Stop(score.sys_len / max(score.ref_len, 1), at_limit))
    return result


def bucket_rows(buckets, sentences, stops_):
    """One row per bucket: ``buckets`` [(lo, hi, k)] (k: --concat-test's K for joined examples, else None),
    ``sentences`` [(source length, k)] of each test sentence, ``stops_`` their :class:`Stop`. A row: lo, hi,
    concatenated, sentences (classified), skipped, the shares early / right / late, and at_limit (None
    when a length is unknown)."""
    rows = []
    for lo, hi, k in buckets:
        ids = [i for i, (n, joined) in enumerate(sentences) if joined == k and lo <= n <= hi]
        done = [stops_[i] for i in ids if stops_[i].ratio is not None]
        row = {"lo": lo, "hi": hi, "concatenated": k, "sentences": len(done), "skipped": len(ids) - len(done)}
        for name in KINDS:
            row[name] = sum(kind(s.ratio) == name for s in done) / len(done) if done else None
        known = [s.at_limit for s in done]
        row["at_limit"] = sum(known) / len(done) if done and None not in known else None
        rows.append(row)
    return rows


def columns(rows):
    """results.csv / results.json columns of one model: stop_KIND_BUCKET (KIND: early, right, late,
    limit; BUCKET: the bleu_len_ name of :func:`posnet_fairseq.compare.concatenated.bucket_name`)."""
    out = {}
    for row in rows:
        name = bucket_name(row["lo"], row["hi"], row["concatenated"])
        out.update({f"stop_{key}_{name}": row[key] for key in KINDS})
        out[f"stop_limit_{name}"] = row["at_limit"]
    return out


def _percent(share):
    return "-" if share is None else f"{100 * share:.0f}"


def markdown(tables):
    """results.md's section for ``tables`` ({model: its bucket_rows}, all on the same buckets)."""
    first = next(iter(tables.values()))
    header = ["model"] + [bucket_label(r["lo"], r["hi"], r["concatenated"]) for r in first]
    lines = ["## Where decoding stopped", "",
             f"Per source-length bucket, % of the hypotheses that ended too early (hypothesis / reference length "
             f"< {EARLY:g}) / about right / too late (> {LATE:g}), and in brackets % that ran to "
             "fairseq-generate's length limit without EOS (docs/length-generalisation.md).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model, rows in tables.items():
        cells = [f"{_percent(r['early'])}/{_percent(r['right'])}/{_percent(r['late'])} ({_percent(r['at_limit'])})"
                 if r["sentences"] else "-" for r in rows]
        lines.append(f"| `{model}` | " + " | ".join(cells) + " |")
    return lines


def _flag(flags, name, default):
    return type(default)(flags[flags.index(name) + 1]) if name in flags else default


def from_run(out, data_bin=None):
    """{model: bucket_rows} of a finished posnet-compare run in ``out``, for every model it translated, on
    the buckets of its quality.json; ``data_bin``: a --data run's data-bin (the run's own otherwise)."""
    steps = Steps(out)
    info = data.finished(steps, data_bin)
    if info is None:
        raise FileNotFoundError(f"{out}: no finished posnet-compare run there (no {steps.dir}/data.json)")
    scored = os.path.join(out, "quality.json")
    if not os.path.exists(scored):
        raise FileNotFoundError(f"{out}: no quality.json (the run has not scored its translations yet)")
    with open(scored) as f:
        buckets = json.load(f)["buckets"]
    return tables(steps, info, buckets, quality.metrics(steps.load("data").settings["mode"] == "synthetic")[0])


def tables(steps, info, buckets, bleu, models=None, parsed=None):
    """{model: bucket_rows} for ``models`` (in that order; default: every model of the run of ``steps``), each
    that translated (its step translate/MODEL), from its translation file; ``info``: the run's DataInfo,
    ``buckets``: quality.json's; ``parsed``: {model: generate_output.read result} of the files already read."""
    buckets = [(b["lo"], b["hi"], b.get("concatenated")) for b in buckets]
    joined = info.concatenated or {}
    sentences = [(n, None) for n in info.test_lengths] + [(n, joined.get("k")) for n in joined.get("lengths", [])]
    source_tokens = data.split_lengths(info.data_bin, "test", *info.langs)
    found = {}
    if models is None:
        models = [name.split("/", 1)[1] for name in steps.names("translate/")]
    for model in models:
        translate = steps.load(f"translate/{model}")
        if translate is None or translate.outputs is None:
            continue
        output = (parsed or {}).get(model) or generate_output.read(os.path.join(steps.out, "gen", f"{model}.out"))
        n = len(sentences)
        refs = quality.references(info, output.ordered("references", n))
        target_positions = quality.model_limits(os.path.join(steps.out, "checkpoints", model, AVERAGE))[1]
        flags = translate.settings["flags"]
        a, b = _flag(flags, "--max-len-a", 0.0), _flag(flags, "--max-len-b", 200)
        limits = [limit(s, a, b, target_positions) for s in source_tokens]
        found[model] = bucket_rows(buckets, sentences, stops(output.ordered("hypotheses", n), refs,
                                                             output.token_counts(n), limits, output.missing(n), bleu))
    return found


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m posnet_fairseq.compare.stopping",
                                description="Where decoding stopped, per source-length bucket, for every model of "
                                "a finished posnet-compare run (its --out)")
    p.add_argument("out", help="the run's --out")
    p.add_argument("--data-bin", help="a --data run: its data-bin (default: the run's own, OUT/data-bin)")
    p.add_argument("--json", action="store_true", help="print {model: [bucket rows]} as JSON instead")
    args = p.parse_args(argv)
    try:
        tables = from_run(args.out, args.data_bin)
    except FileNotFoundError as err:
        p.error(str(err))
    if not tables:
        p.error(f"{args.out}: no model translated yet (no finished step translate/MODEL)")
    print(json.dumps(tables, indent=1) if args.json else "\n".join(markdown(tables)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
