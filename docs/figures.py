"""The figures the docs' prose quotes from a run, rendered from that run's saved results, so that the prose
cannot drift from the files (tests/test_docs_figures.py fails when it does).

A quoted figure is written between two markers that GitHub does not show:

    <!-- figure RUN ARCH WHAT FORMAT [SCALE] -->77<!-- /figure -->

RUN: a run's folder under docs/ (e.g. length-study/bible-seed1), ARCH: a model of it (a row of the table
of its results.json, or of its results.csv where it has no results.json), FORMAT: a Python format spec
(".0f", "+.2f", "s" for a verdict's word), SCALE: a factor (100 for a share in %). WHAT is one of

* COLUMN: a column of that table (results.csv's columns);
* A/B: column A over column B; with seeds the mean over the seeds of each seed's A / B (the A_seedN and
  B_seedN columns), and A/B:sd their sample standard deviation (a share the report did not write yet);
* verdict:SIDE:FIELD: the model's verdict against the baseline on SIDE (in_range, beyond, joined), FIELD
  one of verdict, effect, low, high, adjusted_p, ...: from the run's quality.json (beside results.csv or
  in its run.tar.xz), or for a run shipped without one, from its results.md's Verdict line (verdict,
  effect, low, high, as printed there);
* kept:BUCKET:FIELD and against:BUCKET:FIELD: the model's BLEU kept on BUCKET (e.g. 49-96, or a joined
  bucket by its name in results.csv, concat4_97_128) and its difference from the baseline's, from
  quality.json's kept (FIELD as for a verdict; sentences and within are the bucket's and the reference
  bucket's n).

    python docs/figures.py [--write] PAGE.md ...

prints the pages whose figures differ from their files (exit 1), or with --write renders them.
"""
import argparse
import csv
import functools
import json
import os
import re
import statistics
import sys
import tarfile

DOCS = os.path.dirname(os.path.abspath(__file__))
FIGURE = re.compile(r"<!-- figure (\S+) (\S+) (\S+) (\S+)(?: (\S+))? -->(.*?)<!-- /figure -->")
SIDES = {"in_range": "in range", "beyond": "beyond", "joined": "joined"}  # marker word -> quality.json key
# The sides as results.md's Verdict line names them (the earlier test's reports, shipped without quality.json)
REPORT_SIDES = {"in range": "in range", "beyond": "beyond", "joined test examples (--concat-test)": "joined"}
REPORT_VERDICT = re.compile(r"(in range|beyond|joined test examples \(--concat-test\)) "
                            r"(better|worse|no detectable difference) \(([-+]?[\d.]+) BLEU, "
                            r"95% interval ([-+]?[\d.]+) to ([-+]?[\d.]+)")


@functools.lru_cache(maxsize=None)
def _rows(root, run):
    """The run's table by arch: results.json's (full precision, as the report rounds it), else results.csv's
    (six significant digits: 87.15 there was 87.1499... and printed 87.1)."""
    table = os.path.join(root, run, "results.json")
    if os.path.exists(table):
        with open(table) as f:
            return {row["arch"]: row for row in json.load(f)["table"]}
    path = os.path.join(root, run, "results.csv")
    if not os.path.exists(path):
        raise ValueError(f"figure of run {run}: neither {table} nor {path} exists")
    with open(path, newline="") as f:
        return {row["arch"]: row for row in csv.DictReader(f)}


@functools.lru_cache(maxsize=None)
def _quality(root, run):
    """The run's quality.json (beside results.csv, else inside its run.tar.xz), or None."""
    path, archive = os.path.join(root, run, "quality.json"), os.path.join(root, run, "run.tar.xz")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    if os.path.exists(archive):
        with tarfile.open(archive) as tar:
            member = next((m for m in tar.getmembers() if m.name.count("/") == 1
                           and m.name.endswith("/quality.json")), None)
            if member:
                return json.load(tar.extractfile(member))
    return None


@functools.lru_cache(maxsize=None)
def _report_verdicts(root, run):
    """{arch: {side: {verdict, effect, low, high}}} from the Verdict lines of the run's results.md."""
    with open(os.path.join(root, run, "results.md")) as f:
        lines = re.findall(r"^- `([^`]+)`: (in range .*)$", f.read(), re.M)
    return {arch: {REPORT_SIDES[side]: {"verdict": word, "effect": float(effect), "low": float(low),
                                         "high": float(high)}
                   for side, word, effect, low, high in REPORT_VERDICT.findall(line)}
            for arch, line in lines}


def _ratio(row, column):
    """A/B of one row: with seeds the mean (or with :sd the sd) over the seeds of each seed's ratio."""
    spec, _, stat = column.partition(":")
    top, bottom = spec.split("/")
    seeds = sorted(k[len(top) + 5:] for k in row if k.startswith(top + "_seed"))
    if not seeds:
        return float(row[top]) / float(row[bottom])
    ratios = [float(row[f"{top}_seed{s}"]) / float(row[f"{bottom}_seed{s}"]) for s in seeds]
    return statistics.stdev(ratios) if stat == "sd" else statistics.mean(ratios)


def _kept_label(bucket):
    """quality.json's kept label of a marker's BUCKET: a label (49-96), or a joined bucket's name as results.csv
    has it (concat4_97_128 for the label "\u22954 97-128", which a marker cannot hold: it has a space)."""
    joined = re.fullmatch(r"concat(\d+)_(\d+)_(\d+)", bucket)
    return f"\u2295{joined[1]} {joined[2]}-{joined[3]}" if joined else bucket


def _judged(root, run, arch, what):
    """A verdict:, kept: or against: figure."""
    kind, key, field = what.split(":")
    quality = _quality(root, run)
    if kind == "verdict":
        verdicts = quality["verdict"] if quality else _report_verdicts(root, run)
        entry = verdicts.get(arch, {}).get(SIDES.get(key)) or {}
    else:
        bucket = (quality or {}).get("kept", {}).get(arch, {}).get(_kept_label(key)) or {}
        entry = bucket if field in ("sentences", "within") else bucket.get(kind) or {}
    if field not in entry:
        raise ValueError(f"figure of run {run}: no {what!r} for {arch!r} in its quality.json or results.md")
    return entry[field]


def value(run, arch, what, fmt, scale=None, root=DOCS):
    """The figure, times ``scale``, formatted."""
    rows = _rows(root, run)
    if arch not in rows:
        raise ValueError(f"figure of run {run}: no {arch!r} row in its results")
    if what.split(":")[0] in ("verdict", "kept", "against"):
        found = _judged(root, run, arch, what)
    elif "/" in what:
        found = _ratio(rows[arch], what)
    elif what in rows[arch]:
        found = float(rows[arch][what])
    else:
        raise ValueError(f"figure of run {run}: no {what!r} column in its results")
    return format(found if isinstance(found, str) else found * float(scale or 1), fmt)


def render(text, root=DOCS):
    """``text`` with every figure between its markers taken from its run's files under ``root``."""
    return FIGURE.sub(lambda m: m.group(0).replace(f"-->{m.group(6)}<!--",
                                                   f"-->{value(*m.groups()[:5], root=root)}<!--"), text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args(argv)
    stale = []
    for page in args.pages:
        with open(page) as f:
            text = f.read()
        rendered = render(text)
        if rendered != text:
            stale.append(page)
            if args.write:
                with open(page, "w") as f:
                    f.write(rendered)
    for page in stale:
        print(f"{page}: {'rendered' if args.write else 'its figures differ from the runs files'}")
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
