"""Constant-state decoding of softmax attention with clipped relative energies (docs/constant-cost-decoding.md).

Used by every decoder mixer whose energy of a key depends on its distance to
the query only up to a clipping distance K (rPosNet, AppTek's LightConv):
the keys beyond K share one energy, so their running sum and count replace
the prefix cache.
"""
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from torch import Tensor


def clipped_decoding_step(buffer: Dict[str, Optional[Tensor]], step: int, v: Tensor, pad: Optional[Tensor],
                          energy: Tensor, shared_tail: bool, dropout: float = 0.0, training: bool = False) -> Tensor:
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
    whether it is a pad key. ``buffer`` holds the state, batch first so
    that ``Mixer.reorder_incremental_state`` follows beam search, and of a
    size that does not depend on the step: ``window`` (B x H x K x D_h, a
    ring: position m in slot m mod K, written in place), ``window_pad``
    (B x K, True where that position is a pad or before the start),
    ``tail`` (B x H x 1 x D_h, fp32: the sum of the tail's valid values)
    and ``tail_count`` (B x 1, fp32). Returns the B x H x 1 x D_h output
    before ``merge_heads``; attention dropout (``training`` only) drops
    the tail as one term.
    """
    batch, heads, _, head_dim = v.shape
    acc = torch.promote_types(v.dtype, torch.float32)
    k = energy.size(-1) - 1
    if "window" not in buffer:
        buffer["window"] = v.new_zeros(batch, heads, k, head_dim)
        buffer["window_pad"] = torch.ones(batch, k, dtype=torch.bool, device=v.device)
        buffer["tail"] = torch.zeros(batch, heads, 1, head_dim, dtype=acc, device=v.device)
        buffer["tail_count"] = torch.zeros(batch, 1, dtype=acc, device=v.device)
    if pad is None:
        pad = torch.zeros(batch, 1, dtype=torch.bool, device=v.device)
    window, window_pad = buffer["window"], buffer["window_pad"]
    # The key now at distance K joins the tail (or, unshared, is the tail):
    # position n-K, in the slot that this step's value overwrites.
    slot = step % k if k else 0
    entering, entering_pad = (window[:, :, slot: slot + 1], window_pad[:, slot: slot + 1]) if k else (v, pad)
    entering = entering.to(acc).masked_fill(entering_pad[:, :, None, None], 0.0)
    valid = (~entering_pad).to(acc)
    count = buffer["tail_count"] + valid if shared_tail else valid
    buffer["tail"] = buffer["tail"] + entering if shared_tail else entering
    buffer["tail_count"] = count
    if k:
        window[:, :, slot: slot + 1] = v
        window_pad[:, slot: slot + 1] = pad

    # Slot i holds distance (slot - i) mod K: its energy is entry K - that.
    order = torch.tensor([0] + [k - (slot - i) % k for i in range(k)], device=v.device)  # tail, then slots
    # log(count) on the tail's energy; -inf (log 0) where the tail or a slot holds no key.
    no_key = torch.zeros(batch, k, dtype=acc, device=v.device).masked_fill_(window_pad, float("-inf"))
    bias = torch.cat([torch.log(count), no_key], dim=1).unsqueeze(1)  # B x 1 x (K+1)
    probs = torch.softmax(energy[:, :, order] + bias, dim=-1)
    # Before any real key (pads only) the row is 0, not NaN, as masked_softmax makes it.
    probs = probs.masked_fill(((count == 0) & window_pad.all(dim=1, keepdim=True)).unsqueeze(-1), 0.0)
    probs = F.dropout(probs, p=dropout, training=training)
    mean = buffer["tail"] / count.clamp(min=1.0).view(batch, 1, 1, 1)
    recent = torch.matmul(probs[:, :, None, 1:].to(v.dtype), window)
    return (probs[:, :, None, :1] * mean + recent.to(acc)).to(v.dtype)
