"""Arithmetic per generated token and per training token, counted from the shapes of every product.

The ceiling of a mechanism is what its arithmetic allows: if a model does
``F_model`` FLOPs per token where the Transformer does ``F_transformer``, it
cannot be faster than ``F_transformer / F_model`` times the Transformer unless
the Transformer wastes time elsewhere. The benchmarks print that ratio beside
each measured speed ratio, and the measured share of it.

What is counted. torch's ``FlopCounterMode`` sees every operator the built
model runs and counts, from its operand shapes, 2 FLOPs per multiply-add of
each matrix product (``mm``, ``addmm``, ``bmm``, ``baddbmm``, convolutions,
scaled-dot-product attention, here also torch's CPU kernel of it and the
decoding rings' weighted ``embedding_bag``; ``einsum`` and ``matmul`` run as these).
Element-wise work (activations, LayerNorms, softmax, the gates' products,
AAN+'s running sums and cumulative sums, SSRU's recurrence) is left out: it is
O(d) per token against the O(d^2) of every projection, and every mechanism
has about the same amount of it. Because the count follows what the model runs, the
operator shapes are those of the built modules (heads, dimensions, the
clipping distance K, HC-SA's window, AAN+'s patterns); the hand counts in
``tests/test_flops.py`` check that for ``mha``, ``rposnet`` and ``aan`` it
equals the mechanism's arithmetic, with nothing computed twice.

* :func:`decoding_flops`: FLOPs per generated token of beam search at a forced
  output length, as ``fairseq-generate`` runs it (``make_generation_fast_``
  first, so rPosNet/aPosNet energies are folded): the encoder once per
  sentence, then ``beam`` rows through the decoder for every step (the output
  projection included), divided by the output tokens of the sentence (EOS
  included, as the decoding benchmark divides).
* :func:`count`: FLOPs of any callable, e.g. one training step
  (:mod:`.training_step` counts its first, untimed step).
"""
import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode


def _cpu_attention(query, key, value, *args, out_shape=None, **kwargs):
    return flop_counter.sdpa_flop_count(query, key, value)


def _cpu_attention_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs):
    return flop_counter.sdpa_backward_flop_count(grad_out, query, key, value)


def _weighted_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, *args, out_shape=None, **kwargs):
    """A weighted ``embedding_bag`` (rPosNet's and HC-SA's decoding rings, ``mixers/indexed_ring.py``): a
    multiply-add (2 FLOPs) per element of every row read, as a matrix product of the weights and the rows
    (shapes given); an unweighted bag (a sum or mean of embeddings) does no products."""
    return 2 * indices[0] * weight[1] if per_sample_weights is not None else 0


# torch's counter knows the CUDA kernels of scaled-dot-product attention but not
# the CPU one, which fairseq's MultiheadAttention runs whenever it is not
# decoding incrementally (training, the encoder): without these, the
# Transformer's attention scores and weighted sums would go uncounted. Nor does
# it know embedding_bag, which the decoding rings read their values with.
_FORMULAS = {
    getattr(torch.ops.aten, name): formula
    for name, formula in (("_scaled_dot_product_flash_attention_for_cpu", _cpu_attention),
                          ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_attention_backward),
                          ("_embedding_bag_forward_only", _weighted_bag), ("_embedding_bag", _weighted_bag))
    if hasattr(torch.ops.aten, name)
}


def counter():
    """A FlopCounterMode that also counts CPU scaled-dot-product attention and weighted ``embedding_bag``."""
    return FlopCounterMode(display=False, custom_mapping=_FORMULAS)


def count(fn, *args, **kwargs):
    """(FLOPs of ``fn(*args, **kwargs)``, its result)."""
    counting = counter()
    with counting:
        result = fn(*args, **kwargs)
    return counting.get_total_flops(), result


def decoding_flops(model, source_length, output_lengths, beam, bos=2, token=4):
    """{L: FLOPs per generated token} for each output length L in ``output_lengths`` (EOS included): one
    sentence of ``source_length`` tokens (EOS included) decoded with ``beam`` rows for L steps.

    ``model`` is made ready for generation as fairseq-generate does (eval mode,
    ``make_generation_fast_``). Beam search itself (top-k, reordering the
    state) does no products, so the decoder is fed a fixed token; the
    arithmetic of a step does not depend on which token it is, nor on how many
    steps follow it, so one run to the longest length gives every shorter one.
    """
    lengths = sorted(set(output_lengths))
    model.eval()
    model.make_generation_fast_(beamable_mm_beam_size=None, need_attn=False)
    src = torch.full((1, source_length), token, dtype=torch.long)
    src[0, -1] = bos
    prev = torch.full((beam, lengths[-1]), token, dtype=torch.long)
    prev[:, 0] = bos
    counting, totals = counter(), {}
    with torch.no_grad(), counting:
        encoder_out = model.encoder(src, torch.tensor([source_length]))
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, torch.zeros(beam, dtype=torch.long))
        state = {}
        for t in range(lengths[-1]):
            model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
            if t + 1 in lengths:
                totals[t + 1] = counting.get_total_flops()
    return {length: totals[length] / length for length in lengths}


def ceiling(flops, reference_flops):
    """The speed ratio the arithmetic allows against the reference: its FLOPs over the model's."""
    return reference_flops / flops
