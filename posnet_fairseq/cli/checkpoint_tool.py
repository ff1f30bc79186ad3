"""What the commands that rewrite a trained checkpoint share (``posnet-precompute``, ``posnet-quantize``).

:func:`parse_args` refuses an OUTPUT that is the CHECKPOINT unless
``--in-place`` (:mod:`posnet_fairseq.cli.in_place`); :func:`load_trained`
refuses, in one line naming the file, a path that is not a checkpoint
fairseq-train wrote, before fairseq's loader (which says neither), and returns
(state, task, model); :func:`save` writes the new checkpoint whole or not at
all, its ``cfg`` as the plain containers fairseq's trainer stores (which the
safe loader accepts), and says a full disk in one line.
"""
import sys

from . import in_place


def parser(doc, output_help):
    """The arguments every checkpoint tool takes (CHECKPOINT, OUTPUT, --data, --in-place), described by its
    module's docstring ``doc`` (first line: "``posnet-x ...``: what it does")."""
    import argparse

    p = argparse.ArgumentParser(description=doc.splitlines()[0].split(": ", 1)[1])
    p.add_argument("checkpoint", help="a posnet_transformer checkpoint from fairseq-train")
    p.add_argument("output", help=output_help)
    p.add_argument("--data", metavar="DIR",
                   help="data-bin directory with the dictionaries (default: the one stored in the checkpoint)")
    in_place.add_flag(p)
    return p


def parse_args(p, argv):
    """The arguments of ``p``; exits when OUTPUT is CHECKPOINT without --in-place."""
    args = p.parse_args(argv)
    in_place.refuse_overwrite(p, [args.checkpoint], [args.output], args.in_place)
    return args


def load_trained(tool, checkpoint, data=None):
    """(state, task, model in eval mode) of ``checkpoint``, or exit naming it."""
    from .. import precompute
    from ..checkpoint_files import CheckpointFileError, load, model_of

    try:
        if model_of(load(checkpoint)) is None:
            raise CheckpointFileError(f"{checkpoint} stores no model configuration (cfg.model): give a "
                                      "checkpoint that fairseq-train wrote, e.g. checkpoint_best.pt")
    except CheckpointFileError as err:
        sys.exit(f"{tool}: {err}")
    return precompute.load_checkpoint_model(checkpoint, data)


def save(tool, state, output):
    """Writes ``state`` to ``output`` atomically, ``cfg`` as plain containers; exits naming a full disk."""
    import torch
    from omegaconf import OmegaConf

    from ..atomic_files import written_atomically

    state["cfg"] = OmegaConf.to_container(state["cfg"], resolve=True, enum_to_str=True)
    try:
        with written_atomically(output) as f:
            torch.save(state, f)
    except OSError as err:  # a full disk: atomic_files.NoSpaceLeft names the directory
        sys.exit(f"{tool}: {err}")
