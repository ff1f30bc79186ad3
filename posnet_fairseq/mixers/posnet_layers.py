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

then reads them out of the tables and sums the terms. For fused attention (CUDA) it casts and masks them
once (``fused_attention.MaskedBias``); on the explicit path (the CPU's) it takes one masked softmax and one
dropout of every layer's weights (Eq. 2-3). Each layer takes its slice (``unbind``, whose gradient is one
stack of the layers') in one lookup (:func:`layer_attention`). It is the function of each layer's own
computation (``PositionAttention.energies``, then its softmax and dropout); the dropouts draw differently.
"""
import torch
import torch.nn.functional as F
from torch import Tensor

from .attention import autocast_off, invalid_keys, masked_softmax, real_positions, softmax_masks
from .fused_attention import MaskedBias, position_only_attention


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


def grouped(mixer) -> bool:
    """Whether ``mixer``'s teacher-forced self-attention call takes its share of its group's work
    (:func:`layer_attention`): in training, within a side's call, with other layers in its group."""
    return mixer.training and len(mixer.side_layers) > 1 and mixer.forward_context.in_call


def every_layer(mixer, pad, batch: int, length: int, device, dtype):
    """Each layer's item of :func:`layer_attention`, made for every layer of ``mixer``'s group at once from
    their energies (B or 1 x (L H) x T x T), masked once for all layers: with ``dtype``, fused attention's
    mask in that dtype (``MaskedBias``) with the call's empty rows; else the attention weights after one
    masked softmax and one dropout (B x H x T x T each)."""
    layers = mixer.side_layers
    positions = real_positions(pad, batch, length, device)
    hidden, empty = softmax_masks(invalid_keys(pad, mixer.causal, None, batch, length, length, device),
                                  pad is not None)
    tables = [stacked_table([layer.terms[i] for layer in layers], 0, length, length, mixer.scaling)
              for i in range(len(mixer.terms))]
    energies = mixer.energies(positions, positions, 0, length, length, shared=True, pad=pad, plain=pad is None,
                              tables=tables)  # B or 1 x (L H) x T x T
    if dtype is not None:  # (the mask has the batch of the energies and the masks broadcast: B-sized when causal)
        mask = MaskedBias.apply(energies, hidden, dtype)
        return [(layer_mask, empty) for layer_mask in mask.unflatten(1, (len(layers), -1)).unbind(1)]
    # One softmax of every layer's heads, layer-major (L x B or 1 x H x T x T), the call's masks broadcast over
    # the layers (1 x B x 1 x T x T).
    masks = tuple(None if mask is None else mask.unsqueeze(0) for mask in (hidden, empty))
    probs = masked_softmax(energies.unflatten(1, (len(layers), -1)).transpose(0, 1), None, masks=masks)
    # Each sentence and layer draws its own dropout, as a layer's own softmax would. Written once, layer-major,
    # for all layers (without dropout a copy of the batch's one row), each layer's weights are contiguous, which
    # the product with its values reads in place: a layer's own expanded weights it would copy.
    dropped = F.dropout(probs.expand(-1, batch, -1, -1, -1), p=mixer.dropout, training=True).contiguous()
    return dropped.unbind(0)


def layer_attention(mixer, pad, batch: int, length: int, device, dtype=None):
    """This layer's share of its group's teacher-forced training work (:func:`every_layer`, made by the first
    layer of the call, one lookup per layer): with ``dtype``, fused attention's additive mask and the empty
    rows; else the dropped-out attention weights. The positions are bounded by the length, not by their largest
    (the batch's longest sentence has no pad: the same bound), which is never read from the device: a read
    would stall a GPU's queue once per side and step."""
    group = ("posnet_layer_energies", mixer.side_group, length, dtype)
    return mixer.shared(group, lambda: every_layer(mixer, pad, batch, length, device, dtype), pad)[mixer.layer]


def layer_heads(mixer, v: Tensor, pad, batch: int, length: int, dtype=None) -> Tensor:
    """The heads (B x H x T x D_h) of ``mixer``'s teacher-forced training call of its group's work
    (:func:`grouped`) over its values ``v``: with ``dtype``, through fused attention with its mask and dropout;
    else the product of its weights, dropped out already, with the values."""
    attention = layer_attention(mixer, pad, batch, length, v.device, dtype)
    if dtype is not None:  # (this layer's mask, the call's empty rows)
        return position_only_attention(*attention, v, mixer.dropout, mixer.shared)
    return torch.matmul(attention.to(v.dtype), v)


def teacher_forced_self(mixer, pad, batch: int, length: int, device, dtype=None):
    """Energies (with ``dtype``: fused attention's mask of them in that dtype) and softmax masks of a
    teacher-forced self-attention call of ``mixer`` outside its group's work (:func:`grouped`): positions, index
    grids and masks made once per call for every layer (Mixer.shared)."""
    positions = mixer.shared(("positions", length), lambda: real_positions(pad, batch, length, device), pad)
    masks = mixer.shared(("posnet_softmax_masks", length, mixer.causal), lambda: softmax_masks(
        invalid_keys(pad, mixer.causal, None, batch, length, length, device), pad is not None), pad)
    energy = mixer.energies(positions, positions, 0, length, length, shared=True, pad=pad, plain=pad is None)
    return energy if dtype is None else MaskedBias.apply(energy, masks[0], dtype), masks
