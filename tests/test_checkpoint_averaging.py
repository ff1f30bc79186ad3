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
