"""Check a recipe's command plan before any work starts: every architecture, mixer and flag must exist.

    python -m posnet_fairseq.table_runs.plancheck PLAN.sh

A plan is the shell script a table recipe prints with --dry-run: ``# row
NAME DATASET`` comments followed by commands, one per line (the rows are
declared in ``table_runs/<paper>.py``; the plan is what runs, with the flags
``recipes/lib/common.sh`` adds, so the plan is what is checked). Each fairseq-train
command (``fairseq-train ...``, ``torchrun ... -m fairseq_cli.train ...`` or
after ``launch ... --``) is parsed in-process with fairseq's own parser
(``options.parse_args_and_arch``) with the plugin imported, so an unknown
architecture or flag fails here, naming the row, instead of hours into a run.
Mixer names in ``--encoder-self-mixer`` / ``--decoder-self-mixer`` /
``--cross-mixer`` are checked against the mixer registry for that site.
"""
import argparse
import contextlib
import io
import shlex
import sys
from typing import List, NamedTuple

from ..sites import SITE_LIST, spec_items
from ..troubleshooting import option



class Training(NamedTuple):
    row: str
    dataset: str
    argv: List[str]  # after the train program


def train_commands(plan_text):
    """[Training] for every training command of a plan, with the row and dataset of its ``# row`` comment."""
    row, found = (None, None), []
    for line in plan_text.splitlines():
        line = line.strip()
        if line.startswith("# row "):
            row = tuple(line[len("# row "):].split()[:2])
            continue
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line, comments=True)
        for i, word in enumerate(words):
            if word.rsplit("/", 1)[-1] == "fairseq-train" or (word == "fairseq_cli.train" and words[i - 1] == "-m"):
                found.append(Training(*row, words[i + 1:]))
                break
    return found


def _given(argv, flag):
    """:func:`posnet_fairseq.troubleshooting.option`, or None for a flag given without its value: argparse
    would print its error and exit, where the check reports the flag as missing."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return option(argv, flag)
    except SystemExit:
        return None


def check_command(argv):
    """Problems with one fairseq-train argv (empty list when it parses)."""
    from fairseq import options, utils
    from fairseq.models import ARCH_MODEL_REGISTRY

    user_dir = _given(argv, "--user-dir")
    if user_dir is None:
        return ["no --user-dir: fairseq cannot find the plugin's architectures"]
    utils.import_user_module(argparse.Namespace(user_dir=user_dir))
    from ..mixers.registry import mixers_for_site

    problems = []
    arch = _given(argv, "--arch") or _given(argv, "-a")
    if arch is None:
        problems.append("no --arch")
    elif arch not in ARCH_MODEL_REGISTRY:
        problems.append(f"architecture {arch} is not registered")
    for site in SITE_LIST:
        spec = _given(argv, site.mixer_flag)
        for name in (spec_items(spec) if spec else []):
            if name not in mixers_for_site(site.name):
                problems.append(f"{site.mixer_flag} {spec}: mixer {name} is not registered for {site.name}")
    if problems:
        return problems
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            options.parse_args_and_arch(options.get_training_parser(), argv)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        problems.append("fairseq-train rejects the command: " + (lines[-1] if lines else "parse error"))
    return problems


def check_plan(plan_text):
    """{row: [problems]} for the rows whose training command does not parse; raises if there is none."""
    commands = train_commands(plan_text)
    if not commands:
        raise ValueError("the plan has no fairseq-train command")
    bad = {}
    for row, _, argv in commands:
        problems = check_command(argv)
        if problems:
            bad.setdefault(row, []).extend(p for p in problems if p not in bad.get(row, []))
    return bad


def report(bad):
    missing = sorted({p.split()[1] for ps in bad.values() for p in ps if p.startswith("architecture ")})
    lines = []
    if missing:
        lines.append("missing architecture(s): " + ", ".join(missing))
    for row, problems in bad.items():
        lines.extend(f"row {row}: {p}" for p in problems)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", help="plan file ('-' for stdin)")
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.plan == "-" else open(args.plan, encoding="utf-8").read()
    try:
        bad = check_plan(text)
    except ValueError as err:
        parser.error(str(err))
    if bad:
        print("plancheck: the plan cannot run, nothing was started:\n" + report(bad), file=sys.stderr)
        return 1
    print(f"plancheck: {len(train_commands(text))} training commands parse", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
