"""A table recipe's plan as SLURM jobs: each row's training one job, its averaging and its evaluation
dependent jobs, the table a job after them all.

    python -m posnet_fairseq.table_runs.slurm PLAN.sh --work DIR [--gpus N --nodes N] [job flags] [--dry-run]

``recipes/lib/common.sh`` calls this for ``--launcher slurm`` with the plan it
would otherwise run with bash (one command per line, ``# row NAME DATASET``
before each row's commands; see :mod:`posnet_fairseq.table_runs.plancheck`).
The plan's lines are cut into units (:mod:`posnet_fairseq.launcher`):

* ``prepare``: the commands before the first row (the --micro corpus), if any;
* ``train.ROW.DATASET``: the row's training, on ``--nodes`` nodes of ``--gpus``
  GPUs each (a multi-node row's torchrun reads its node rank from SLURM);
* ``average.ROW.DATASET``: its checkpoint averaging, after the training;
* ``evaluate.ROW.DATASET``: its translation and scoring, after the averaging
  and after the evaluation of every baseline the plan scores it against
  before it (``--baseline NAME=DIR``), as the sequential plan does;
* ``table``: after every evaluation.

Each unit runs its lines with bash after the plan's own ``set``/``export``
lines; the launcher's run directory is ``WORK/slurm`` (``launcher.json``: a
re-run attaches to jobs still running and skips units that finished).
``--dry-run`` prints each unit's batch script instead of submitting it.
"""
import argparse
import os
import shlex
import sys
from typing import List, NamedTuple

from ..launcher import FINISHED, Launcher, RunLocked, SlurmUnavailable, Unit, event_line, render_batch_script
from ..launcher.flags import add_arguments, slurm_options
from .plancheck import train_commands


class Part(NamedTuple):
    stage: str  # prepare, train, average, evaluate, table
    row: str  # "ROW.DATASET", "" for prepare and table
    lines: List[str]


def _stage(line, current):
    """The stage of a plan command, the row's stage so far being ``current``."""
    if train_commands(line):
        return "train"
    if "posnet_fairseq.cli.average_checkpoints" in line:
        return "average"
    if "fairseq-generate" in line or "posnet_fairseq.evaluation.evaluate" in line:
        return "evaluate"
    return current


def parts(plan_text):
    """(prelude, [Part]): the plan's shell settings every job repeats, and its commands by unit."""
    prelude, found, pending, row, stage = [], [], [], "", "prepare"
    for line in plan_text.splitlines():
        line = line.strip()
        if line.startswith("# row "):
            row, stage = ".".join(line[len("# row "):].split()[:2]), "train"
            continue
        if line == "# table":
            row, stage = "", "table"
            continue
        if not line or line.startswith("#"):
            continue
        if line.startswith(("set ", "export ")) and not found:
            prelude.append(line)
            continue
        if line.startswith("mkdir -p "):  # makes a folder for the command after it: goes with that command
            pending.append(line)
            continue
        stage = _stage(line, stage)
        if found and found[-1].stage == stage and found[-1].row == row:
            found[-1].lines.extend(pending + [line])
        else:
            found.append(Part(stage, row, pending + [line]))
        pending = []
    return prelude, found


def _option(line, flag):
    words = shlex.split(line)
    return [words[i + 1] for i, word in enumerate(words[:-1]) if word == flag]


def units(plan_text, options):
    """The plan's units, each with the job options of its stage (``options``: {stage: SlurmOptions})."""
    prelude, found = parts(plan_text)
    made, by_out_dir = [], {}
    for part in found:
        name = f"{part.stage}.{part.row}" if part.row else part.stage
        if part.stage == "prepare":
            after = ()
        elif part.stage == "train":
            after = tuple(u.name for u in made if u.name == "prepare")
        elif part.stage == "table":
            after = tuple(u.name for u in made if u.name.startswith("evaluate."))
        else:
            previous = {"average": "train", "evaluate": "average"}[part.stage]
            after = (f"{previous}.{part.row}",)
        if part.stage == "evaluate":
            baselines = [spec.split("=", 1)[1] for line in part.lines for spec in _option(line, "--baseline")]
            after += tuple(sorted({by_out_dir[d] for d in baselines if d in by_out_dir} - {name}))
            by_out_dir.update({d: name for line in part.lines for d in _option(line, "--out-dir")})
        script = "; ".join(prelude + part.lines)
        made.append(Unit(name, command=("bash", "-c", script), after=after, options=options[part.stage]))
    return made


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", help="the recipe's plan ('-' for stdin)")
    parser.add_argument("--work", required=True, help="the recipe's work directory (jobs under WORK/slurm)")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs per node of a training job (the recipe's --gpus)")
    parser.add_argument("--nodes", type=int, default=1, help="nodes of a training job (the recipe's --nodes)")
    parser.add_argument("--dry-run", action="store_true", help="print the batch scripts, submit nothing")
    add_arguments(parser, gpus=False)
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.plan == "-" else open(args.plan, encoding="utf-8").read()
    train = slurm_options(parser, args, gpus_per_job=args.gpus, nodes=args.nodes)
    # Translation wants one GPU where training had them; the rest runs on cores.
    cores = slurm_options(parser, args, gpus_per_job=0)
    planned = units(text, {"prepare": cores, "train": train, "average": cores, "table": cores,
                           "evaluate": slurm_options(parser, args, gpus_per_job=min(args.gpus, 1))})
    run_dir = os.path.join(os.path.abspath(args.work), "slurm")
    if args.dry_run:
        for unit in planned:
            print(render_batch_script(unit, unit.options, run_dir, python=sys.executable))
        return 0
    try:  # issue 49: no cluster that answers, or another driver on WORK, is one line
        launcher = Launcher(run_dir, "slurm", train, poll_s=args.poll_seconds,
                            progress=lambda event: print(f"slurm: {event_line(event)}", file=sys.stderr, flush=True))
        outcomes = launcher.run(planned)
    except RunLocked as err:
        parser.error(f"--work {args.work}: {run_dir} {err}")
    except SlurmUnavailable as err:
        parser.error(f"--launcher slurm: {err}")
    failed = [o for o in outcomes.values() if o.status != FINISHED]
    for outcome in failed:
        print(f"slurm: {outcome.name} {outcome.status}: {outcome.message}", file=sys.stderr)
    return 1 if failed else 0



if __name__ == "__main__":
    sys.exit(main())
