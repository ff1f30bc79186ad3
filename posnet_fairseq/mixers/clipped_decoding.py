"""Constant-state decoding of softmax attention with clipped relative energies (docs/constant-cost-decoding.md).

Used by every decoder mixer whose energy of a key depends on its distance to
the query only up to a clipping distance K (rPosNet, AppTek's LightConv):
the keys beyond K share one energy, so their running sum and count replace
the prefix cache.
"""
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .state_reorder import COPY, REUSE


def slot_order(k: int, slot: int, device) -> Tensor:
    """Energy entry of the tail and of each ring slot, tail first: slot i holds distance (slot - i) mod K,
    whose energy is entry K - that. Built once per (K, ring position, device), not at every step."""
    key = (k, slot, device)
    order = _SLOT_ORDERS.get(key)
    if order is None:
        order = _SLOT_ORDERS[key] = torch.tensor([0] + [k - (slot - i) % k for i in range(k)], device=device)
    return order


_SLOT_ORDERS: Dict[Tuple[int, int, torch.device], Tensor] = {}


def clipped_decoding_step(mixer, buffer: Dict[str, Optional[Tensor]], step: int, v: Tensor, pad: Optional[Tensor],
                          energy: Tensor, shared_tail: bool, dropout: float = 0.0, training: bool = False,
                          ordered: bool = False) -> Tensor:
    """One causal decoding step of softmax attention with clipped relative energies, in constant state.

    The energy of the key at distance ``n - m = j`` from the query ``n``
    (= ``step``, the same for the whole batch) may depend on ``j`` only
    through ``min(j, K)``; ``energy`` (fp32, (B or 1) x H x (K+1)) gives
    it oldest first: entry ``K - j`` is the energy at distance j < K,
    entry 0 that of every key at distance >= K (the *tail*). With
    ``shared_tail`` False the tail is the one key at distance exactly K
    (keys further away are not seen). The keys of one energy enter the
    softmax as one term ``e + log(count)`` carrying their mean value, so
    the step is the same function as attending over the whole prefix, at
    O(K D_h) per step (docs/constant-cost-decoding.md).

    ``v`` is this step's B x H x 1 x D_h value and ``pad`` (B x 1) says
    whether it is a pad key. ``buffer`` holds the state, stored with
    ``mixer.keep_state``, batch first so that ``Mixer.reorder_incremental_state``
    follows beam search, and of a size that does not depend on the step: ``window`` (B x H x K x D_h, a
    ring: position m in slot m mod K, written in place), ``tail``
    (B x H x 1 x D_h, fp32: the sum of the tail's valid values) and
    ``counts`` (B x (K+1), fp32: the tail's count of valid keys, then 1 for
    each slot that holds a valid key, 0 for a pad or before the start; one
    tensor, so that a beam reorder copies one tensor less, and its log is
    the softmax bias). Returns the B x H x 1 x D_h output
    before ``merge_heads``; attention dropout (``training`` only) drops
    the tail as one term. With ``ordered``, ``energy`` is already in the
    order of the state, tail first, then slot i (:func:`slot_order`).
    """
    batch, heads, _, head_dim = v.shape
    acc = torch.promote_types(v.dtype, torch.float32)
    k = energy.size(-1) - 1
    if "window" not in buffer:
        # The window, the largest state, is made here and only written in place: a reorder copies it
        # into the window the previous reorder released.
        mixer.keep_state(buffer, "window", v.new_zeros(batch, heads, k, head_dim), REUSE)
        mixer.keep_state(buffer, "tail", torch.zeros(batch, heads, 1, head_dim, dtype=acc, device=v.device), COPY)
        mixer.keep_state(buffer, "counts", torch.zeros(batch, k + 1, dtype=acc, device=v.device), COPY)
    window, tail, counts = buffer["window"], buffer["tail"], buffer["counts"]
    slot = _advance(window, tail, counts, v, pad, step, shared_tail)

    # log(count) on the tail's energy; -inf (log 0) where the tail or a slot holds no key.
    bias = torch.log(counts).unsqueeze(1)  # B x 1 x (K+1)
    probs = torch.softmax((energy if ordered else energy[:, :, slot_order(k, slot, v.device)]) + bias, dim=-1)
    if pad is not None:  # before any real key (pads only) the row is 0, not NaN, as masked_softmax makes it
        probs = probs.masked_fill((counts == 0).all(dim=1, keepdim=True).unsqueeze(-1), 0.0)
    probs = F.dropout(probs, p=dropout, training=training)
    mean = tail / counts[:, :1].clamp(min=1.0).view(batch, 1, 1, 1)
    recent = torch.matmul(probs[:, :, None, 1:].to(v.dtype), window)
    return (probs[:, :, None, :1] * mean + recent.to(acc)).to(v.dtype)


def _advance(window: Tensor, tail: Tensor, counts: Tensor, v: Tensor, pad: Optional[Tensor], step: int,
             shared_tail: bool) -> int:
    """Writes this step's value into the state of :func:`clipped_decoding_step` in place; returns its slot."""
    acc, k = tail.dtype, window.size(2)
    # The key now at distance K joins the tail (or, unshared, is the tail):
    # position n-K, in the slot that this step's value overwrites.
    slot = step % k if k else 0
    if pad is not None:  # a pad key's value is stored as 0, so that it adds nothing when it joins the tail
        v = v.masked_fill(pad[:, None, :, None], 0.0)
    if k:  # the slot's count (1, or 0 for a pad or before the start) is read before this step overwrites it
        entering, valid = window[:, :, slot: slot + 1].to(acc), counts[:, slot + 1: slot + 2]
    else:
        entering, valid = v.to(acc), (1.0 - pad.to(acc)) if pad is not None else 1.0
    if shared_tail:
        counts[:, :1] += valid
        tail += entering
    else:
        counts[:, :1] = valid
        tail.copy_(entering)
    if k:
        window[:, :, slot: slot + 1] = v
        counts[:, slot + 1: slot + 2] = 1.0 if pad is None else (~pad).to(acc)
    return slot


def uniform_counts(k: int, steps: int) -> Tensor:
    """The ``counts`` (K+1, fp32) of the shared-tail state after ``steps`` steps of rows without pads, the same
    for every row: the tail holds positions 0..steps-K-1, slot i the position m < steps with m = i mod K
    among the last K."""
    return torch.tensor([float(max(steps - k, 0))] + [1.0 if i < steps else 0.0 for i in range(k)])
