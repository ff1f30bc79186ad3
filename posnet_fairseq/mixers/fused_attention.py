"""Attention through torch's fused scaled_dot_product_attention, with a float logit bias as its additive mask.

On a GPU, fused attention is one kernel forward and one backward where the explicit form (logits, masking,
softmax, dropout, product with the values) launches one each, and a base model's training step is bound by
launches (issue 48). Where the bias needs a gradient, CUDA's memory-efficient kernel returns it.

Where the device's fused kernel returns no gradient of its mask and the bias needs one (the CPU's: torch falls
back to its math path, about 25 operators and 12 autograd nodes a layer), :func:`explicit_attention` attends in
three products' worth of operators instead (issue 48: host time per training step).

Two hosts: content attention (``content_attention.py``: ``softmax(Q K^T / sqrt(d_h) + B) V``) and PosNet's
position-only attention (``posnet.py``: ``softmax(E) V``, Eq. 2-3, whose energies E are the whole logit: the
queries and keys are zeros, :func:`position_only_attention`).
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

# The head size of position_only_attention's zero queries and keys: the least that CUDA's memory-efficient
# kernel takes in half precision (its GEMM alignment, 8 elements of 16 bits).
ZERO_DIM = 8
# The alignment, in elements, of the strides of a mask that CUDA's memory-efficient kernel reads in place.
MASK_ALIGNMENT = 8
# The device types whose fused attention returns no gradient of a mask (torch's CPU kernel takes none that needs
# one): there a bias that needs a gradient is attended by explicit_attention. CUDA's memory-efficient kernel
# returns it.
NO_MASK_GRADIENT = ("cpu",)


class MaskedBias(torch.autograd.Function):
    """A logit bias (fp32, batch 1 or B; ... x B x H x T x S: the masks of several layers at once may lead) with
    the ``invalid`` keys (4-D; None: none) at -inf, in ``dtype``: the
    additive mask of torch's fused attention, written (one copy, the cast included, and the masking in place)
    into rows aligned to ``MASK_ALIGNMENT`` elements, which CUDA's memory-efficient kernel reads as they are:
    torch pads (copies) any other mask first, and copies the gradient back, several kernels forward and
    backward (torch's ``preprocess_mask``). Its gradient is the mask's, summed over the batch the bias was
    broadcast to, in one operator: a -inf logit gets no gradient (its weight is 0), so autograd's masking and
    cast of the gradient (two operators per layer) change nothing."""

    @staticmethod
    def forward(ctx, bias: Tensor, invalid: Optional[Tensor], dtype, batch: int = 1) -> Tensor:
        """``batch``: the least batch size of the mask (:func:`explicit_attention` takes one per sentence)."""
        ctx.bias_shape, ctx.bias_dtype = bias.shape, bias.dtype
        # Their last 4 dims with no empty one: the broadcast is the larger size per dim (torch.broadcast_shapes,
        # in Python, cost 16 us of host time per layer).
        lead, shape = bias.shape[:-4], bias.shape[-4:]
        shape = shape if invalid is None else tuple(map(max, shape, invalid.shape))
        shape = (*lead, *shape) if shape[0] >= batch else (*lead, batch, *shape[1:])
        keys = shape[-1]
        row = -(-keys // MASK_ALIGNMENT) * MASK_ALIGNMENT
        mask = bias.new_empty(*shape[:-1], row, dtype=dtype)[..., :keys].copy_(bias)
        return mask if invalid is None else mask.masked_fill_(invalid, float("-inf"))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        if grad.shape != ctx.bias_shape:  # one bias for the batch
            return grad.sum(-4, keepdim=True, dtype=ctx.bias_dtype), None, None, None
        return grad.to(ctx.bias_dtype), None, None, None


def fused_attention(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor], masks, dropout: float) -> Tensor:
    """softmax(q k^T / sqrt(d_h) + bias, masked) v, with ``dropout`` on the weights, through torch's fused
    scaled_dot_product_attention (``masks``: :func:`.attention.softmax_masks`: a row without any valid key sees
    everything and is zeroed afterwards, as masked_softmax does). A bias becomes the additive mask in ``q``'s
    dtype (:class:`MaskedBias`); where it needs a gradient on a GPU, the memory-efficient kernel returns it, on a
    device of ``NO_MASK_GRADIENT`` :func:`explicit_attention` attends instead."""
    invalid, empty = masks
    if bias is None:
        return attend(q, k, v, None if invalid is None else ~invalid, empty, dropout)
    return masked_attention(q, k, v, masked_bias(bias, invalid, q), empty, dropout)


def masked_bias(bias: Tensor, invalid: Optional[Tensor], q: Tensor) -> Tensor:
    """The mask of :func:`masked_attention` from a ``bias`` (fp32, ... x B|1 x H x T x S) and the ``invalid`` keys
    for the queries ``q``: :class:`MaskedBias` in ``q``'s dtype, one per sentence where it is attended by
    :func:`explicit_attention`."""
    explicit = bias.requires_grad and q.device.type in NO_MASK_GRADIENT
    return MaskedBias.apply(bias, invalid, q.dtype, q.size(0) if explicit else 1)


def masked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, empty: Optional[Tensor], dropout: float):
    """:func:`attend` with the additive ``mask`` of :func:`masked_bias` (B|1 x H x T x S): by torch's kernel, or
    where the mask needs a gradient on a device of ``NO_MASK_GRADIENT``, by :func:`explicit_attention`."""
    if mask.requires_grad and q.device.type in NO_MASK_GRADIENT:
        return explicit_attention(q, k, v, mask, empty, dropout)
    return attend(q, k, v, mask, empty, dropout)


def explicit_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, empty: Optional[Tensor], dropout: float):
    """:func:`attend` as one product with the mask for its input (the scaling its alpha), a softmax, a dropout
    and one product (``mask``: B x H x T x S, one per sentence: a product's input broadcasts over its batch of
    B H matrices only as a whole). The heads of :meth:`~.base.Mixer.split_heads` are B H matrices as views, no
    copy. The same function as torch's math path, its dropout the same draws."""
    (batch, heads, length, dim), keys = q.shape, k.size(2)
    rows = batch * heads
    logits = torch.baddbmm(mask.reshape(rows, length, keys), q.reshape(rows, length, dim),
                           k.reshape(rows, keys, dim).transpose(1, 2), alpha=dim ** -0.5)
    probs = logits.softmax(-1)
    if dropout:  # (else no operator)
        probs = F.dropout(probs, p=dropout)
    out = torch.bmm(probs, v.reshape(rows, keys, dim)).view(batch, heads, length, dim)
    return out if empty is None else out.masked_fill(empty, 0.0)


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], empty: Optional[Tensor], dropout: float):
    """torch's scaled_dot_product_attention with the attention ``mask``, the ``empty`` rows (B x 1 x T x 1, or
    None) zeroed."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
    return out if empty is None else out.masked_fill(empty, 0.0)


def attention_dtype(v: Tensor):
    """The dtype fused attention runs in on ``v``'s device: autocast's where it is on, else ``v``'s."""
    kind = v.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else v.dtype


def position_only_attention(mask: Tensor, empty: Optional[Tensor], v: Tensor, dropout: float, shared) -> Tensor:
    """softmax(energy, masked) v with ``dropout`` on the weights (PosNet, Eq. 2-3) as fused attention: ``mask``
    is the additive mask of the scaled energies (:class:`MaskedBias`, B or 1 x H x T x S, in
    :func:`attention_dtype`), its queries and keys zeros of ``ZERO_DIM``, whose product adds nothing to it;
    ``shared(key, make)`` (``Mixer.shared``) makes those once per call for every layer. The same function as
    the explicit softmax and product; with dropout, other random draws."""
    (batch, heads, keys), length = v.shape[:3], mask.size(2)

    def zeros():  # (the queries and keys sliced from one tensor once for every layer, as views)
        both = v.new_zeros(batch, heads, max(length, keys), ZERO_DIM, dtype=mask.dtype)
        return both[:, :, :length], both[:, :, :keys]

    q, k = shared(("position_only_qk", batch, heads, length, keys, mask.dtype, v.device), zeros)
    return attend(q, k, v, mask, empty, dropout)
