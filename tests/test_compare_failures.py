"""posnet-compare when a model fails or starts again (issue 49, items 3 and 9): a full disk is said in the
wrapper's words in the summary line, results.md and results.csv; a failed model makes the run exit 1 with its
report written; a training restarted from update 0 sets its earlier checkpoints aside and says so; the
wrapper's notices and the reason of a re-done translation reach the comparison's own log."""
import os
import types

from posnet_fairseq import fairseq_log
from posnet_fairseq.cli import compare
from posnet_fairseq.compare import devices, recipe, training
from posnet_fairseq.compare.steps import Steps
from test_compare import SMALL_SYNTHETIC, read_csv

ARCHS = ["posnet_transformer_tiny", "rope_transformer_tiny"]
# The names fairseq-train may write first at the save of update 1 or 2 (--save-interval-updates 1, an epoch
# checkpoint when the epoch ends there), each to NAME.tmp before renaming it.
FIRST_SAVES = ["checkpoint1.pt", "checkpoint2.pt", "checkpoint_1_1.pt", "checkpoint_1_2.pt", "checkpoint_2_2.pt",
               "checkpoint_best.pt", "checkpoint_last.pt"]
# fairseq's own log of a failed checkpoint save (checkpoint_utils.torch_persistent_save logs the traceback),
# then the wrapper's line: what the log of a training on a full disk ends with.
FULL_DISK_TAIL = ["2026-11-27 10:00:00 | ERROR | fairseq.checkpoint_utils | Traceback (most recent call last):",
                  '  File "torch/serialization.py", line 967, in save',
                  "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0",
                  "posnet-train: no space left on /data/ckpt: free space there or give another --save-dir; the same "
                  "command then resumes from the last checkpoint (docs/troubleshooting.md#no-space-left)"]


def test_a_full_disk_is_said_in_the_report_the_run_fails_and_a_redone_translation_says_why(tmp_path):
    """A real full disk for one model: its save directory's checkpoint files are written to /dev/full (ENOSPC,
    as on a full file system; torch's zip writer then says "unexpected pos")."""
    out = tmp_path / "run"
    save_dir = out / "checkpoints" / ARCHS[1]
    save_dir.mkdir(parents=True)
    for name in FIRST_SAVES:
        (save_dir / f"{name}.tmp").symlink_to("/dev/full")
    argv = ["--archs", ",".join(ARCHS), "--out", str(out), *SMALL_SYNTHETIC]
    assert compare.main(argv) == 1
    said = f"fairseq-train exit 1: posnet-train: no space left on {save_dir}: free space there"
    row = next(line for line in (out / "results.md").read_text().splitlines() if line.startswith(f"| `{ARCHS[1]}`"))
    assert f"FAILED: {said}" in row and "unexpected pos" not in row
    assert read_csv(out / "results.csv")[ARCHS[1]]["failed"].startswith(said)
    log = (out / "compare.log").read_text()
    assert f"train: {ARCHS[1]} FAILED ({said}" in log
    assert f"exit status 1: 1 of 2 models FAILED ({ARCHS[1]}: {said}" in log
    assert "unexpected pos" in (out / "checkpoints" / f"{ARCHS[1]}.train.log").read_text()  # torch's words, there

    # The disk has room again (the wrapper removed the .tmp files); the baseline's translation was damaged.
    assert not [name for name in os.listdir(save_dir) if name.endswith(".tmp")]
    translation = out / "gen" / f"{ARCHS[0]}.out"
    translation.write_text(translation.read_text()[:100])
    assert compare.main(argv) == 0
    log = (out / "compare.log").read_text()
    assert f"translate: {ARCHS[0]} is translated again: its output gen/{ARCHS[0]}.out is damaged" in log
    assert f"translate: skipped {ARCHS[1]}" not in log and "exit status 1" not in log.split("posnet-compare --")[-1]


def _trainer(tmp_path, lines):
    steps = Steps(tmp_path / "out")
    return training.Trainer(steps, str(tmp_path / "data-bin"), recipe.Budget.parse("4u"), recipe.Recipe(),
                            devices.plan("cpu", 1), lines.append)


def _ended(trainer, model, log_lines, returncode):
    """Ends a training of ``model`` whose log (after its start mark) is ``log_lines``, as the pool would."""
    os.makedirs(trainer.save_dir(model), exist_ok=True)
    with open(trainer.log_path(model), "w") as f:
        f.write(f"{fairseq_log.START_MARK}1.0\n" + "".join(line + "\n" for line in log_lines))
    with open(os.path.join(trainer.save_dir(model), "train.pid"), "w") as f:
        f.write("1")
    trainer.log_files[model] = open(trainer.log_path(model), "a")
    return trainer._ended(model, types.SimpleNamespace(returncode=returncode))


def test_the_wrappers_notices_reach_the_comparisons_log(tmp_path):
    lines = []
    trainer = _trainer(tmp_path, lines)
    restored = ("posnet-train: ckpt/checkpoint_last.pt was truncated (a training stopped while fairseq copied it "
                "there); restored from ckpt/checkpoint_best.pt, the newest intact checkpoint of the run, to resume "
                "from")
    outcome = _ended(trainer, "m", [restored, "2026-11-27 10:00:00 | INFO | train | epoch 001"], -9)
    assert f"train: m: {restored}" in lines and "killed (signal 9)" in outcome.failed


def test_a_full_disk_is_the_wrappers_line_not_torchs_error(tmp_path):
    """The reason of a failed training is the wrapper's line after fairseq's logged traceback, said once."""
    lines = []
    trainer = _trainer(tmp_path, lines)
    restored = "posnet-train: ckpt/checkpoint_last.pt was truncated; restored from ckpt/checkpoint_best.pt"
    outcome = _ended(trainer, "full", [restored, *FULL_DISK_TAIL], 1)
    assert outcome.failed == f"fairseq-train exit 1: {FULL_DISK_TAIL[-1]}"
    assert lines[0] == f"train: full: {restored}"  # the notice; the reason once, in the FAILED line
    assert lines[1].startswith(f"train: full FAILED ({outcome.failed}); end of ") and len(lines) == 2


def test_a_restart_from_update_0_sets_the_earlier_checkpoints_aside_and_says_so(tmp_path):
    lines = []
    trainer = _trainer(tmp_path, lines)
    save_dir = trainer.save_dir("m")
    os.makedirs(save_dir)
    earlier = {"checkpoint_best.pt": b"best", "checkpoint_1_40.pt": b"update 40", "checkpoint_avg.pt.deleted": b"{}"}
    for name, content in earlier.items():
        with open(os.path.join(save_dir, name), "wb") as f:
            f.write(content)
    with open(trainer.log_path("m"), "w") as f:
        f.write("the earlier training's log\n")
    trainer._restart("m", 40)
    assert os.listdir(save_dir) == []
    for name, content in earlier.items():
        with open(os.path.join(save_dir + ".discarded", name), "rb") as f:
            assert f.read() == content
    said = next(line for line in lines if "set aside" in line)
    assert said.startswith("train: m: the 3 checkpoint files of the earlier training (checkpoint_1_40.pt, "
                           "checkpoint_avg.pt.deleted, checkpoint_best.pt; ")
    assert f"are set aside in {save_dir}.discarded, so that they do not mix into the new training" in said
    # a second restart keeps the first one's files
    with open(os.path.join(save_dir, "checkpoint_best.pt"), "wb") as f:
        f.write(b"second")
    with open(trainer.log_path("m"), "w") as f:
        f.write("the second training's log\n")
    trainer._restart("m", 8)
    with open(os.path.join(save_dir + ".discarded.2", "checkpoint_best.pt"), "rb") as f:
        assert f.read() == b"second"
    with open(os.path.join(save_dir + ".discarded", "checkpoint_best.pt"), "rb") as f:
        assert f.read() == b"best"
