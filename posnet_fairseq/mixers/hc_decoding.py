"""Decoding hard-coded Gaussian self-attention from a ring of its last values (You et al., 2020, §3.1).

A causal head's weight of a key depends only on the key's distance to the query, and beyond the
mixer's ``window`` it is exactly 0.0 in fp32 (``HardCodedSelfAttention.decoding_window``), so every
decoding step is the same H x window weighting of the last ``window`` values, whatever the step. They
are kept in a ring: the value of position n in slot n mod window, written in place over the value that
leaves the window (zeros before the start, which weigh nothing, like pads). The weights are rotated to
the ring's slots once per slot and kept, so a step writes one value and makes one product; a beam
reorder copies the ring into the one the previous reorder released (``state_reorder.REUSE``). The step
count is the same for every hypothesis and kept on the CPU (``state_reorder.SHARED``), as rPosNet's
(``clipped_decoding.py``). Before, a step concatenated the window with its value: a copy of the whole
window per step on top of the reorder's. The rotated weights are repeated for the search's rows once,
at its first step (``SHARED`` too: a row of it serves any hypothesis, and a search that drops sentences
reads the first rows), so that a step's weighting is one ``bmm`` of the rows' weights and the ring; a
product with weights broadcast over the rows copies them into a B x H x 1 x window tensor first, one
more kernel per layer and step on a GPU (issue 48). They hold window / D_h times as many numbers as the
ring, so a window wider than a head (a wide sigma) keeps the broadcast product instead.
"""
import torch
import torch.nn.functional as F
from torch import Tensor

from .state_reorder import REUSE, SHARED


def rotated_weights(weights: Tensor) -> Tensor:
    """``weights`` (H x window, the keys at distance window-1 .. 0, oldest first) for the ring: entry
    ``[slot, 0, h, 0, s]`` weighs ring slot ``s`` for a query whose value is in ``slot`` (slot s then holds
    the key at distance (slot - s) mod window)."""
    window = weights.size(1)
    slots = torch.arange(window, device=weights.device)
    distance = (slots.view(-1, 1) - slots.view(1, -1)) % window  # [slot, s]
    return weights[:, window - 1 - distance].permute(1, 0, 2).unsqueeze(1).unsqueeze(3)  # window x 1 x H x 1 x window


def decode_window(mixer, buffer, v: Tensor, weights: Tensor) -> Tensor:
    """This call's B x H x T x D_h outputs of causal hard-coded attention, the ring in ``buffer`` advanced by
    the T values ``v`` (B x H x T x D_h); ``weights``: :func:`rotated_weights`, in ``v``'s dtype or, for
    attention weight dropout (in training only, as the teacher-forced ``_HardCodedAttention._mix`` drops
    them), in fp32."""
    batch, heads, length, head_dim = v.shape
    window = weights.size(0)
    count = buffer.get("step_count")
    first = 0 if count is None else int(count)
    mixer.keep_state(buffer, "step_count", torch.tensor(first + length), SHARED)
    if "window" not in buffer:
        # Made here and only written in place: a reorder copies it into the ring the previous one released.
        mixer.keep_state(buffer, "window", v.new_zeros(batch, heads, window, head_dim), REUSE)
    ring = buffer["window"]
    dropout = mixer.weight_dropout and mixer.training  # (fairseq never decodes in training mode)
    rows = None if dropout or window > head_dim else _row_weights(mixer, buffer, weights, batch)
    outs = []
    for t in range(length):
        slot = (first + t) % window
        ring[:, :, slot: slot + 1] = v[:, :, t: t + 1]
        if rows is not None:  # (the ring is contiguous: made so, written in place and reordered into contiguous memory)
            step = rows[slot, :batch].view(batch * heads, 1, window)
            outs.append(torch.bmm(step, ring.view(batch * heads, window, head_dim)).view(batch, heads, 1, head_dim))
            continue
        step = weights[slot]  # 1 x H x 1 x window
        if dropout:
            step = F.dropout(step.expand(batch, heads, 1, window), mixer.weight_dropout, training=True).to(v.dtype)
        outs.append(torch.matmul(step, ring))
    return outs[0] if length == 1 else torch.cat(outs, dim=2)  # (a step: no copy)


def _row_weights(mixer, buffer, weights: Tensor, batch: int) -> Tensor:
    """``weights`` (:func:`rotated_weights`) repeated for at least ``batch`` rows, window x rows x H x 1 x window
    contiguous: made at a search's first step (or for more rows than before: a reorder may repeat rows) and kept in
    ``buffer``."""
    rows = buffer.get("row_weights")
    if rows is None or rows.size(1) < batch:
        window, _, heads, _, _ = weights.shape
        rows = mixer.keep_state(buffer, "row_weights", weights.expand(window, batch, heads, 1, window).contiguous(),
                                SHARED)
    return rows
