"""PosNet's teacher-forced training energies of every layer of a side at once (issue 48).

The PosNet layers of a side (encoder or decoder) compute their energies (Eq. 8-10) from the same position
vectors: each layer draws its own dropout of them and has its own projections (and, rPosNet, relative
table). Each of those per-layer operators is a kernel launch on a GPU, and a base model's training step is
bound by launches. So in a training call the first layer of a group (``PositionAttention.side_layers``: the
layers of one mixer at one site with the same settings) makes the energies of every layer of the group,
each term as

* one dropout of every layer's vectors (layers x n x D: each layer its own draw);
* per projection, one stack of the layers' weights and one batched product (layers x n x D);
* one product of every layer's and head's queries with its keys (:func:`heads_product`);

then reads them out of the tables, sums the terms and, for fused attention, casts and masks them once
(``fused_attention.MaskedBias``); each layer takes its slice (``unbind``, whose gradient is one stack of
the layers'). It is the function of each layer's own computation (``PositionAttention.energies``); the
position dropout draws differently.
"""
import torch
from torch import Tensor

from .attention import autocast_off, invalid_keys, real_positions, softmax_masks
from .fused_attention import MaskedBias


def heads_product(queries: Tensor, keys: Tensor, heads: int, scale: float) -> Tensor:
    """(L H) x n x m energies ``scale`` <q_n, k_m>_h of every layer and head, from L x n x D queries and
    L x m x D keys, in one batched product over the layers' heads: the queries and the keys each copied once
    into that (L H)-major layout. (A block-diagonal product of each layer's keys with all its queries spares
    the copies but runs H times the FLOPs and builds its blocks with two operators of its own: more host time
    forward and backward, issue 48.)"""
    layers, n, dim = queries.shape
    width = dim // heads
    q = queries.view(layers, n, heads, width).transpose(1, 2).reshape(layers * heads, n, width)
    k = keys.view(layers, -1, heads, width).permute(0, 2, 3, 1).reshape(layers * heads, width, -1)
    return torch.baddbmm(q.new_empty(()), q, k, beta=0, alpha=scale)


def stacked_projection(projections, vectors: Tensor) -> Tensor:
    """Each layer's Linear ``projections`` of its vectors (L x n x D): L x n x D, one batched product."""
    weight = torch.stack([proj.weight for proj in projections]).float()
    bias = torch.stack([proj.bias for proj in projections]).float()
    return torch.baddbmm(bias.unsqueeze(1), vectors, weight.transpose(1, 2))


def stacked_table(terms, lo: int, hi: int, keys: int, scale: float) -> Tensor:
    """The training energies of query positions lo..hi-1 (and ``keys`` key positions) of ``terms``, one term of
    one kind and settings per layer, times ``scale``: (L H) x n x width, layer-major (a table of L H heads)."""
    first = terms[0]
    with autocast_off(first.projections()[0].weight):
        vectors = first.vectors(lo, hi, keys, True, len(terms))
        projected = [stacked_projection([term.projections()[i] for term in terms], vectors[:, a:b])
                     for i, (a, b) in enumerate(first.rows(lo, hi, keys))]
        return heads_product(projected[0], first.stacked_keys(terms, projected), first.num_heads, scale)


def layer_energies(mixer, positions: Tensor, bound: int, pad, masks, dtype=None) -> Tensor:
    """The teacher-forced self-attention energies of ``mixer``'s layer (B or 1 x H x T x T), or with ``dtype``
    fused attention's additive mask of them in that dtype (``masks``: the call's softmax masks), sliced from
    those of every layer of its group, made by the first layer of the call."""
    layers, length = mixer.side_layers, positions.size(1)

    def every_layer():
        tables = [stacked_table([layer.terms[i] for layer in layers], 0, bound, bound, mixer.scaling)
                  for i in range(len(mixer.terms))]
        energy = mixer.energies(positions, positions, 0, bound, bound, shared=True, pad=pad, plain=pad is None,
                                tables=tables)  # B or 1 x (L H) x T x T
        return energy.view(energy.size(0), len(layers), mixer.num_heads, length, length)

    group = ("posnet_layer_energies", mixer.side_group, length)
    energies = mixer.shared(group, every_layer, pad)
    if dtype is None:  # the hidden keys at -inf once for every layer (B x 1 x 1 x T x T masks), as MaskedBias does
        return mixer.shared((*group, None), lambda: (energies if masks[0] is None else energies.masked_fill(
            masks[0].unsqueeze(1), float("-inf"))).unbind(1), pad)[mixer.layer]
    # (the mask has the batch of the energies and the masks broadcast: a causal side's masks are B-sized)
    return mixer.shared((*group, dtype), lambda: MaskedBias.apply(energies.flatten(1, 2), masks[0], dtype).unflatten(
        1, energies.shape[1:3]).unbind(1), pad)[mixer.layer]


def teacher_forced_self(mixer, pad, batch: int, length: int, device, dtype=None):
    """Energies (with ``dtype``: fused attention's mask of them in that dtype) and softmax masks of a
    teacher-forced self-attention call of ``mixer``: positions, index grids and masks made once per call for
    every layer (Mixer.shared), in training the energies too, already masked (:func:`layer_energies`: the
    masks returned then hide nothing more). The positions are bounded by the length, not by their largest
    (the batch's longest sentence has no pad: the same bound), which is never read from the device: a read
    would stall a GPU's queue once per side and step."""
    positions = mixer.shared(("positions", length), lambda: real_positions(pad, batch, length, device), pad)
    masks = mixer.shared(("posnet_softmax_masks", length, mixer.causal), lambda: softmax_masks(
        invalid_keys(pad, mixer.causal, None, batch, length, length, device), pad is not None), pad)
    if mixer.training and len(mixer.side_layers) > 1 and mixer.forward_context.in_call:
        return layer_energies(mixer, positions, length, pad, masks, dtype), (None, masks[1])
    energy = mixer.energies(positions, positions, 0, length, length, shared=True, pad=pad, plain=pad is None)
    return energy if dtype is None else MaskedBias.apply(energy, masks[0], dtype), masks
