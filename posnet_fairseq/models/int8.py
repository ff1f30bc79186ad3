"""int8 decoding: the model's linear layers quantised dynamically (torch.ao.quantization.quantize_dynamic).

Every ``nn.Linear`` of the model (attention projections, gates, feed-forward
layers, the output projection unless it is kept in fp32) gets int8 weights
with a scale per output row (:data:`QCONFIG`); its input is quantised per
call from its observed range, the product runs in int8 and the result is fp32
again. Embeddings,
LayerNorms, the mechanisms' own tables and running sums stay fp32 (but
rPosNet's decoding ring, below), and so do
the linear layers a module names in its ``FP32_LINEARS`` (children that it
runs in fp32 from their weights: the PosNet energy terms' position
projections, which build tables once rather than per step, AAN+ WET's
pattern projection and FIRE's position MLP).
A module with an ``int8_`` method is told that its model is now int8: rPosNet
keeps its decoding ring (its last values and their tail's sum) in fp16 then
(``mixers/indexed_ring.py``), the one state stored narrower than fp32 under
int8, since reading it is the largest of its own costs per step; the int8
model already differs from fp32, and docs/constant-cost-decoding.md gives
what the narrower ring costs in BLEU.

The int8 products run in the library of :func:`engine` (``--int8-engine``): torch's default on x86
(``x86``) packs dynamic int8 linear layers for FBGEMM, whose kernels use AVX512-VNNI at best; oneDNN runs the
same quantisation (the same int8 activations, weights and scales, so the same integer sums; the fp32 result
rescaled in another order, up to float rounding) through the CPU's AMX tiles where it has them. ``auto`` takes
oneDNN on such a CPU and torch's default elsewhere. Each int8 layer is packed for its engine when it is made
(:func:`packed_for`) and keeps it (:func:`keep_engine`): the weights loaded into it later are packed for that
engine again, whatever torch's global setting is then; the stored int8 weights are the same for every engine.

``posnet-quantize`` (:mod:`posnet_fairseq.cli.quantize`) writes such a model:
the int8 weights in the state dict and ``--int8-linear all`` (or
``fp32-output``) in the model's arguments, so that fairseq's own tools
(fairseq-generate / -interactive with ``--user-dir``) rebuild it: the model
builds as usual, :func:`quantize_` makes its linear layers int8, and then
fairseq loads the stored int8 weights into them.

fairseq's MultiheadAttention has a fast path, taken when it is not decoding
step by step (the encoder, teacher forcing), that hands ``q_proj.weight``
and friends to ``F.multi_head_attention_forward``; on a quantised Linear
``weight`` is a method, not a tensor. fairseq's own switch
``_set_skip_embed_dim_check`` (made for pruned heads) sends it through its
module path instead, which calls the projections as modules: it is set on
every MultiheadAttention whose projections are quantised.
"""
import argparse
import contextlib

import torch
from fairseq.modules import MultiheadAttention
from torch import nn
from torch.ao.nn.quantized import dynamic

from .. import flags

MODES = ("off", "all", "fp32-output")

# A scale per output row, not one per matrix (as CTranslate2 quantises its weights): a row of small weights keeps
# steps of its own size (the output projection's rows, the shared embedding, have largest weights from 0.11 to
# 0.73 in the tiny HC-SA model). It cuts the error int8 adds to the next-token distribution by 11-16% (mean KL to
# fp32) at no speed cost that shows (docs/cpu/2026-11-28/int8-bleu-2.md). The stored int8 weights carry their
# scheme: a checkpoint quantised per matrix before this still loads and decodes per matrix.
QCONFIG = torch.ao.quantization.per_channel_dynamic_qconfig

# Written by posnet-quantize into the checkpoint it makes; read when fairseq rebuilds the model.
FLAG = flags.Flag("--int8-linear", "off", "int8 dynamic quantisation of the linear layers: all, or all but the "
                  "output projection (fp32-output)", choices=MODES, internal=True)


ENGINES = ("auto", "fbgemm", "onednn")

# A generation-time choice (:func:`engine_overrides`): a property of the machine that decodes, not of the model,
# so a checkpoint keeps its default, auto, resolved where it is loaded.
ENGINE_FLAG = flags.Flag("--int8-engine", "auto", "the library of an int8 model's products on the CPU: onednn "
                         "(AMX tiles), fbgemm (torch's default on x86), or auto: onednn where the CPU has AMX, "
                         "else torch's default", choices=ENGINES)


def engine(choice):
    """torch's quantized engine for ``choice`` (one of :data:`ENGINES`), or ValueError naming the flag; auto:
    oneDNN on a CPU with AMX tiles (on one such CPU, a Xeon with AMX-INT8, it decoded issue 48's 30-token
    benchmark faster than FBGEMM: docs/benchmarks.md), torch's default elsewhere."""
    choice = ENGINE_FLAG.convert(choice)
    supported = torch.backends.quantized.supported_engines
    if choice == "auto":
        amx = getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
        return "onednn" if amx and "onednn" in supported else torch.backends.quantized.engine
    if choice not in supported:
        raise ValueError(f"--int8-engine {choice}: this torch build has no {choice} engine "
                         f"(it has {', '.join(e for e in supported if e != 'none')})")
    return choice


def engine_overrides(choice):
    """fairseq-generate's arguments that decode an int8 checkpoint with ``--int8-engine choice``
    (``["--model-overrides", "{'int8_engine': 'fbgemm'}"]``): the choice checked against the flag here, whether
    torch has its engine where the model is loaded (:func:`engine`)."""
    return ["--model-overrides", repr({ENGINE_FLAG.dest: ENGINE_FLAG.convert(choice)})]


@contextlib.contextmanager
def packed_for(name):
    """int8 weights packed inside (layers made, their weights set) are packed for torch's quantized engine
    ``name``."""
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


def keep_engine(layer, name):
    """Has ``layer`` (a dynamic int8 Linear, packed for torch's quantized engine ``name``) pack the weights loaded
    into it for ``name`` too: torch packs them for its global engine as they load (``LinearPackedParams``), and
    that may be another engine by then (fairseq loads a checkpoint's weights into the model it has just built,
    in whatever setting its caller left)."""
    layer.quantized_engine = name
    layer.register_load_state_dict_post_hook(_repack)


def _repack(layer, incompatible_keys):
    """keep_engine's hook: ``layer``'s weights, just packed for torch's global engine, packed for its own."""
    weight, bias = layer._weight_bias()
    with packed_for(layer.quantized_engine):
        layer.set_weight_bias(weight, bias)


def quantize_(model, mode, engine_choice="auto"):
    """Makes ``model``'s linear layers int8 in place (``mode`` all / fp32-output; off: nothing), packed for the
    quantized engine of ``engine_choice`` (:func:`engine`), which each layer keeps for the weights loaded into it
    later (:func:`keep_engine`); returns it."""
    if mode == "off":
        return model
    if mode not in MODES:
        raise ValueError(f"--int8-linear {mode}: choose from {', '.join(MODES)}")
    keep = {"decoder.output_projection"} if mode == "fp32-output" else set()
    for name, module in model.named_modules():
        keep.update(f"{name}.{child}".lstrip(".") for child in getattr(module, "FP32_LINEARS", ()))
    linears = {name for name, m in model.named_modules() if type(m) is nn.Linear
               and not any(name == k or name.startswith(k + ".") for k in keep)}
    engine_name = engine(engine_choice)
    with packed_for(engine_name):
        torch.ao.quantization.quantize_dynamic(model, dict.fromkeys(linears, QCONFIG), dtype=torch.qint8,
                                               inplace=True)
    for module in model.modules():
        if isinstance(module, dynamic.Linear):
            keep_engine(module, engine_name)
        if isinstance(module, MultiheadAttention) and not isinstance(module.q_proj, nn.Linear):
            module._set_skip_embed_dim_check()
        if hasattr(module, "int8_"):  # a mechanism's own int8 decoding (rPosNet's ring in fp16: mixers/posnet.py)
            module.int8_()
    return model


def drop_tied_output(model, state_dict):
    """Removes the ``decoder.output_projection.weight`` fairseq's upgrade adds when the output projection of
    ``model`` is quantised (it holds packed weights of its own)."""
    if not isinstance(model.decoder.output_projection, nn.Linear):
        state_dict.pop("decoder.output_projection.weight", None)
    return state_dict


def quantized_checkpoint(state, model, mode):
    """``state`` (a fairseq checkpoint's contents, ``model`` its fp32 model loaded) made int8: ``model``
    quantised in place, its state dict and ``--int8-linear mode`` stored in ``state["cfg"]["model"]`` (an
    argparse Namespace, as fairseq-train stores legacy models, or a dict)."""
    if mode == "off":
        raise ValueError("--int8-linear off: nothing to quantise (give all or fp32-output)")
    args = state["cfg"]["model"]
    stored = FLAG.read(argparse.Namespace(**args) if isinstance(args, dict) else args)
    if stored != "off":
        raise ValueError(f"the checkpoint is already quantised (--int8-linear {stored})")
    model.eval()  # (fairseq's make_generation_fast_ makes eval() return None)
    quantize_(model, mode)
    if isinstance(args, dict):
        args[FLAG.dest] = mode
    else:
        setattr(args, FLAG.dest, mode)
    return {**state, "model": model.state_dict(), "last_optimizer_state": None}
