"""posnet-compare and the table recipes with --launcher slurm: their jobs, without a cluster (the batch
scripts, the units of a plan, the compare seam on submitit's local executor), and through a real
one-node SLURM cluster (tests/slurm_cluster.py: real sbatch, squeue, scancel, scontrol): a micro
comparison and a micro table recipe equal to their local runs; a killed driver, a cancelled job and
a requeued job of a comparison, each resumed from its checkpoint_last.pt.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from posnet_fairseq import fairseq_log
from posnet_fairseq.cli import compare
from posnet_fairseq.compare.options import build_parser
from posnet_fairseq.launcher import SlurmOptions
from posnet_fairseq.launcher.pool import JobPool
from posnet_fairseq.table_runs import slurm as slurm_submitter
from slurm_cluster import requeue
from test_compare import CHEAP

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHS = ["posnet_transformer_tiny", "rope_transformer_tiny"]
# The comparisons: 2 architectures; the micro comparison against a local run also x 2 seeds (4 training jobs).
GRID = ["--archs", ",".join(ARCHS)]
SEEDS = ["--seeds", "2"]
MODELS = [*ARCHS, *(f"{arch}.seed2" for arch in ARCHS)]  # posnet_fairseq.compare.seeds.key's names
MICRO = ["--budget", "2u", "--train-pairs", "60", "--valid", "6", "--test", "12", "--train-max-len", "10",
         "--vocab-size", "200", "--interval", "1", "--decode-lengths", "8", "--min-bucket-sentences", "2", *CHEAP]
ON_SLURM = ["--launcher", "slurm", "--poll-seconds", "0.3"]
ROWS = ["--micro", "--rows", "transformer,aan_plus_ner"]


def _env():
    return dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
                PYTHON=sys.executable, PYTHONPATH=REPO, OMP_NUM_THREADS="1")


def _recipe(paper, table, *flags):
    return subprocess.run(["bash", os.path.join(REPO, "recipes", paper, table), *flags], env=_env(),
                          capture_output=True, text=True)


# ---- without a cluster ----

def test_dry_run_prints_one_batch_script_per_job_with_its_dependencies():
    """PosNet Table 2 on two nodes: the trainings on 2 x 8 GPUs, torchrun once per node with its rank from
    SLURM; each evaluation after its averaging and after the baselines scored before it."""
    proc = _recipe("posnet", "table2.sh", "--launcher", "slurm", "--gpus", "8", "--nodes", "2", "--dry-run",
                   "--rows", "transformer,shaw,rposnet", "--datasets", "wmt14_en_de_bpe40k", "--partition", "gpu",
                   "--time", "4320", "--sbatch", "account=nmt", "--work", "/nonexistent/work")
    assert proc.returncode == 0, proc.stderr
    scripts = proc.stdout.split("#!/bin/bash\n")[1:]
    jobs = {re.search(r"--job-name=(\S+)", s).group(1): s for s in scripts}
    rows = [f"{stage}.{row}.wmt14_en_de_bpe40k" for row in ("transformer", "shaw", "rposnet")
            for stage in ("train", "average", "evaluate")]
    assert list(jobs) == rows + ["table"]
    for name, script in jobs.items():
        lines = set(script.splitlines())
        assert {"#SBATCH --partition=gpu", "#SBATCH --time=4320", "#SBATCH --account=nmt",
                "#SBATCH --requeue"} <= lines
        gpus = {"train": 8, "evaluate": 1}.get(name.split(".")[0])
        assert (f"#SBATCH --gpus-per-node={gpus}" in lines) == bool(gpus) and ("--gpus-per-node" in script) == bool(gpus)
        assert ("#SBATCH --nodes=2" in lines) == name.startswith("train.")

    def after(name):
        found = re.search(r"--dependency='afterok:(\S+)'", jobs[name])
        return found.group(1).strip("<>").split(">:<") if found else []
    assert after("train.shaw.wmt14_en_de_bpe40k") == []
    assert after("average.shaw.wmt14_en_de_bpe40k") == ["train.shaw.wmt14_en_de_bpe40k"]
    assert after("evaluate.transformer.wmt14_en_de_bpe40k") == ["average.transformer.wmt14_en_de_bpe40k"]
    assert after("evaluate.rposnet.wmt14_en_de_bpe40k") == ["average.rposnet.wmt14_en_de_bpe40k",
                                                            "evaluate.shaw.wmt14_en_de_bpe40k",
                                                            "evaluate.transformer.wmt14_en_de_bpe40k"]
    assert after("table") == [r for r in rows if r.startswith("evaluate.")]
    assert ("torchrun --nnodes 2 --node-rank $SLURM_NODEID --nproc-per-node 8 --master-addr "
            "$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)") in jobs[rows[0]]
    assert not os.path.exists("/nonexistent/work")


def test_recipe_launcher_flags_are_the_declared_ones():
    """recipes/lib/common.sh passes on exactly the job flags launcher/flags.py declares (but --gpus-per-job:
    a recipe's jobs take --gpus and --nodes)."""
    common = open(os.path.join(REPO, "recipes", "lib", "common.sh")).read()
    passed = set(re.search(r"^ *(--cpus-per-job\|[^)]*)\)", common, re.M).group(1).split("|"))
    parser = build_parser()
    group = next(g for g in parser._action_groups if g.title.startswith("SLURM jobs"))
    declared = {a.option_strings[0] for a in group._group_actions}
    assert passed == declared - {"--gpus-per-job"}
    assert "goes with --launcher slurm" in _recipe("aan", "table2.sh", "--partition", "x", "--dry-run").stderr
    assert "give --gpus N" in _recipe("aan", "table2.sh", "--launcher", "slurm", "--dry-run").stderr


@pytest.mark.parametrize("argv, error", [
    (["--launcher", "slurm", "--jobs", "2"], "--jobs: with --launcher slurm every model is a job of its own"),
    (["--launcher", "slurm", "--device", "cpu"], "--device cpu: with --launcher slurm"),
    (["--launcher", "slurm", "--time", "0"], "--time 0: must be at least 1"),
    (["--launcher", "slurm", "--sbatch", "dependency=afterok:1"], "--sbatch: SlurmOptions.sbatch sets ['dependency']"),
])
def test_compare_job_flag_errors_name_the_flag(argv, error, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    for command in ("sbatch", "squeue", "scancel"):  # a cluster's commands for the check, never called
        (tmp_path / command).write_text("#!/bin/sh\nexit 1\n")
        (tmp_path / command).chmod(0o755)
    with pytest.raises(SystemExit):
        compare.main([*GRID, "--out", str(tmp_path / "run"), *argv])
    assert error in capsys.readouterr().err


def _dead_controller_conf(folder):
    """A slurm.conf whose controller does not run (nothing listens on its port)."""
    host = socket.gethostname()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = folder / "slurm.conf"
    conf.write_text(f"ClusterName=gone\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={port}\n"
                    f"NodeName={host} CPUs=1 State=UNKNOWN\nPartitionName=debug Nodes=ALL Default=YES\n")
    return conf


@pytest.mark.parametrize("case, said", [
    ("empty configuration", "sinfo: fatal: Unable to process configuration file"),
    ("no controller", "slurm_load_partitions: Unable to contact slurm controller (connect failure)"),
])
def test_slurm_client_without_a_cluster_is_one_line_before_any_data(case, said, tmp_path, capsys, monkeypatch):
    """Issue 49, item 2: the SLURM client is installed but no cluster answers (here: a configuration file
    that is empty, or one whose controller does not run; also with --partition): SLURM's own words and what
    to check, before anything is prepared, instead of submitit's FailedJobError once the data are."""
    missing = [c for c in ("sbatch", "sinfo") if shutil.which(c) is None]
    if missing:
        pytest.skip(f"the SLURM client is not installed (no {', '.join(missing)}; Debian: slurm-client)")
    conf = tmp_path / "slurm.conf"
    if case == "empty configuration":
        conf.write_text("")
    else:
        conf = _dead_controller_conf(tmp_path)
    monkeypatch.setenv("SLURM_CONF", str(conf))
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as refused:
        compare.main([*GRID, "--out", str(out), *MICRO, *ON_SLURM, "--partition", "gpu"])
    assert refused.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == (f"posnet-compare: error: --launcher slurm: SLURM does not answer here (SLURM: {said}): "
                     f"check the cluster's configuration (SLURM_CONF={conf}) and that its controller runs "
                     "(scontrol ping), or run on a login node of the cluster, or use the local launcher")
    assert not out.exists()
    # the table recipes' submitter says the same, before its first job (the data preparation)
    plan = tmp_path / "plan.sh"
    plan.write_text(f"mkdir {tmp_path / 'data'}\n")
    with pytest.raises(SystemExit):
        slurm_submitter.main([str(plan), "--work", str(tmp_path / "work")])
    assert f"error: --launcher slurm: SLURM does not answer here (SLURM: {said})" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_job_pool_reports_ends_as_a_process_pool_does(tmp_path):
    """The compare seam on submitit's local executor: each command's output appended to its caller's file,
    the caller's environment, its exit status as the returncode; a re-run of a finished key runs it again."""
    ended = {}
    files = {key: open(tmp_path / f"{key}.log", "a") for key in ("ok", "bad")}
    commands = {"ok": [sys.executable, "-c", "import os; print('ok', os.environ['POSNET_X'])"],
                "bad": [sys.executable, "-c", "import sys; print('broken'); sys.exit(3)"]}
    for key, f in files.items():
        f.write("before\n")
        f.flush()
    pool = JobPool(tmp_path / "run", "local", SlurmOptions(), "train", log=lambda line: None, poll_seconds=0.1)

    def start(key, env):
        return pool.popen(commands[key], stdout=files[key], stderr=subprocess.STDOUT,
                          env=dict(os.environ, POSNET_X=key, **env))
    pool.run(["ok", "bad"], start, lambda key, process: ended.setdefault(key, process.returncode))
    assert ended == {"ok": 0, "bad": 3} and not pool.running
    assert (tmp_path / "ok.log").read_text() == "before\nok ok\n"
    assert (tmp_path / "bad.log").read_text() == "before\nbroken\n"
    ended.clear()
    pool.run(["ok"], start, lambda key, process: ended.setdefault(key, process.returncode))
    assert ended == {"ok": 0} and (tmp_path / "ok.log").read_text() == "before\nok ok\nok ok\n"


# ---- through the real cluster ----

def _outputs(out):
    """What a comparison found, without its timings: the translations, the scores, the trainings."""
    found = {name: [line for line in (out / "gen" / name).read_text().splitlines()
                    if re.match(r"[SHTDP]-\d+\t", line)]  # fairseq-generate's lines of each sentence
             for name in sorted(os.listdir(out / "gen")) if name.endswith(".out")}
    found["quality"] = json.loads((out / "quality.json").read_text())
    for path in sorted((out / "steps").glob("train--*.json")):  # every model's training (each seed's)
        found[path.stem] = json.loads(path.read_text())["result"]
    return found


def test_slurm_micro_compare_equals_local(slurm_cluster, tmp_path):
    assert compare.main([*GRID, *SEEDS, "--out", str(tmp_path / "local"), *MICRO, "--jobs", "2"]) == 0
    started = time.monotonic()
    assert compare.main([*GRID, *SEEDS, "--out", str(tmp_path / "slurm"), *MICRO, *ON_SLURM]) == 0
    print(f"posnet-compare through SLURM: {time.monotonic() - started:.0f} s")
    assert _outputs(tmp_path / "slurm") == _outputs(tmp_path / "local")
    units = json.loads((tmp_path / "slurm" / "slurm" / "launcher.json").read_text())["units"]
    assert {name: u["submissions"] for name, u in units.items()} == {
        f"{kind}.{model}": 1 for kind in ("train", "translate") for model in MODELS}
    log = (tmp_path / "slurm" / "compare.log").read_text()
    assert f"train.{ARCHS[1]}: started (job {units[f'train.{ARCHS[1]}']['job_id']})" in log
    assert "progress: model" in log


def test_slurm_drivers_check_the_partition_and_lock_their_directory(slurm_cluster, tmp_path, capsys):
    """Issue 49: an unknown --partition is named before anything is prepared; a second driver on an --out (a
    recipe's WORK) that a run holds is refused, naming it."""
    from posnet_fairseq.launcher import RunLock

    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        compare.main([*GRID, "--out", str(out), *MICRO, *ON_SLURM, "--partition", "nosuch"])
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "posnet-compare: error: --launcher slurm: --partition nosuch: the cluster has no such partition (sinfo "
        "lists ")
    assert not out.exists()
    with RunLock(out, "posnet-compare"):
        with pytest.raises(SystemExit):
            compare.main([*GRID, "--out", str(out), *MICRO, *ON_SLURM])
    assert f"error: --out {out} is in use by posnet-compare pid {os.getpid()} on host " in capsys.readouterr().err
    assert not (out / "slurm").exists() and not (out / "steps").exists()
    plan, work = tmp_path / "plan.sh", tmp_path / "work"
    plan.write_text(f"mkdir {tmp_path / 'data'}\n")
    with RunLock(work / "slurm", "aan/table2.sh"):
        with pytest.raises(SystemExit):
            slurm_submitter.main([str(plan), "--work", str(work)])
    assert (f"error: --work {work}: {work / 'slurm'} is in use by aan/table2.sh pid {os.getpid()} on host "
            in capsys.readouterr().err)
    assert not (tmp_path / "data").exists() and not (work / "slurm" / "jobs").exists()


def _resumed_at(log_path):
    """The updates of each checkpoint_last.pt fairseq-train loaded, in the order of the log."""
    return [int(n) for n in re.findall(r"[Ll]oaded checkpoint \S*checkpoint_last\.pt \(epoch \d+ @ (\d+) updates\)",
                                       open(log_path).read())]


def test_slurm_compare_killed_driver_cancelled_and_requeued_jobs_resume(slurm_cluster, tmp_path):
    """The driver is killed (kill -9) while both trainings run; then one job is cancelled (scancel) and
    the other requeued (scontrol requeue, as a preemption). The same command attaches to the requeued job,
    submits the cancelled one again, and both resume from their checkpoint_last.pt."""
    out = tmp_path / "run"
    argv = [*GRID, "--out", str(out), *MICRO, *ON_SLURM, "--budget", "100u", "--interval", "2"]
    driver = subprocess.Popen([sys.executable, "-P", "-m", "posnet_fairseq.cli.compare", *argv], env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state, deadline = out / "slurm" / "launcher.json", time.monotonic() + 300
    lasts = [out / "checkpoints" / arch / "checkpoint_last.pt" for arch in ARCHS]
    while not (state.exists() and all(p.exists() for p in lasts)):
        assert driver.poll() is None and time.monotonic() < deadline, "the trainings did not save a checkpoint"
        time.sleep(0.2)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    jobs = {name: u["job_id"] for name, u in json.loads(state.read_text())["units"].items()}
    requeued, cancelled = jobs[f"train.{ARCHS[0]}"], jobs[f"train.{ARCHS[1]}"]
    subprocess.run(["scancel", cancelled], check=True)
    requeue(requeued)
    assert compare.main(argv) == 0
    units = json.loads(state.read_text())["units"]
    assert units[f"train.{ARCHS[0]}"] == {"job_id": requeued, "submissions": 1}
    assert units[f"train.{ARCHS[1]}"]["submissions"] == 2 and units[f"train.{ARCHS[1]}"]["job_id"] != cancelled
    log = (out / "compare.log").read_text()
    assert f"train.{ARCHS[0]}: attached (job {requeued})" in log
    assert f"train.{ARCHS[1]}: resubmitted (job {cancelled}): its job {cancelled} ended CANCELLED" in log
    for arch in ARCHS:
        resumed = _resumed_at(out / "checkpoints" / f"{arch}.train.log")
        assert len(resumed) == 1 and resumed[0] >= 1, (arch, resumed)  # not from update 0
        assert json.loads((out / "steps" / f"train--{arch}.json").read_text())["result"]["updates"] == 100
        assert fairseq_log.finished(str(out / "checkpoints" / f"{arch}.train.log"))
    assert (out / "results.md").exists()


def _recipe_results(work):
    found = {}
    for row in ("transformer", "aan_plus_ner"):
        test = work / "results" / row / "wmt14_en_de_bpe32k" / "test"
        result = json.loads((test / "result.json").read_text())
        found[row] = ((test / "hyp.detok").read_text(), result["bleu_tok"], result["sacrebleu"]["score"],
                      result["params"], result["sentences"])
    return found


def test_slurm_micro_recipe_equals_local(slurm_cluster, tmp_path):
    local = _recipe("aan", "table2.sh", *ROWS, "--work", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr[-3000:]
    started = time.monotonic()
    on_slurm = _recipe("aan", "table2.sh", *ROWS, "--work", str(tmp_path / "slurm"), "--launcher", "slurm",
                       "--poll-seconds", "0.3")
    print(f"aan table2 --micro through SLURM: {time.monotonic() - started:.0f} s")
    assert on_slurm.returncode == 0, on_slurm.stderr[-3000:]
    assert _recipe_results(tmp_path / "slurm") == _recipe_results(tmp_path / "local")
    table = (tmp_path / "slurm" / "aan-table2.md").read_text()
    assert table.startswith("## AAN+ paper, Table 2")
    units = json.loads((tmp_path / "slurm" / "slurm" / "launcher.json").read_text())["units"]
    assert sorted(units) == sorted(["prepare", "table"] + [f"{stage}.{row}.wmt14_en_de_bpe32k" for stage in
                                                           ("train", "average", "evaluate")
                                                           for row in ("transformer", "aan_plus_ner")])
