"""Every table recipe's --dry-run plan: each training command must parse with fairseq and the plugin.

The plan is what the recipe would run. Each fairseq-train line is parsed in
this process with fairseq's own parser (``options.parse_args_and_arch``) and
the plugin imported, so an architecture, mixer or flag that does not exist
fails here, naming the row - the recipe refuses to start in that case too.
"""
import os
import re
import shlex
import subprocess
import sys

import pytest

from posnet_fairseq.evaluation import tables
from posnet_fairseq.recipe_tools import plancheck

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {
    "posnet-table2": "posnet/table2.sh", "posnet-table3": "posnet/table3.sh", "posnet-table4": "posnet/table4.sh",
    "posnet-table5": "posnet/table5.sh", "posnet-table6": "posnet/table6.sh",
    "aan-table2": "aan/table2.sh", "aan-table4": "aan/table4.sh", "aan-table6": "aan/table6.sh",
    "aan-table7": "aan/table7.sh", "gaussian-table2": "gaussian/table2.sh", "tisa-mt": "tisa/mt.sh",
}


def dry_run(tmp_path, script, *args, check=True):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
               PYTHON=sys.executable)
    proc = subprocess.run(["bash", os.path.join(REPO, "recipes", script), "--dry-run", "--work", str(tmp_path / "w"),
                           "--data-root", str(tmp_path / "data"), *args], env=env, capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_every_table_has_a_script():
    assert set(SCRIPTS) == set(tables.TABLES)


@pytest.mark.parametrize("table", sorted(SCRIPTS))
def test_dry_run_plan_parses(table, tmp_path):
    plan = dry_run(tmp_path, SCRIPTS[table]).stdout
    rows = re.findall(r"^# row (\S+) (\S+)$", plan, flags=re.M)
    # the script's rows and the table layout agree
    assert {r for r, _ in rows} == {k for k, _ in tables.TABLES[table].rows}
    for col in tables.TABLES[table].columns:
        assert any(ds == col.dataset for _, ds in rows), col
    # one training, averaging, generation and evaluation per row and test set
    commands = plancheck.train_commands(plan)
    assert len(commands) == len(rows)
    assert plan.count("-m posnet_fairseq.cli.average_checkpoints ") == len(rows)
    assert plan.count("fairseq-generate ") == plan.count("evaluation.evaluate ") >= len(rows)
    assert f"evaluation.tables collect {table} " in plan
    for _, argv in commands:
        for flag in ("--arch", "--max-update", "--update-freq", "--warmup-updates", "--lr", "--criterion",
                     "--save-interval-updates", "--skip-invalid-size-inputs-valid-test"):
            assert flag in argv, (flag, argv)
    # every test sentence is translated: no batch rounding to fairseq's training multiple of 8
    for line in plan.splitlines():
        if line.startswith("fairseq-generate "):
            assert "--required-batch-size-multiple 1 " in line, line
    bad = plancheck.check_plan(plan)
    assert not bad, f"{table}: " + plancheck.report(bad)


def _train_argv(plan, row):
    return dict(plancheck.train_commands(plan))[row]


def test_tokens_per_update_follow_the_world_size(tmp_path):
    one = dry_run(tmp_path, "posnet/table6.sh").stdout
    argv = _train_argv(one, "rposnet")
    assert argv[argv.index("--update-freq") + 1] == "6"  # 27000 tokens / 4500 per GPU
    four = dry_run(tmp_path, "posnet/table6.sh", "--gpus", "4").stdout
    argv = _train_argv(four, "rposnet")
    assert argv[argv.index("--update-freq") + 1] == "2"  # ceil(27000 / 18000)
    assert argv[argv.index("--distributed-world-size") + 1] == "4"


def test_two_node_plan_uses_torchrun_and_only_node_zero_evaluates(tmp_path):
    args = ("--nodes", "2", "--gpus", "8", "--master-addr", "10.0.0.1", "--master-port", "12345")
    lead = dry_run(tmp_path, "aan/table2.sh", *args, "--node-rank", "0").stdout
    other = dry_run(tmp_path, "aan/table2.sh", *args, "--node-rank", "1").stdout
    line = next(l for l in lead.splitlines() if l.startswith("torchrun"))
    words = shlex.split(line)
    assert words[:13] == ["torchrun", "--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "8",
                          "--master-addr", "10.0.0.1", "--master-port", "12345", "-m", "fairseq_cli.train"]
    argv = _train_argv(lead, "aan")
    assert argv[argv.index("--update-freq") + 1] == "1"  # 25000 / (4096 * 16)
    assert "--node-rank 1" in other and "fairseq-generate" not in other and "tables collect" not in other


def test_cpu_processes_plan(tmp_path):
    plan = dry_run(tmp_path, "tisa/mt.sh", "--cpu-procs", "2", "--rows", "tisa_a").stdout
    assert re.findall(r"^# row (\S+)", plan, flags=re.M) == ["tisa_a", "tisa_a"]
    line = next(l for l in plan.splitlines() if "recipe_tools.launch" in l)
    assert "--procs 2 -- fairseq-train" in line
    for flag in ("--cpu", "--distributed-backend gloo", "--distributed-no-spawn", "--ddp-backend legacy_ddp",
                 "--distributed-world-size 2", "--distributed-init-method tcp://127.0.0.1:"):
        assert flag in line


def test_datasets_option_selects_columns(tmp_path):
    plan = dry_run(tmp_path, "posnet/table2.sh", "--datasets", "wmt18_en_zh").stdout
    rows = re.findall(r"^# row (\S+) (\S+)$", plan, flags=re.M)
    assert rows and {ds for _, ds in rows} == {"wmt18_en_zh"}
    proc = dry_run(tmp_path, "posnet/table2.sh", "--datasets", "wmt99_xx_yy", check=False)
    assert proc.returncode != 0 and "--datasets: no row of posnet-table2 is on wmt99_xx_yy" in proc.stderr


def test_unknown_row_and_option_are_refused(tmp_path):
    proc = dry_run(tmp_path, "aan/table2.sh", "--rows", "transformer,nope", check=False)
    assert proc.returncode != 0 and "no row nope in aan-table2" in proc.stderr
    proc = dry_run(tmp_path, "aan/table2.sh", "--frobnicate", check=False)
    assert proc.returncode != 0 and "unknown option --frobnicate" in proc.stderr
