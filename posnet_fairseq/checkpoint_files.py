"""Reading a fairseq checkpoint file, and which model it holds.

:func:`load` reads a checkpoint with torch's safe loader (``weights_only=True``, fairseq's classes
allow-listed by :mod:`posnet_fairseq.compat`) and turns whatever keeps it from being one (a missing file, a
directory, a truncated copy, some other file) into :class:`CheckpointFileError`: one sentence naming the path
and the fix, instead of ``IndexError: pop from empty list`` or ``OSError: [Errno 22] Invalid argument``.

:func:`model_of` gives the architecture and model settings a checkpoint stores, and :func:`differences` the
settings on which two checkpoints' models differ: two checkpoints whose parameters have the same names can
still be different models (``rope_transformer_tiny`` has exactly the parameters of
``posnet_transformer_tiny``), so averaging and resuming compare these, not only the parameters.
"""
import argparse
import os
import pickle
import shutil
from typing import Collection, Dict, List, Optional, Tuple

import torch

# Settings that change training only (regularisation), not the function a model computes: checkpoints that
# differ in them alone are the same model.
_TRAINING_ONLY = ("dropout", "layerdrop")
# torch.load's mmap reads only the zip format (torch >= 1.6); an older file is read whole.
_NOT_ZIP = "mmap can only be used with files saved with"


class CheckpointFileError(ValueError):
    """A path that is no readable fairseq checkpoint; the message names it and the fix."""


def load(path: str, mmap: bool = False) -> dict:
    """The state stored in the fairseq checkpoint ``path`` (with ``mmap``, tensors are not read yet)."""
    if os.path.isdir(path):
        raise CheckpointFileError(f"{path} is a directory, not a checkpoint file: name a file in it, e.g. "
                                  f"{os.path.join(path, 'checkpoint_best.pt')}")
    if not os.path.exists(path):
        raise CheckpointFileError(f"{path}: no such checkpoint file")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except RuntimeError as err:
        if not (mmap and _NOT_ZIP in str(err)):
            raise _not_a_checkpoint(path, err) from err
        return load(path)
    except pickle.UnpicklingError as err:
        refused = next((line.strip() for line in str(err).splitlines() if "Unsupported global" in line), None)
        if refused is None:
            raise _not_a_checkpoint(path, err) from err
        raise CheckpointFileError(
            f"{path}: torch's safe loader refuses what it stores ({refused}); it is not a checkpoint of fairseq-train "
            "with this plugin. Do not load it with weights_only=False unless you trust its origin: that runs any "
            "code stored in it") from err
    except Exception as err:  # noqa: BLE001  (torch says a truncated file in many ways: EOFError, OSError 22, ...)
        raise _not_a_checkpoint(path, err) from err
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointFileError(f"{path} holds no fairseq checkpoint (no 'model' entry): give a checkpoint that "
                                  "fairseq-train wrote, e.g. checkpoint_best.pt")
    return state


def _not_a_checkpoint(path, err):
    why = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else 'no detail'}"
    return CheckpointFileError(
        f"{path} is not a complete checkpoint ({why}): the file is truncated (a copy, or a training stopped "
        "while writing it) or not a checkpoint at all; copy it again, or use another checkpoint of the run, "
        "e.g. checkpoint_best.pt or checkpoint_last.pt")


def restore_interrupted_copy(path: str) -> Optional[str]:
    """Restores a truncated ``path`` (a checkpoint_last.pt) from the newest intact training checkpoint beside
    it; returns that checkpoint's path, or None when there is none (``path`` is left as it is).

    fairseq writes a checkpoint once, atomically, then copies it to the other names of the save
    (checkpoint_last.pt among them). That copy is atomic under the plugin (compat.make_checkpoint_copies_atomic);
    a run of fairseq without it, or of an earlier version of the plugin, killed during the copy (a preempted or
    cancelled job) left checkpoint_last.pt truncated, beside the intact file it was copying, which is the newest.
    Only files holding a training state (the data iterator's position) qualify.
    """
    from .atomic_files import written_atomically

    directory = os.path.dirname(path) or "."
    candidates = [os.path.join(directory, name) for name in os.listdir(directory)
                  if name.startswith("checkpoint") and name.endswith(".pt") and name != os.path.basename(path)]
    for candidate in sorted(candidates, key=os.path.getmtime, reverse=True):
        try:
            state = load(candidate, mmap=True)
        except CheckpointFileError:
            continue
        if (state.get("extra_state") or {}).get("train_iterator") is None:
            continue  # an averaged or exported model: nothing to resume training from
        with open(candidate, "rb") as source, written_atomically(path) as target:
            shutil.copyfileobj(source, target)
        return candidate
    return None


def model_of(state: dict) -> Optional[Tuple[str, Dict[str, object]]]:
    """(architecture, {setting: value}) of the model a checkpoint's state stores (``cfg.model``, or the
    legacy ``args``), or None when it stores neither."""
    cfg = state.get("cfg")
    model = cfg.get("model") if isinstance(cfg, dict) else None
    if model is None:
        model = state.get("args")
    if model is None:
        return None
    values = dict(vars(model)) if isinstance(model, argparse.Namespace) else dict(model)
    return str(values.get("arch") or values.get("_name")), values


def _model_flags(arch: str) -> Optional[Dict[str, str]]:
    """{setting: its flag} of the model ``arch`` builds, or None when fairseq does not know ``arch``."""
    from . import presets

    try:
        return presets.option_names(arch)
    except ValueError:
        return None


def stored_model(path: str) -> Optional[Tuple[str, Dict[str, object]]]:
    """:func:`model_of` the checkpoint ``path``, read without its tensors."""
    return model_of(load(path, mmap=True))


def differences(mine: Tuple[str, Dict[str, object]], other: Tuple[str, Dict[str, object]],
                only: Optional[Collection[str]] = None) -> List[str]:
    """``--flag a vs b`` for the architecture and every model setting (those named in ``only``) on which two
    models (as :func:`model_of` gives them) differ; [] for the same model."""
    (arch, values), (other_arch, other_values) = mine, other
    if arch != other_arch:
        return [f"--arch {arch} vs {other_arch}"]
    flags = _model_flags(arch) or {}
    found = []
    for key, flag in sorted(flags.items(), key=lambda item: item[1]):
        if only is not None and key not in only:
            continue
        # None: unset, filled in when the model is built (--length-ratio from the data)
        if key.endswith(_TRAINING_ONLY) or values.get(key) is None or other_values.get(key) is None:
            continue
        if values[key] != other_values[key]:
            found.append(f"{flag} {values[key]} vs {other_values[key]}")
    return found
