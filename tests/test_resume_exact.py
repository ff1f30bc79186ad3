"""A training killed (SIGKILL, no chance to clean up) and resumed by the same ``posnet-train`` command ends
bit-equal to the same training never interrupted: every parameter and the whole optimizer state (issue 49
item 10).

Why it can be exact: fairseq saves with a checkpoint the optimizer state, the learning-rate scheduler, the
position of the epoch's iterator (mid-epoch) and the update count, and it seeds the torch generator from
``--seed`` and the update count before each update (``Trainer.train_step``), so dropout draws the same masks
after a resume. On CPU with one thread the arithmetic is the same too. The kill comes right after the
checkpoint of update N/2 is written (fairseq's ``save_checkpoint`` wrapped in the training's process), the
point a kill -9 leaves a run at, short of the updates after it, which the resumed run makes again.
"""
import os
import subprocess
import sys

import pytest
import torch

from fairseq_testing import TINY_DIMS, write_synthetic_data_bin

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UPDATES = 8
TRAIN = ["--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4",
         "--dropout", "0.1", "--max-tokens", "200", "--num-workers", "0", "--no-progress-bar", "--seed", "3",
         "--disable-validation", "--no-epoch-checkpoints", "--save-interval-updates", str(UPDATES // 2),
         "--max-update", str(UPDATES), "--cpu", *TINY_DIMS]
# posnet-train in a fresh interpreter; with KILL_AT set, the process kills itself with SIGKILL once the
# checkpoint of that update is written.
RUN = """
import os, signal, sys
from fairseq import checkpoint_utils
from posnet_fairseq.cli import fairseq_wrappers

save = checkpoint_utils.save_checkpoint

def save_then_die(cfg, trainer, epoch_itr, val_loss):
    save(cfg, trainer, epoch_itr, val_loss)
    if trainer.get_num_updates() == int(os.environ["KILL_AT"]):
        os.kill(os.getpid(), signal.SIGKILL)

if os.environ.get("KILL_AT"):
    checkpoint_utils.save_checkpoint = save_then_die
sys.argv = ["posnet-train", *sys.argv[1:]]
fairseq_wrappers.train()
"""


def _train(data_bin, save_dir, arch, kill_at=None):
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    env.pop("KILL_AT", None)
    if kill_at is not None:
        env["KILL_AT"] = str(kill_at)
    done = subprocess.run([sys.executable, "-c", RUN, data_bin, "--arch", arch, *TRAIN, "--save-dir", save_dir],
                          capture_output=True, text=True, env=env, timeout=600)
    return done.returncode, done.stdout + done.stderr


def _flat(state, prefix=""):
    """{path: tensor or value} of a nested checkpoint entry."""
    if isinstance(state, dict):
        return {k: v for key, value in state.items() for k, v in _flat(value, f"{prefix}{key}.").items()}
    if isinstance(state, (list, tuple)):
        return {k: v for i, value in enumerate(state) for k, v in _flat(value, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): state}


def _differences(a, b):
    """The entries of two flattened states that differ, with the largest absolute difference of each."""
    assert a.keys() == b.keys()
    found = {}
    for key in a:
        x, y = a[key], b[key]
        if torch.is_tensor(x):
            if not torch.equal(x, y):
                found[key] = (x.double() - y.double()).abs().max().item() if x.shape == y.shape else "shape"
        elif x != y:
            found[key] = (x, y)
    return found


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return write_synthetic_data_bin(str(tmp_path_factory.mktemp("resume")), train=80, valid=8, test=8)


@pytest.mark.parametrize("arch", ["posnet_transformer_tiny", "aan_plus_ner_tiny"])
def test_a_killed_and_resumed_training_ends_bit_equal_to_an_uninterrupted_one(data_bin, tmp_path, arch):
    straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
    status, text = _train(data_bin, straight, arch)
    assert status == 0, text[-3000:]
    status, text = _train(data_bin, resumed, arch, kill_at=UPDATES // 2)
    assert status == -9, text[-3000:]  # killed by SIGKILL, right after the checkpoint of update N/2
    half = torch.load(os.path.join(resumed, "checkpoint_last.pt"), weights_only=False)
    assert half["optimizer_history"][-1]["num_updates"] == UPDATES // 2
    assert half["extra_state"]["train_iterator"]["iterations_in_epoch"] > 0  # the kill came mid-epoch
    status, text = _train(data_bin, resumed, arch)
    assert status == 0, text[-3000:]
    assert f"Loaded checkpoint {resumed}/checkpoint_last.pt (epoch 1 @ {UPDATES // 2} updates)" in text

    ends = [torch.load(os.path.join(d, "checkpoint_last.pt"), weights_only=False) for d in (straight, resumed)]
    assert [e["optimizer_history"][-1]["num_updates"] for e in ends] == [UPDATES, UPDATES]
    assert _differences(_flat(ends[0]["model"]), _flat(ends[1]["model"])) == {}
    optimizer = [_flat(e["last_optimizer_state"]) for e in ends]
    assert any(torch.is_tensor(v) and "exp_avg_sq" in k for k, v in optimizer[0].items())
    assert _differences(*optimizer) == {}
    assert ends[0]["optimizer_history"][-1]["lr_scheduler_state"] == ends[1]["optimizer_history"][-1][
        "lr_scheduler_state"]


def test_a_tisa_run_saved_by_the_earlier_layout_resumes_with_its_optimizer_state(tmp_path):
    """A TISA run's checkpoint_last.pt saved with Adam's state by the code before issue 48's TISA changes (three
    kernel parameters a scorer; tests/fixtures/make_resume_fixture.py) resumes for one update: the optimizer
    state loads (Adam's moments continue: every parameter's step is 2, not the 1 of a reset optimizer)."""
    sys.path.insert(0, os.path.join(REPO, "tests", "fixtures"))
    import make_resume_fixture as fixture

    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    env.pop("KILL_AT", None)
    done = subprocess.run([sys.executable, "-c", RUN, *fixture.TRAIN_FLAGS, "--max-update", str(fixture.UPDATES + 1),
                           "--save-dir", str(tmp_path), "--restore-file", fixture.CHECKPOINT],
                          capture_output=True, text=True, env=env, timeout=600)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    assert f"Loaded checkpoint {fixture.CHECKPOINT} (epoch 1 @ {fixture.UPDATES} updates)" in text
    saved, end = (torch.load(path, weights_only=False) for path in (fixture.CHECKPOINT,
                                                                    tmp_path / "checkpoint_last.pt"))
    assert end["optimizer_history"][-1]["num_updates"] == fixture.UPDATES + 1
    assert list(end["model"]) == list(saved["model"])  # the same state-dict names, in the same order
    states = end["last_optimizer_state"]["state"]
    assert len(states) == len(saved["last_optimizer_state"]["state"])
    assert {state["step"] for state in states.values()} == {fixture.UPDATES + 1}
