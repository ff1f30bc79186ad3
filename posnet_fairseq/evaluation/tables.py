"""The papers' result tables: our results collected beside the paper's figures.

    python -m posnet_fairseq.evaluation.tables collect TABLE --results DIR --out PREFIX

``collect`` reads DIR/ROW/DATASET/SPLIT/result.json (written by
:mod:`.evaluate`) and writes PREFIX.md and PREFIX.csv: one line per row, for
every column our number beside the paper's. The tables (columns, rows, marks,
the paper's figures) are declared in ``posnet_fairseq/table_runs/<paper>.py``.
Marks follow the paper: the PosNet paper marks a difference to the Transformer
with † and to Shaw et al. with ‡ (paired bootstrap, p <= 0.05, better or
worse); the AAN+ and hard-coded Gaussian papers mark none. BLEURT and COMET
are printed times 100, as the PosNet paper does; speed columns are ratios to
the row's reference (the Transformer of the same size), as the AAN+ paper
prints them, except sentences per second (the hard-coded Gaussian paper's
Tables 3 and 7), which are absolute, from fairseq-generate's own timing. A
cell we have no result for is ``-``; a column whose dataset no recipe here
prepares holds the paper's figures only.
"""
import argparse
import csv
import json
import os
import sys

from ..table_runs.papers import TABLES

# What a metric is called in the tables, and how our result prints.
SCALED = {"bleurt", "comet"}  # result scores in -1..1, the paper prints them times 100
SPEED = {"train_speed": ("train_wps", "wps", False), "decode_speed": ("decode_seconds", "seconds", True)}


def _load(results, row, col):
    path = os.path.join(results, row, col.dataset, col.split, "result.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cell(result, col, marks=(), reference=None):
    """Our figure for one column. ``marks`` [(baseline row, mark)] are appended where the paired bootstrap
    against that baseline found a difference (either direction, p <= 0.05); speed columns are ratios to
    ``reference`` (the reference row's result)."""
    if result is None or not col.ours:
        return "-"
    if col.metric in SPEED:
        key, field_name, inverse = SPEED[col.metric]
        if reference is None or key not in result or key not in reference:
            return "-"
        ours, theirs = result[key][field_name], reference[key][field_name]
        return f"{(theirs / ours if inverse else ours / theirs):.2f}x"
    if col.metric == "sent_per_sec":
        timing = result.get("decode_seconds")
        return f"{timing['sentences'] / timing['seconds']:.1f}" if timing else "-"
    if col.metric not in result:
        return "-"
    if col.metric == "params":
        return f"{result['params'] / 1e6:.2f}M"
    score = result[col.metric]
    if not score.get("available", True):
        return "n/a"
    text = f"{score['score'] * (100 if col.metric in SCALED else 1):.2f}"
    for baseline, mark in marks:
        sig = result.get("significance", {}).get(baseline, {}).get(col.metric)
        if sig and sig.get("significant"):
            text += mark
    return text


def collect(name, results):
    """(header, rows) of the table: each row is its label and, per column, ours then the paper's."""
    table = TABLES[name]
    paper = table.figures
    header = ["Model"] + [h for col in table.columns for h in (f"{col.label} (ours)", f"{col.label} (paper)")]
    rows = []
    for key, label in table.rows:
        line = [label]
        for col in table.columns:
            ref_row = table.reference.get(key)
            reference = _load(results, ref_row, col) if ref_row else None
            line.append(cell(_load(results, key, col), col, table.marks, reference))
            line.append(paper.get(key, {}).get(col.key, ""))
        rows.append(line)
    return header, rows


def signatures(name, results):
    """One signature per column (the first result that has one), printed under the table."""
    table, found = TABLES[name], {}
    for col in table.columns:
        for key, _ in table.rows:
            result = _load(results, key, col)
            entry = result.get(col.metric) if result else None
            if isinstance(entry, dict) and "signature" in entry:
                found[col.label] = entry["signature"]
                break
    return found


def write(name, results, prefix):
    header, rows = collect(name, results)
    table = TABLES[name]
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    with open(prefix + ".csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([header] + rows)
    lines = [f"## {table.title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines.append("")
    labels = dict(table.rows)
    for baseline, mark in table.marks:
        lines.append(f"`{mark}`: differs from {labels[baseline]} (paired bootstrap, 1000 resamples, p <= 0.05, "
                     "better or worse).")
    for label, sig in signatures(name, results).items():
        lines.append(f"- {label}: `{sig}`")
    lines += [f"- {note}" for note in table.notes]
    with open(prefix + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return prefix + ".md", prefix + ".csv"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    col = sub.add_parser("collect")
    col.add_argument("table", choices=sorted(TABLES))
    col.add_argument("--results", required=True)
    col.add_argument("--out", required=True, help="output prefix: writes PREFIX.md and PREFIX.csv")
    args = parser.parse_args(argv)
    md, csv_path = write(args.table, args.results, args.out)
    with open(md, encoding="utf-8") as f:
        print(f.read())
    print(f"wrote {md} and {csv_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
