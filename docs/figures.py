"""The figures the docs' prose quotes from a run, rendered from that run's results.csv, so that the prose
cannot drift from the files (tests/test_docs_figures.py fails when it does).

A quoted figure is written between two markers that GitHub does not show:

    <!-- figure RUN ARCH COLUMN FORMAT [SCALE] -->77<!-- /figure -->

RUN: a run's folder under docs/ (e.g. length-study/bible-seed1), ARCH: a row of its results.csv, COLUMN:
a column of it, FORMAT: a Python format spec (".0f"), SCALE: a factor (100 for a share in %).

    python docs/figures.py [--write] PAGE.md ...

prints the pages whose figures differ from their files (exit 1), or with --write renders them.
"""
import argparse
import csv
import os
import re
import sys

DOCS = os.path.dirname(os.path.abspath(__file__))
_ROWS = {}  # {run: its results.csv rows by arch}, read once
FIGURE = re.compile(r"<!-- figure (\S+) (\S+) (\S+) (\S+)(?: (\S+))? -->(.*?)<!-- /figure -->")


def _rows(run):
    if run not in _ROWS:
        path = os.path.join(DOCS, run, "results.csv")
        if not os.path.exists(path):
            raise ValueError(f"figure of run {run}: {path} does not exist")
        with open(path, newline="") as f:
            _ROWS[run] = {row["arch"]: row for row in csv.DictReader(f)}
    return _ROWS[run]


def value(run, arch, column, fmt, scale=None):
    """The figure: results.csv's cell, times ``scale``, formatted."""
    rows = _rows(run)
    if arch not in rows or column not in rows[arch]:
        raise ValueError(f"figure of run {run}: no {arch!r} row or {column!r} column in its results.csv")
    return format(float(rows[arch][column]) * float(scale or 1), fmt)


def render(text):
    """``text`` with every figure between its markers taken from its run's file."""
    return FIGURE.sub(lambda m: m.group(0).replace(f"-->{m.group(6)}<!--", f"-->{value(*m.groups()[:5])}<!--"),
                      text)


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
