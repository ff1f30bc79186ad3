"""Decoding hard-coded Gaussian self-attention from a ring of its last values (You et al., 2020, §3.1).

A causal head's weight of a key depends only on the key's distance to the query, and beyond the
mixer's ``window`` it is exactly 0.0 in fp32 (``HardCodedSelfAttention.decoding_window``), so every
decoding step is the same H x window weighting of the last ``window`` values, whatever the step. They
are kept in a ring, ``window x A x H x D_h`` (A rows allocated per slot), in the rows they were written
to: the value of position n in slot n mod window, row b of the hypothesis that wrote it, over the value
that leaves the window (zeros before the start, which weigh nothing, like pads). Every hypothesis leaves
the window's oldest value at the same step, so a step may overwrite the slot's rows whichever
hypotheses read them. A hypothesis reads its values through ``ring_index`` (B x H x window: for each
head and slot the row ``(slot * A + b') * H + h`` of the ring seen as rows of D_h numbers, the bags'
input as it is), so a beam reorder copies no ring: it composes the index (``state_reorder.COMPOSED``),
once for every layer of the side that holds the same index, where a reorder copied each layer's ring
before (issue 48: on a GPU a decoding step is bound by kernel launches). A step writes one value per
layer (projected straight into its slot where it can: one kernel, not a projection and its copy) and
reads the output with one weighted ``embedding_bag`` (the rows of the step's slots, weighed as the
rotated weights say); the index after the step is made once per step for every layer
(``Mixer.shared``). The index, its advance and the read are rPosNet's (``indexed_ring.py``'s reader).
The step count is the same for every hypothesis: a Python int (``state_reorder.SHARED``), no tensor.

The rotated weights are repeated for the search's rows once, at its first step (``SHARED`` too: a row
of it serves any hypothesis, and a search that drops sentences reads the first rows), so that a step's
bag reads them in place; they hold window / D_h times as many numbers as the ring, so a window wider
than a head (a wide sigma) expands them for the rows at each step instead, one copy per layer.

Until the ring is full (steps 0 .. window - 2) only slots 0 .. n hold values, and the others zeros, which add
nothing to a bag but are read all the same: on the CPU (``PREFIX_DEVICES``) such a step reads the filled slots
only, a bag of n + 1 rows, with the first n + 1 of its weights (cut for every such step at once, with the rows'
weights: one gather per layer at a search's first step) and the index's first n + 1 slots (one copy per step for
every layer). The sums are the same: the rows read are summed in the same order, and a zero row adds exactly 0.
A layer's ring is 4 MB at base (16 slots, 128 hypotheses) and a CPU step reads it from memory, so at 30 tokens
this reads about a quarter less of it over a search (issue 48, point 4); on a GPU the read costs next to nothing
beside a kernel launch, so there every step reads the whole ring and launches no copy.
"""
from typing import Callable, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import indexed_ring
from .state_reorder import COMPOSED, INDEXED, SHARED

# The devices where a step before the ring is full reads its filled slots only (the module doc).
PREFIX_DEVICES = ("cpu",)


def rotated_weights(weights: Tensor) -> Tensor:
    """``weights`` (H x window, the keys at distance window-1 .. 0, oldest first) for the ring: entry
    ``[slot, 0, h, 0, s]`` weighs ring slot ``s`` for a query whose value is in ``slot`` (slot s then holds
    the key at distance (slot - s) mod window)."""
    window = weights.size(1)
    slots = torch.arange(window, device=weights.device)
    distance = (slots.view(-1, 1) - slots.view(1, -1)) % window  # [slot, s]
    return weights[:, window - 1 - distance].permute(1, 0, 2).unsqueeze(1).unsqueeze(3)  # window x 1 x H x 1 x window


def projects_into(projection, x: Tensor) -> bool:
    """Whether ``projection`` of ``x`` can be written into a ring slot by :func:`_project` (a plain ``nn.Linear``
    of ``x``'s dtype, no autocast, no gradient: ``out=`` records none): on a GPU one kernel less per layer and step
    than the projection and its copy into the ring (issue 48)."""
    return (type(projection) is nn.Linear and x.dtype == projection.weight.dtype and not torch.is_grad_enabled()
            and not torch.is_autocast_enabled(x.device.type))


def _project(projection: nn.Linear, x: Tensor, out: Tensor):
    """``projection(x)`` written into ``out`` (B x C, contiguous): the product F.linear computes for 2-D input."""
    if projection.bias is None:
        torch.mm(x, projection.weight.t(), out=out)
    else:
        torch.addmm(projection.bias, x, projection.weight.t(), out=out)


def decode_window(mixer, buffer, v: Tensor, weights: Callable[[], Tensor], project: bool = False) -> Tensor:
    """This call's B x H x T x D_h outputs of causal hard-coded attention, the ring in ``buffer`` advanced by
    the T values ``v`` (B x H x T x D_h), or with ``project`` by the value projection of the step's input ``v``
    (1 x B x C: :func:`projects_into`); ``weights()``: :func:`rotated_weights`, in the values' dtype or, for
    attention weight dropout (in training only, as the teacher-forced ``_HardCodedAttention._mix`` drops
    them), in fp32, asked for only where the call reads them (where the rows for the search are kept: at its
    first step; their lookup is host time per layer and step)."""
    if project:
        length, batch, _ = v.shape
        heads, head_dim = mixer.num_heads, mixer.head_dim
    else:
        batch, heads, length, head_dim = v.shape
    window = mixer.window
    first = buffer.get("step_count", 0)
    mixer.keep_state(buffer, "step_count", first + length, SHARED)
    ring, index = _ring(mixer, buffer, batch, v)
    dropout = mixer.weight_dropout and mixer.training  # (fairseq never decodes in training mode)
    repeated = not dropout and window <= head_dim  # the weights repeated for the rows (the module doc)
    prefix = repeated and v.device.type in PREFIX_DEVICES
    rows = _row_weights(mixer, buffer, weights, batch, prefix and first + 1 < window) if repeated else None
    table = weights() if rows is None else None
    outs = []
    for t in range(length):
        slot = (first + t) % window
        if project:
            _project(mixer.v_proj, v[0], ring[slot, :batch].view(batch, -1))
        else:
            ring[slot, :batch] = v[:, :, t]
        index = mixer.shared(("hc_ring_rows", slot, batch, ring.size(1), window),
                             lambda: indexed_ring.advance(index, _slot_masks(window, v.device)[slot], ring.size(1)),
                             index)
        filled = first + t + 1  # slots 0 .. first + t hold values until the ring is full
        if prefix and filled < window:
            out = _read_filled(mixer, ring, index, buffer["filled_weights"], rows.size(1), filled)
        else:
            if rows is not None:  # (contiguous: made so by _row_weights)
                bag = rows[slot, :batch].view(-1)
            else:
                bag = table[slot].expand(batch, heads, 1, window)
                if dropout:
                    bag = F.dropout(bag, mixer.weight_dropout, training=True)
                bag = bag.reshape(-1).to(ring.dtype)
            out = indexed_ring.read(ring, index.view(-1), _offsets(batch, heads, window, v.device), bag)
        outs.append(out.view(batch, heads, 1, head_dim))
    mixer.keep_state(buffer, "ring_index", index, COMPOSED)
    if first <= window - 2 <= first + length - 1:  # the last step before the ring is full: its cut weights go
        buffer.pop("filled_weights", None)
    return outs[0] if length == 1 else torch.cat(outs, dim=2)  # (a step: no copy)


def _ring(mixer, buffer, batch: int, like: Tensor) -> Tuple[Tensor, Tensor]:
    """The ring (of ``like``'s dtype and device) and its index for a step of ``batch`` rows: made at a search's
    first step (the index once for every layer), or gathered anew into rows of their own where a reorder repeated
    rows beyond those allocated."""
    heads, head_dim = mixer.num_heads, mixer.head_dim
    window = mixer.window
    ring, index = buffer.get("ring"), buffer.get("ring_index")
    if ring is not None and batch <= ring.size(1):
        return ring, index
    if ring is None:  # (made here, only written in place)
        ring = like.new_zeros(window, batch, heads, head_dim)
    else:
        slots = index[:, 0].div(heads, rounding_mode="floor")  # B x window: slot * A + b', a row of H x D_h
        ring = ring.view(-1, heads, head_dim).index_select(0, slots.t().reshape(-1)).view(window, batch, heads, -1)
    mixer.keep_state(buffer, "ring", ring, INDEXED)
    index = mixer.shared(("hc_ring_index", batch, window),
                         lambda: indexed_ring.identity(batch, batch, heads, window, like.device))
    return ring, mixer.keep_state(buffer, "ring_index", index, COMPOSED)


def _slot_masks(window: int, device) -> Tensor:
    """Row ``slot`` (1 x 1 x window): the slot a step writes, for ``indexed_ring.advance``."""
    return indexed_ring.cached(("hc slots", window, device),
                               lambda: torch.eye(window, dtype=torch.bool, device=device).view(window, 1, 1, window))


def _read_filled(mixer, ring: Tensor, index: Tensor, weights: Tensor, allocated: int, filled: int) -> Tensor:
    """The bags of a step before the ring is full, over its ``filled`` slots only (the module doc): ``index`` (B x
    H x window) cut to its first ``filled`` slots once for every layer, the weights read in place from their cut
    ``weights`` (:func:`_filled_weights`, made for ``allocated`` rows)."""
    batch, heads, window = index.shape
    rows = mixer.shared(("hc_ring_filled", filled, batch, ring.size(1), window),
                        lambda: index[:, :, :filled].reshape(-1), index)
    start = allocated * heads * filled * (filled - 1) // 2  # the blocks of 1 .. filled - 1 slots come first
    return indexed_ring.read(ring, rows, _filled_offsets(batch, heads, window, index.device)[filled - 1],
                             weights[start: start + batch * heads * filled])


def _filled_offsets(batch: int, heads: int, window: int, device) -> Tensor:
    """Row ``f - 1`` (f < window): the offsets of the B H bags of ``f`` rows that a step before the ring is full
    reads; one tensor for every ``f``, so that they take one place among ``indexed_ring.cached``'s."""
    return indexed_ring.cached(("hc filled offsets", batch, heads, window, device),
                               lambda: torch.arange(1, window, device=device).view(-1, 1)
                               * torch.arange(batch * heads, device=device))


def _offsets(batch: int, heads: int, window: int, device) -> Tensor:
    """The offsets of the B H bags of ``window`` rows that a step reads."""
    return indexed_ring.cached(("hc offsets", batch, heads, window, device),
                               lambda: torch.arange(0, batch * heads * window, window, device=device))


def _row_weights(mixer, buffer, weights: Callable[[], Tensor], batch: int, cut: bool) -> Tensor:
    """``weights()`` (:func:`rotated_weights`) repeated for at least ``batch`` rows, window x rows x H x 1 x window
    contiguous: made at a search's first step (or for more rows than before: a reorder may repeat rows) and kept in
    ``buffer``; with ``cut``, their cut for the steps before the ring is full too (:func:`_filled_weights`)."""
    rows = buffer.get("row_weights")
    if rows is None or rows.size(1) < batch:
        table = weights()
        window, _, heads, _, _ = table.shape
        rows = mixer.keep_state(buffer, "row_weights", table.expand(window, batch, heads, 1, window).contiguous(),
                                SHARED)
        if cut:
            mixer.keep_state(buffer, "filled_weights", _filled_weights(rows), SHARED)
    return rows


def _filled_weights(rows: Tensor) -> Tensor:
    """The weights of the steps before the ring is full, from ``rows`` (:func:`_row_weights`, window x R x H x 1 x
    window): for f = 1 .. window - 1 the R x H x f weights of slots 0 .. f - 1 at step f - 1 (in slot f - 1), one
    block after another, flat, so that such a step reads its bags' weights in place (:func:`_read_filled`)."""
    window, allocated, heads = rows.shape[:3]
    return rows.view(-1).index_select(0, _filled_gather(allocated, heads, window, rows.device))


def _filled_gather(allocated: int, heads: int, window: int, device) -> Tensor:
    """The entries of :func:`_filled_weights` in its ``rows``, seen flat: made once per shape."""
    def make():
        row, head = torch.arange(allocated).view(-1, 1, 1), torch.arange(heads).view(1, -1, 1)
        return torch.cat([((((f - 1) * allocated + row) * heads + head) * window + torch.arange(f)).view(-1)
                          for f in range(1, window)]).to(device)
    return indexed_ring.cached(("hc filled weights", allocated, heads, window, device), make)
