"""Averaging the parameters of several fairseq checkpoints, and which checkpoints (``posnet-average-checkpoints``).

Takes explicit files, or a directory plus one selection rule:

* ``--num-update-checkpoints N`` / ``--num-epoch-checkpoints N``: the last N
  update (``checkpoint_E_U.pt``) or epoch (``checkpointE.pt``) checkpoints,
  optionally at or below ``--checkpoint-upper-bound`` (the AAN+ paper: the
  last five, 5000 updates apart);
* ``--best-and-following N``: the best checkpoint and the N-1 update
  checkpoints saved after it; when fewer than N-1 follow it, the last N
  update checkpoints (the PosNet paper, section 5.3: "an average over the
  best checkpoint and its following if there are enough checkpoints to
  average, or else ... over the last checkpoints"). When the ones after the
  best were deleted (``--keep-interval-updates`` kept a later window), the N
  best copies that fairseq's ``--keep-best-checkpoints N`` kept. The best is
  ``checkpoint_best.pt``, i.e. fairseq's ``--best-checkpoint-metric`` (the
  PosNet recipes set ``nll_loss``: perplexity is 2^nll_loss, so the same
  order);
* ``--num-best-checkpoints N``: the N with the lowest validation metric
  recorded in each checkpoint.

The inputs must hold one model: the same architecture and model settings
(:func:`posnet_fairseq.checkpoint_files.differences`: the same parameter
names are not enough) and the same shapes (other shapes of the embeddings:
other dictionaries). The output keeps the first input's config, so it loads
wherever that checkpoint loads; it is written whole or not at all
(:mod:`posnet_fairseq.atomic_files`). Loading uses torch's safe loader with
fairseq's classes allow-listed (posnet_fairseq.compat).
"""
import collections
import os
import re

import torch

from .checkpoint_files import differences, load, model_of
from .atomic_files import written_atomically

# fairseq's checkpoint names (fairseq.checkpoint_utils.save_checkpoint): one parser for every rule.
_NAMES = {"update": re.compile(r"checkpoint_\d+_(\d+)\.pt"), "epoch": re.compile(r"checkpoint(\d+)\.pt")}
# --keep-best-checkpoints' copies: the metric's value to 3 decimals, then a random digit against ties.
_BEST_COPY = re.compile(r"checkpoint\.best_\w+?_(-?\d+\.\d{3})\d*\.pt")


def checkpoint_files(directory, kind):
    """[(number, path)] of the ``kind`` ("update": checkpoint_E_U.pt by U, "epoch": checkpointE.pt by E)
    checkpoints in ``directory``, sorted by number."""
    found = []
    for name in os.listdir(directory):
        m = _NAMES[kind].fullmatch(name)
        if m:
            found.append((int(m.group(1)), os.path.join(directory, name)))
    return sorted(found)


def _load(path):
    return load(path)


def _num_updates(state):
    return int(state["optimizer_history"][-1]["num_updates"])


def best_and_following(directory, count, best_update=None):
    """Paths of checkpoint_best.pt's weights and the ``count`` - 1 update checkpoints after it, or the
    last ``count`` update checkpoints when fewer follow it (PosNet paper, section 5.3).

    ``best_update`` (the update checkpoint_best.pt was saved at) is read from that file when not given.
    Raises ValueError when the rule cannot be applied: too few checkpoints, or the checkpoints right
    after the best were deleted (``--keep-interval-updates`` kept too few)."""
    updates = checkpoint_files(directory, "update")
    if len(updates) < count:
        raise ValueError(f"--best-and-following {count}: only {len(updates)} update checkpoints in {directory}")
    best_path = os.path.join(directory, "checkpoint_best.pt")
    if best_update is None:
        if not os.path.exists(best_path):
            raise ValueError(f"--best-and-following: no checkpoint_best.pt in {directory}")
        best_update = _num_updates(_load(best_path))
    following = [(u, p) for u, p in updates if u > best_update]
    if len(following) < count - 1:
        return [p for _, p in updates[-count:]]
    numbers = [u for u, _ in updates]
    interval = min(b - a for a, b in zip(numbers, numbers[1:])) if len(numbers) > 1 else None
    if interval is not None and following[0][0] - best_update > interval:
        # The checkpoints after the best were deleted (--keep-interval-updates): the copies of the best ones
        # that fairseq's --keep-best-checkpoints kept, the recipes' window around the best.
        kept = best_copies(directory)
        if len(kept) >= count:
            return kept[:count]
        raise ValueError(
            f"--best-and-following {count}: the best checkpoint (update {best_update}) is older than the update "
            f"checkpoints kept in {directory} (the first is update {following[0][0]}, {interval} apart), and "
            f"only {len(kept)} checkpoint.best_*.pt copies are there: train with --keep-best-checkpoints {count} "
            "or a larger --keep-interval-updates, or average chosen files with --inputs")
    same = [p for u, p in updates if u == best_update]
    return (same or [best_path]) + [p for _, p in following[:count - 1]]


def best_copies(directory):
    """The copies fairseq's ``--keep-best-checkpoints`` keeps (checkpoint.best_<metric>_<value>.pt), lowest value
    first (the recipes' metric is a loss)."""
    found = []
    for name in os.listdir(directory):
        m = _BEST_COPY.fullmatch(name)
        if m:
            found.append((float(m.group(1)), os.path.join(directory, name)))
    return [p for _, p in sorted(found)]


def select_checkpoints(directory, num_update=None, num_epoch=None, num_best=None, upper_bound=None,
                       best_and_following_count=None):
    """Paths chosen by one rule; raises ValueError naming the flag when there are too few."""
    if best_and_following_count:
        return best_and_following(directory, best_and_following_count)
    if num_update or num_epoch:
        flag, count = ("--num-update-checkpoints", num_update) if num_update else ("--num-epoch-checkpoints", num_epoch)
        found = checkpoint_files(directory, "update" if num_update else "epoch")
        if upper_bound is not None:
            found = [(n, p) for n, p in found if n <= upper_bound]
        if len(found) < count:
            raise ValueError(f"{flag} {count}: only {len(found)} matching checkpoints in {directory}")
        return [p for _, p in found[-count:]]
    scored = []
    for _, path in checkpoint_files(directory, "epoch") + checkpoint_files(directory, "update"):
        loss = _load(path).get("extra_state", {}).get("val_loss")
        if loss is not None:
            scored.append((loss, path))
    scored.sort()
    if len(scored) < num_best:
        raise ValueError(f"--num-best-checkpoints {num_best}: only {len(scored)} checkpoints with a validation "
                         f"loss in {directory}")
    return [p for _, p in scored[:num_best]]


def average_checkpoints(paths):
    """The first checkpoint's state with each model tensor replaced by the mean over ``paths``.

    Tensors that share storage in the first checkpoint (tied embeddings) share the averaged tensor too,
    so the output is as large as an input and loads with the same ties."""
    sums, first = collections.OrderedDict(), None
    for path in paths:
        state = _load(path)
        if first is None:
            first = state
        _check_same_model(path, state, paths[0], first)
        for key, tensor in state["model"].items():
            value = tensor.double() if tensor.is_floating_point() else tensor
            sums[key] = sums[key] + value if key in sums and tensor.is_floating_point() else value
    averaged = {}
    for key, tensor in first["model"].items():
        if tensor.is_floating_point():
            tied = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
            if tied not in averaged:
                averaged[tied] = (sums[key] / len(paths)).to(tensor.dtype)
            first["model"][key] = averaged[tied]
    first["optimizer_history"] = first.get("optimizer_history", [])[-1:]
    first["last_optimizer_state"] = None
    return first


def _check_same_model(path, state, first_path, first):
    """Raises ValueError naming both paths unless ``state`` holds the model ``first`` holds."""
    models = model_of(state), model_of(first)
    differing = differences(*models) if None not in models else []
    if differing:
        raise ValueError(f"{path} and {first_path} are checkpoints of other models ({', '.join(differing)}): "
                         "average checkpoints of one training")
    params, first_params = state["model"], first["model"]
    if set(params) != set(first_params):
        raise ValueError(f"{path} has different parameters than {first_path}: not the same model")
    for key, tensor in params.items():
        if tensor.shape != first_params[key].shape:
            shapes = " vs ".join("x".join(map(str, t.shape)) for t in (tensor, first_params[key]))
            why = ("other dictionaries (trained on other data-bins)" if key.endswith(("embed_tokens.weight",
                   "output_projection.weight")) else "not the same model")
            raise ValueError(f"{path} and {first_path} have other shapes of {key} ({shapes}): {why}; average "
                             "checkpoints of one training")


def write_average(paths, output):
    """Averages ``paths`` into ``output``, written atomically (never a half-written checkpoint)."""
    average = average_checkpoints(paths)
    with written_atomically(output) as f:
        torch.save(average, f)
