"""posnet_fairseq/checkpoint_averaging.py and its command line (posnet-average-checkpoints): which checkpoints a recipe averages, and the average itself."""
import os

import pytest

from posnet_fairseq import checkpoint_averaging
from posnet_fairseq.cli import average_checkpoints


def _checkpoints(directory, updates, best, value=lambda u: float(u)):
    """Update checkpoints checkpoint_1_U.pt whose one weight is ``value(U)``, and checkpoint_best.pt at ``best``."""
    import torch

    os.makedirs(directory, exist_ok=True)
    for u in list(updates) + ["best"]:
        n = best if u == "best" else u
        state = {"model": {"w": torch.tensor([value(n)])}, "optimizer_history": [{"num_updates": n}],
                 "extra_state": {"val_loss": abs(n - best) + 1.0}, "last_optimizer_state": {"x": 1}}
        torch.save(state, os.path.join(directory, "checkpoint_best.pt" if u == "best" else f"checkpoint_1_{u}.pt"))


def test_best_and_following_checkpoints(tmp_path):
    """PosNet paper 5.3: the best checkpoint and the N-1 after it, else the last N."""
    d = str(tmp_path / "c")
    _checkpoints(d, range(300, 3301, 300), best=1500)  # 11 update checkpoints, 300 apart
    name = lambda paths: [os.path.basename(p) for p in paths]  # noqa: E731
    assert name(checkpoint_averaging.best_and_following(d, 3)) == [
        "checkpoint_1_1500.pt", "checkpoint_1_1800.pt", "checkpoint_1_2100.pt"]
    assert name(checkpoint_averaging.best_and_following(d, 7)) == [  # the best and all 6 after it
        f"checkpoint_1_{u}.pt" for u in range(1500, 3301, 300)]
    # only 6 checkpoints follow the best: not enough for 8, so the last 8
    assert name(checkpoint_averaging.best_and_following(d, 8)) == [
        f"checkpoint_1_{u}.pt" for u in range(1200, 3301, 300)]
    # a best saved between interval checkpoints (end of an epoch): checkpoint_best.pt itself and the next ones
    assert name(checkpoint_averaging.best_and_following(d, 2, best_update=1650)) == [
        "checkpoint_best.pt", "checkpoint_1_1800.pt"]
    with pytest.raises(ValueError, match="only 11 update checkpoints"):
        checkpoint_averaging.best_and_following(d, 12)


def test_best_and_following_refuses_when_the_followers_were_deleted(tmp_path):
    d = str(tmp_path / "c")
    _checkpoints(d, range(2400, 3301, 300), best=600)  # --keep-interval-updates kept 2400..3300 only
    with pytest.raises(ValueError, match="older than the update checkpoints kept .* --keep-best-checkpoints 2"):
        checkpoint_averaging.best_and_following(d, 2)


def test_best_and_following_reads_the_kept_best_copies_when_the_followers_were_deleted(tmp_path):
    """The recipes' window around the best: fairseq's --keep-best-checkpoints N copies (value to 3 decimals, then
    a digit against ties), the lowest first, when the checkpoints after an early best are gone."""
    import shutil

    d = str(tmp_path / "c")
    _checkpoints(d, range(2400, 3301, 300), best=600)
    for name, value in (("checkpoint.best_nll_loss_2.3401.pt", 2.340), ("checkpoint.best_nll_loss_2.1003.pt", 2.1),
                        ("checkpoint.best_nll_loss_2.2000.pt", 2.2)):
        shutil.copy(os.path.join(d, "checkpoint_best.pt"), os.path.join(d, name))
    assert [os.path.basename(p) for p in checkpoint_averaging.best_and_following(d, 2)] == [
        "checkpoint.best_nll_loss_2.1003.pt", "checkpoint.best_nll_loss_2.2000.pt"]
    with pytest.raises(ValueError, match="only 3 checkpoint.best_"):
        checkpoint_averaging.best_and_following(d, 4)


def test_averaging_keeps_tied_embeddings_tied(tmp_path):
    import torch

    paths = []
    for i, value in enumerate((1.0, 3.0)):
        emb = torch.full((4, 2), value)
        state = {"model": {"encoder.embed_tokens.weight": emb, "decoder.output_projection.weight": emb,
                           "w": torch.full((2,), value)}, "optimizer_history": [{"num_updates": i}]}
        paths.append(str(tmp_path / f"c{i}.pt"))
        torch.save(state, paths[-1])
    out = checkpoint_averaging.average_checkpoints(paths)["model"]
    assert out["encoder.embed_tokens.weight"] is out["decoder.output_projection.weight"]
    assert out["w"].tolist() == [2.0, 2.0] and out["encoder.embed_tokens.weight"].eq(2.0).all()


def test_average_checkpoints_cli_averages_the_chosen_weights(tmp_path):
    import torch

    d = str(tmp_path / "c")
    _checkpoints(d, [2, 4, 6, 8], best=4, value=lambda u: {2: 1.0, 4: 10.0, 6: 20.0, 8: 40.0}[u])
    out = str(tmp_path / "avg.pt")
    average_checkpoints.main(["--inputs", d, "--output", out, "--best-and-following", "2"])
    state = torch.load(out, weights_only=True)
    assert state["model"]["w"].item() == 15.0 and state["last_optimizer_state"] is None  # (10 + 20) / 2
    average_checkpoints.main(["--inputs", d, "--output", out, "--num-update-checkpoints", "3"])
    assert torch.load(out, weights_only=True)["model"]["w"].item() == pytest.approx(70 / 3)
    with pytest.raises(SystemExit):
        average_checkpoints.main(["--inputs", d, "--output", out, "--best-and-following", "5"])


def _fairseq_checkpoint(path, arch, flags=(), vocab=6, value=1.0):
    """A checkpoint as fairseq-train stores one: cfg.model holds ``arch`` with its settings (``flags`` on top),
    the weights ``vocab`` x 2 embeddings and one more tensor."""
    import argparse

    import torch

    from posnet_fairseq import presets

    model = argparse.Namespace(**presets.resolve(arch, list(flags)), arch=arch)
    state = {"cfg": {"model": model}, "optimizer_history": [{"num_updates": 1}],
             "model": {"encoder.embed_tokens.weight": torch.full((vocab, 2), value), "w": torch.full((2,), value)}}
    torch.save(state, path)
    return str(path)


def _refusal(capsys, argv):
    """(exit status, stderr) of posnet-average-checkpoints ARGV, which must exit."""
    with pytest.raises(SystemExit) as exit_:
        average_checkpoints.main(argv)
    code, err = exit_.value.code, capsys.readouterr().err
    return (1, err + code + "\n") if isinstance(code, str) else (code, err)  # sys.exit(message) prints it


def test_averaging_refuses_another_architecture_with_the_same_parameter_names(tmp_path, capsys):
    """Issue 27.1: rope_transformer_tiny has exactly posnet_transformer_tiny's parameters; their average is
    neither model."""
    mha = _fairseq_checkpoint(tmp_path / "mha.pt", "posnet_transformer_tiny")
    rope = _fairseq_checkpoint(tmp_path / "rope.pt", "rope_transformer_tiny", value=3.0)
    out = str(tmp_path / "avg.pt")
    status, err = _refusal(capsys, ["--inputs", mha, rope, "--output", out])
    assert status == 1 and not os.path.exists(out)
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert f"{rope} and {mha} are checkpoints of other models (--arch rope_transformer_tiny vs " \
           "posnet_transformer_tiny)" in err
    # the same architecture with another model setting; dropout alone (training only) is the same model
    rposnet = _fairseq_checkpoint(tmp_path / "rposnet.pt", "posnet_transformer_tiny",
                                  ["--encoder-self-mixer", "rposnet"])
    with pytest.raises(ValueError, match=r"other models \(--encoder-self-mixer rposnet vs mha\)"):
        checkpoint_averaging.average_checkpoints([mha, rposnet])
    dropout = _fairseq_checkpoint(tmp_path / "dropout.pt", "posnet_transformer_tiny", ["--dropout", "0.3"],
                                  value=3.0)
    assert checkpoint_averaging.average_checkpoints([mha, dropout])["model"]["w"].tolist() == [2.0, 2.0]


def test_averaging_other_vocabularies_is_one_line_naming_the_paths(tmp_path, capsys):
    a = _fairseq_checkpoint(tmp_path / "a.pt", "posnet_transformer_tiny", vocab=6)
    b = _fairseq_checkpoint(tmp_path / "b.pt", "posnet_transformer_tiny", vocab=8)
    status, err = _refusal(capsys, ["--inputs", a, b, "--output", str(tmp_path / "avg.pt")])
    assert status == 1 and err.strip().count("\n") == 0 and "Traceback" not in err
    assert f"{b} and {a} have other shapes of encoder.embed_tokens.weight (8x2 vs 6x2): other dictionaries" in err


def test_averaging_a_truncated_or_missing_checkpoint_says_which(tmp_path, capsys):
    a = _fairseq_checkpoint(tmp_path / "a.pt", "posnet_transformer_tiny")
    truncated = tmp_path / "b.pt"
    truncated.write_bytes(open(a, "rb").read()[:300])
    status, err = _refusal(capsys, ["--inputs", a, str(truncated), "--output", str(tmp_path / "avg.pt")])
    assert status == 1 and "Traceback" not in err
    assert f"{truncated} is not a complete checkpoint" in err and "copy it again" in err


def _stopping_torch_save(monkeypatch, stop):
    """torch.save writes a few bytes, then ``stop()`` (a full disk, a signal) interrupts it."""
    import torch

    def save(obj, f, *args, **kwargs):
        if isinstance(f, str):  # given a path rather than a file
            f = open(f, "wb")
        f.write(b"partial")
        f.flush()
        stop()
    monkeypatch.setattr(torch, "save", save)


def test_a_full_disk_is_said_and_leaves_no_tmp_file(tmp_path, capsys, monkeypatch):
    import errno

    a = _fairseq_checkpoint(tmp_path / "a.pt", "posnet_transformer_tiny")
    out = tmp_path / "out" / "avg.pt"
    out.parent.mkdir()

    def full():
        raise OSError(errno.ENOSPC, "No space left on device")
    _stopping_torch_save(monkeypatch, full)
    status, err = _refusal(capsys, ["--inputs", a, a, "--output", str(out)])
    assert status == 1 and "Traceback" not in err
    assert f"no space left on {out.parent} (writing avg.pt, removed again)" in err
    assert os.listdir(out.parent) == []


@pytest.mark.parametrize("signum,status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupted_average_exits_with_the_signals_status_and_leaves_no_tmp_file(
        tmp_path, capsys, monkeypatch, ctrl_c, signum, status):
    import signal

    a = _fairseq_checkpoint(tmp_path / "a.pt", "posnet_transformer_tiny")
    out = tmp_path / "out" / "avg.pt"
    out.parent.mkdir()
    _stopping_torch_save(monkeypatch, lambda: os.kill(os.getpid(), getattr(signal, signum)))
    code, err = _refusal(capsys, ["--inputs", a, a, "--output", str(out)])
    assert (code, err) == (status, "posnet-average-checkpoints: interrupted\n")
    assert os.listdir(out.parent) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the tool's handler is gone again
