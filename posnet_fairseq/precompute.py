"""Inference-time precomputation of PosNet energies (Schmidt & Di Gangi, section 4).

aPosNet and rPosNet energies depend on positions only. After training, every
``PositionAttention`` module is replaced by its table form (:func:`table_form`): tables
of unscaled energies built from the eval-mode position vectors (no position
dropout): rPosNet
``H x N x (2K+1)`` (query position x relative slot), aPosNet ``H x N x N``;
the position parameters (W_q, W_k, the relative table r, the shared position
LayerNorm) are dropped. The checkpoint records ``posnet_precomputed = N`` so
that fairseq rebuilds the mixers in their table form, and caps
``max_source_positions`` / ``max_target_positions`` at N where a table limits
them (slicing learned position tables to match): fairseq then refuses longer
inputs up front, and a mixer asked for more raises an error naming N.

(For generation straight from a training checkpoint no step is needed:
fairseq-generate calls ``make_generation_fast_``, which folds the tables in
memory and keeps the parameters; see ``mixers/posnet.py``.)
"""
import json
import os

import numpy as np
import torch
from fairseq.modules import LearnedPositionalEmbedding

from .mixers.posnet import POSITION_NORM_KEY, PositionAttention

DEFAULT_LENGTH = 128  # positions a table covers unless told: the PosNet paper's maximum sentence length


def position_mixers(model):
    """(name, module) of every aPosNet/rPosNet/arPosNet mixer in ``model``."""
    return [(name, m) for name, m in model.named_modules() if isinstance(m, PositionAttention)]


def _count(modules):
    params = {}
    for module in modules:
        for p in module.parameters():
            params[id(p)] = p.numel()
    return sum(params.values())


def parameter_counts(model):
    """Model parameters and attention parameters (every self/cross-attention sub-layer, gates included,
    plus modules the mixers share such as the rPosNet position LayerNorm)."""
    attention = [m for name, m in model.named_modules()
                 if name.endswith((".self_attn", ".encoder_attn", ".mixer_shared"))]
    return {"model": _count([model]), "attention": _count(attention)}


def position_limits(model):
    """Which of (source, target) lengths the position tables limit."""
    source = target = False
    for name, module in position_mixers(model):
        if name.startswith("encoder."):
            source = True
        else:
            target = True
            source = source or (module.site.cross and module.absolute is not None)
    return source, target


@torch.no_grad()
def table_form(mixer, length):
    """``mixer`` as posnet-precompute stores it: a new module of the same class whose energy terms hold
    only their eval-mode tables of ``length`` positions, with this one's value and output projections,
    without W_q, W_k, r or the position inputs (``mixer`` is left as it is, sharing those projections)."""
    if mixer.precomputed:
        raise ValueError(f"{mixer.NAME} is already precomputed for {mixer.precomputed} positions")
    tables = mixer.tables(length)
    terms = [term.table_form(table) for term, table in zip(mixer.terms, tables)]
    form = type(mixer)(mixer.embed_dim, mixer.num_heads, mixer.kdim, mixer.site, terms,
                       (mixer.v_proj, mixer.out_proj), mixer.dropout)
    form.forward_context = mixer.forward_context  # (its side's, as a precomputed checkpoint's mixers are built)
    return form.to(tables[0].device).train(mixer.training)


def precompute_model_(model, length):
    """Replaces every PosNet mixer of ``model`` by its ``length``-position table form, in place; returns
    (name, table form) of each."""
    mixers = position_mixers(model)
    if not mixers:
        raise ValueError("the model has no aposnet/rposnet/arposnet mixer: nothing to precompute")
    if length < 1:
        raise ValueError(f"--max-length {length}: must be >= 1")
    for flag, limit, needed in zip(("--max-source-positions", "--max-target-positions"),
                                   model.max_positions(), position_limits(model)):
        if needed and length > limit:
            raise ValueError(f"--max-length {length} exceeds the model's {flag} {limit}")
    model.eval()
    forms = []
    for name, module in mixers:
        parent, _, attr = name.rpartition(".")
        forms.append((name, table_form(module, length)))
        setattr(model.get_submodule(parent), attr, forms[-1][1])
    # The sides' lists of the mixers swapped out (their groups and rings): the forms register anew as they step.
    contexts = {id(m.forward_context): m.forward_context for _, m in mixers if m.forward_context is not None}
    for context in contexts.values():
        context.unregister(module for _, module in mixers)
    for side in (model.encoder, model.decoder):
        shared = getattr(side, "mixer_shared", None)
        if shared is not None and POSITION_NORM_KEY in shared:
            del shared[POSITION_NORM_KEY]
    return forms


def capped_state_dict(model, model_args, length):
    """The model's state dict and ``model_args`` updated for a ``length``-position precomputed model."""
    state = model.state_dict()
    model_args.posnet_precomputed = length
    sides = (("encoder", model.encoder, "max_source_positions"), ("decoder", model.decoder, "max_target_positions"))
    for (prefix, side, attr), needed in zip(sides, position_limits(model)):
        if not needed or getattr(model_args, attr) <= length:
            continue
        setattr(model_args, attr, length)
        positions = side.embed_positions
        if isinstance(positions, LearnedPositionalEmbedding):
            key = f"{prefix}.embed_positions.weight"
            state[key] = state[key][: length + positions.padding_idx + 1].clone()
    return state


def export_npy(model, directory):
    """Writes each precomputed table as ``<module>.<table>.npy`` plus ``index.json`` describing them."""
    os.makedirs(directory, exist_ok=True)
    index = {}
    for name, module in position_mixers(model):
        for term in module.terms:
            if term.table is None:
                continue
            filename = f"{name}.{term.TABLE_NAME}.npy"
            np.save(os.path.join(directory, filename), term.table.detach().float().cpu().numpy())
            index[filename] = {
                "module": name,
                "mixer": module.NAME,
                "site": module.site.name,
                "shape": list(term.table.shape),
                "axes": list(term.AXES),
                **term.export_index(),
                "scaling": module.scaling,
                "note": "unscaled energies: multiply by scaling before the softmax",
            }
    with open(os.path.join(directory, "index.json"), "w") as f:
        json.dump(index, f, indent=2)
    return index


def load_checkpoint_model(path, data=None):
    """(state, task, model) of a fairseq checkpoint, the model in eval mode with its weights loaded."""
    from fairseq import checkpoint_utils, tasks

    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    cfg = state["cfg"]
    if data is not None:
        cfg.task.data = data
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return state, task, model.eval()


@torch.no_grad()
def output_difference(before, after, dictionary, length, batch=4, seed=0):
    """Max |logit difference| of two models on random left-padded sources / right-padded targets."""
    g = torch.Generator().manual_seed(seed)
    low, high = dictionary.nspecial, len(dictionary)
    src_lengths = torch.randint(1, length + 1, (batch,), generator=g)
    tgt_lengths = torch.randint(1, length + 1, (batch,), generator=g)
    src = torch.full((batch, int(src_lengths.max())), dictionary.pad())
    tgt = torch.full((batch, int(tgt_lengths.max())), dictionary.pad())
    for i in range(batch):
        src[i, src.size(1) - src_lengths[i]:] = torch.randint(low, high, (int(src_lengths[i]),), generator=g)
        src[i, -1] = dictionary.eos()
        tgt[i, : tgt_lengths[i]] = torch.randint(low, high, (int(tgt_lengths[i]),), generator=g)
        tgt[i, 0] = dictionary.eos()
    return float((before(src, src_lengths, tgt)[0] - after(src, src_lengths, tgt)[0]).abs().max())
