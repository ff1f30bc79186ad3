"""Names the paths of shipped run records as posnet-compare's report names them since issue 46 item 6
(posnet_fairseq/compare/paths.py): results.md's command and data lines and the --reuse-from legend, and
results.json / results.csv's ``reused_from``, for pages a run wrote before (with the absolute paths of its
machine). Every other byte stays; a page already portable is left as it is.

    python docs/compare/portable-paths.py docs/compare/verdict-bible [RUN ...]
"""
import json
import os
import shlex
import sys

from posnet_fairseq.compare import options, paths, report

COMMAND, DATA = "- command: `posnet-compare ", "- data: "


def _given(argv):
    """(the paths the command line names, its --out)."""
    args = options.build_parser().parse_args(argv)
    given = [*(args.raw or []), *(args.raw_valid or []), *(args.raw_test or []), *([args.data] if args.data else []),
             args.out, *args.reuse_from]
    return given, args.out


def _reused(results, lines, out):
    """results.json's rows and results.md's legend lines with the --reuse-from runs named portably."""
    for row in results["table"]:
        if not row.get("reused_from"):
            continue
        new = " ".join(sorted({paths.portable(path, out) for path in row["reused_from"].split(" ")}))
        old_line = f"- `{row['arch']}`: taken from `{row['reused_from']}` by --reuse-from"
        for i, line in enumerate(lines):
            if line.startswith(old_line):
                lines[i] = line.replace(old_line, f"- `{row['arch']}`: taken from `{new}` by --reuse-from")
        row["reused_from"] = new


def portable(run):
    with open(os.path.join(run, "results.md"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    c = next(i for i, line in enumerate(lines) if line.startswith(COMMAND))
    d = next(i for i, line in enumerate(lines) if line.startswith(DATA))
    argv = shlex.split(lines[c][len(COMMAND):-1])
    given, out = _given(argv)
    lines[c] = f"{COMMAND}{paths.command(argv, out)}`"
    lines[d] = DATA + paths.portable_text(lines[d][len(DATA):], given, out)
    with open(os.path.join(run, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    _reused(results, lines, out)
    with open(os.path.join(run, "results.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    with open(os.path.join(run, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)  # as posnet-compare writes it (compare/steps.save_json)
    report.write_csv(os.path.join(run, "results.csv"), results["table"])


if __name__ == "__main__":
    for run in sys.argv[1:]:
        portable(run)
