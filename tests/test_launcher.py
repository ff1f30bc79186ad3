"""posnet_fairseq/launcher: units as jobs, locally (submitit's LocalExecutor) and
through a real single-node SLURM cluster (tests/slurm_cluster.py: real sbatch,
squeue, scancel and scontrol).

The units run a stand-in for a training: STEPS steps, a checkpoint file after
each one, resuming from it when run again (as fairseq resumes from
checkpoint_last.pt), a line per start in a starts file, and a result file.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from posnet_fairseq.launcher import (FAILED, FINISHED, NOT_RUN, STATE_FILE, Launcher, SlurmOptions, Unit,
                                     render_batch_script)
from slurm_cluster import requeue

STAND_IN = textwrap.dedent("""\
    import os, sys, time
    out, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    if os.path.exists(out + ".fail-once"):
        os.remove(out + ".fail-once")
        sys.exit("stand-in: told to fail once")
    step = int(open(out + ".ckpt").read()) if os.path.exists(out + ".ckpt") else 0
    with open(out + ".starts", "a") as starts:
        starts.write(f"{step}\\n")
    while step < steps:
        time.sleep(pause)
        step += 1
        with open(out + ".ckpt.tmp", "w") as ckpt:
            ckpt.write(str(step))
        os.replace(out + ".ckpt.tmp", out + ".ckpt")
    name = os.path.basename(out)
    inputs = "".join(open(path).read() for path in sys.argv[4:])
    with open(out, "w") as result:
        result.write(f"{name} {steps} {sum(map(ord, name)) % 97}\\n" + inputs)
    print(f"{name} done")
""")
GRID = [(arch, seed) for arch in ("transformer", "rposnet") for seed in (1, 2)]


def _units(folder, steps=2, pause=0.05, table=True):
    script = folder / "stand_in.py"
    script.write_text(STAND_IN)
    units = [Unit(f"train.{a}.{s}", command=(sys.executable, script, folder / f"{a}.{s}", steps, pause))
             for a, s in GRID]
    if table:
        trained = tuple(folder / f"{a}.{s}" for a, s in GRID)
        units.append(Unit("table", command=(sys.executable, script, folder / "table", 0, 0, *trained),
                          after=tuple(u.name for u in units)))
    return units


class Events(list):
    def __call__(self, event):
        self.append(event)

    def kinds(self, name):
        return [e.kind for e in self if e.name == name]


def _results(folder):
    return {path.name: path.read_text() for path in sorted(folder.iterdir())
            if "." in path.name and path.suffix[1:].isdigit() or path.name == "table"}


def test_local_units_finish_with_their_dependent_last(tmp_path):
    events = Events()
    outcomes = Launcher(tmp_path / "run", "local", progress=events, poll_s=0.1).run(_units(tmp_path))
    assert {o.status for o in outcomes.values()} == {FINISHED}
    assert outcomes["train.rposnet.2"].value == "rposnet.2 done"
    checksum = {name: sum(map(ord, name)) % 97 for name in ["table"] + [f"{a}.{s}" for a, s in GRID]}
    table = (tmp_path / "table").read_text().splitlines()
    assert table == [f"table 0 {checksum['table']}"] + [f"{a}.{s} 2 {checksum[f'{a}.{s}']}" for a, s in GRID]
    assert events.kinds("table") == ["submitted", "started", "finished"]


def test_a_python_callable_is_a_unit(tmp_path):
    folder = str(tmp_path)

    def list_folder():  # pickled by value (a closure), as a user's function in a script would be
        return sorted(os.listdir(folder))
    (tmp_path / "a").write_text("")
    outcome = Launcher(tmp_path / "run", "local", poll_s=0.1).run([Unit("ls", function=list_folder)])["ls"]
    assert outcome.status == FINISHED and outcome.value == ["a", "run"]


def test_failure_is_reported_dependents_not_run_and_a_rerun_resubmits_only_it(tmp_path):
    run = tmp_path / "run"
    (tmp_path / "rposnet.1.fail-once").write_text("")
    outcomes = Launcher(run, "local", poll_s=0.1).run(_units(tmp_path))
    failed = outcomes["train.rposnet.1"]
    assert failed.status == FAILED and "exit status 1" in failed.message and "_log.err" in failed.message
    assert outcomes["table"].status == NOT_RUN and "train.rposnet.1 did not finish" in outcomes["table"].message
    assert outcomes["train.transformer.1"].status == FINISHED

    events = Events()
    outcomes = Launcher(run, "local", progress=events, poll_s=0.1).run(_units(tmp_path))
    assert {o.status for o in outcomes.values()} == {FINISHED}
    assert events.kinds("train.transformer.1") == ["finished earlier"]
    assert events.kinds("train.rposnet.1")[:2] == ["resubmitted", "submitted"]
    submissions = {name: r["submissions"] for name, r in json.loads((run / STATE_FILE).read_text())["units"].items()}
    assert submissions == {"train.transformer.1": 1, "train.transformer.2": 1, "train.rposnet.1": 2,
                           "train.rposnet.2": 1, "table": 1}


def test_retries_resubmit_a_failed_unit_in_the_same_run(tmp_path):
    (tmp_path / "transformer.2.fail-once").write_text("")
    events = Events()
    outcomes = Launcher(tmp_path / "run", "local", progress=events, poll_s=0.1, retries=1).run(_units(tmp_path))
    assert {o.status for o in outcomes.values()} == {FINISHED}
    kinds = events.kinds("train.transformer.2")
    assert kinds.count("submitted") == 2 and kinds.count("resubmitted") == 1
    message = next(e.message for e in events if e.kind == "resubmitted")
    assert message.startswith("retry 1: ") and "stand-in: told to fail once" in message


def test_dry_run_renders_the_batch_script(tmp_path):
    unit = _units(tmp_path)[-1]
    options = SlurmOptions(gpus_per_job=4, partition="gpu", time_minutes=600, sbatch={"account": "nmt"})
    script = render_batch_script(unit, options, tmp_path / "run")
    lines = set(script.splitlines())
    assert {"#SBATCH --gpus-per-node=4", "#SBATCH --partition=gpu", "#SBATCH --time=600",
            "#SBATCH --account=nmt", "#SBATCH --requeue", "#SBATCH --job-name=table",
            "#SBATCH --dependency='afterok:<train.transformer.1>:<train.transformer.2>:<train.rposnet.1>:"
            "<train.rposnet.2>'"} <= lines
    assert script.splitlines()[1] == f"# unit table: {unit.describe()}"
    assert f"-m submitit.core._submit {tmp_path}/run/jobs/table/%j" in script


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="either a command or a function"):
        Unit("x")
    with pytest.raises(ValueError, match="unit name 'a b'"):
        Unit("a b", command=("true",))
    with pytest.raises(ValueError, match=r"sets \['dependency'\]"):
        SlurmOptions(sbatch={"dependency": "afterok:1"})
    launcher = Launcher(tmp_path, "local")
    with pytest.raises(ValueError, match="cycle"):
        launcher.run([Unit("a", command=("true",), after=("b",)), Unit("b", command=("true",), after=("a",))])
    with pytest.raises(ValueError, match=r"waits for unknown units \['c'\]"):
        launcher.run([Unit("a", command=("true",), after=("c",))])
    with pytest.raises(ValueError, match="launcher 'pbs'"):
        Launcher(tmp_path, "pbs")


def test_missing_submitit_is_named(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "submitit", None)
    with pytest.raises(ImportError, match=r"pip install submitit==1\.5\.4"):
        Launcher(tmp_path, "local").run([Unit("a", command=("true",))])


# ---- through the real cluster ----

def _jobs_of(cluster, run):
    """{unit name: number of jobs squeue lists for it} of the run directory `run`
    (a job's batch script lies in its unit's folder)."""
    lines = subprocess.run(["squeue", "-h", "--states=all", "-o", "%j|%o"], env=cluster.env(),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    names = [line.split("|")[0] for line in lines if f"{run}/jobs/" in line]
    return {name: names.count(name) for name in names}


def test_slurm_grid_equals_local_and_the_table_waits(slurm_cluster, tmp_path):
    (tmp_path / "local").mkdir()
    (tmp_path / "slurm").mkdir()
    Launcher(tmp_path / "local" / "run", "local", poll_s=0.1).run(_units(tmp_path / "local"))
    # One training fails once: retried in the same run, and the table, queued with
    # afterok on its failed job, is withdrawn and queued again after the new one.
    (tmp_path / "slurm" / "rposnet.1.fail-once").write_text("")
    events = Events()
    outcomes = Launcher(tmp_path / "slurm" / "run", "slurm", progress=events, poll_s=0.3, retries=1).run(
        _units(tmp_path / "slurm"))
    assert {o.status for o in outcomes.values()} == {FINISHED}
    assert _results(tmp_path / "slurm") == _results(tmp_path / "local") and len(_results(tmp_path / "local")) == 5
    order = [(e.name, e.kind) for e in events]
    # The table went to SLURM before its dependencies ended, held by afterok.
    assert order.index(("table", "submitted")) < order.index(("train.rposnet.2", "finished"))
    assert events.kinds("train.rposnet.1").count("submitted") == 2
    assert events.kinds("table").count("submitted") == 2 and "resubmitted" in events.kinds("table")
    assert _jobs_of(slurm_cluster, tmp_path / "slurm" / "run") == {u.name: 2 if u.name in ("table", "train.rposnet.1")
                                                                     else 1 for u in _units(tmp_path)}


def test_slurm_killed_driver_rerun_attaches(slurm_cluster, tmp_path):
    run = tmp_path / "run"
    driver = textwrap.dedent(f"""\
        import pathlib, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_launcher import _units
        from posnet_fairseq.launcher import Launcher
        Launcher({str(run)!r}, "slurm", poll_s=0.3).run(_units(pathlib.Path({str(tmp_path)!r}), steps=20, pause=0.2))
    """)
    process = subprocess.Popen([sys.executable, "-c", driver])
    state = run / STATE_FILE
    deadline = time.monotonic() + 120
    while not (state.exists() and len(json.loads(state.read_text())["units"]) == 5):
        assert process.poll() is None and time.monotonic() < deadline, "the driver did not submit 5 jobs"
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert len(_jobs_of(slurm_cluster, run)) == 5
    events = Events()
    outcomes = Launcher(run, "slurm", progress=events, poll_s=0.3).run(_units(tmp_path, steps=20, pause=0.2))
    assert {o.status for o in outcomes.values()} == {FINISHED}
    assert "submitted" not in {e.kind for e in events}
    assert events.kinds("table")[0] == "attached"
    assert _jobs_of(slurm_cluster, run) == {u.name: 1 for u in _units(tmp_path)}


def test_slurm_cancelled_job_fails_clearly_and_a_rerun_resubmits(slurm_cluster, tmp_path):
    run = tmp_path / "run"
    units = _units(tmp_path, steps=10, pause=0.3, table=False)[:1]

    def cancel_when_started(event):
        if event.kind == "started":
            subprocess.run(["scancel", event.job_id], check=True)
    outcome = Launcher(run, "slurm", progress=cancel_when_started, poll_s=0.3).run(units)["train.transformer.1"]
    assert outcome.status == FAILED
    assert outcome.message.startswith("ended CANCELLED") and "a re-run submits it again" in outcome.message
    events = Events()
    again = Launcher(run, "slurm", progress=events, poll_s=0.3).run(units)["train.transformer.1"]
    assert again.status == FINISHED and again.job_id != outcome.job_id
    assert events.kinds("train.transformer.1")[:2] == ["resubmitted", "submitted"]


def test_slurm_requeued_job_resumes_from_its_checkpoint(slurm_cluster, tmp_path):
    out = str(tmp_path / "transformer.1")
    units = _units(tmp_path, steps=12, pause=0.3, table=False)[:1]
    requeued = []

    def requeue_after_two_steps(event):
        if event.kind != "started" or requeued:
            return
        while not (os.path.exists(out + ".ckpt") and int(open(out + ".ckpt").read()) >= 2):
            time.sleep(0.1)
        requeue(event.job_id)
        requeued.append(event.job_id)
    outcome = Launcher(tmp_path / "run", "slurm", progress=requeue_after_two_steps, poll_s=0.3).run(units)
    outcome = outcome["train.transformer.1"]
    assert outcome.status == FINISHED and requeued == [outcome.job_id]
    starts = [int(s) for s in open(out + ".starts").read().split()]
    assert len(starts) == 2 and starts[0] == 0 and starts[1] >= 2
    assert open(out).read().startswith("transformer.1 12 ")
