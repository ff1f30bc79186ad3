"""rPosNet's decoding state for rows without pads, kept in write order and read through beam indices (PosNet
paper, Eq. 4 and 10; docs/constant-cost-decoding.md).

While no row of a search has had a pad key (beam search), every row attends at step n with the same weights,
which depend on n only and are made once per table of energies (:func:`bag_weights`): the key at distance
d < K with its own energy, the keys at distance >= K (the tail) each with the tail's weight over their count.
The state of a layer:

* ``ring``, (K+3) x A x H x 1 x D_h (A rows allocated), of :func:`ring_dtype` (fp32 whatever the model's dtype;
  fp16 in an int8 model, ``models/int8.py``: half the bytes every step reads): slot j <= K holds
  the value of the last position m <= n with m = j mod (K+1) (zeros before the start); slots K+1 and K+2 hold
  the tail's sum, written to each in turn (step n reads slot K+1 + n mod 2 and writes the other);
* ``ring_index``, B x H x (K+3) int64: for hypothesis b, head h and slot j, the row ``(j * A + b') * H + h`` of
  the ring seen as rows of D_h numbers (b' the row the value was written for);
* ``ring_rows`` and ``ring_slots``, views of the ring made with it: as those rows, and its slots, each 1 x A x E
  as the step's values with the heads side by side (a step writes and reads through them, making no view).

A beam reorder copies no ring, the largest state: it composes the index (``state_reorder.COMPOSED``:
``index[order]``, once for every layer). A step writes its value into slot n mod (K+1), and one
``embedding_bag`` reads, for every hypothesis and head, its K+2 rows with their weights (the output, Eq. 4) and
the tail's sum with the value now at distance K (the next tail's sum, written to the other tail slot). The
step's gather indices are the same in every layer: made once per step (``Mixer.shared``); its weights are each
layer's own, looked up for every layer at once (:func:`row_weights`, ``posnet_decoding.step_weights``).
HC-SA's ring (``hc_decoding.py``) is read the same way, with the reader at the end of this module.
"""
from collections import OrderedDict
from typing import Dict, List, Tuple

import torch
from torch import Tensor

from .clipped_decoding import uniform_counts
from .state_reorder import COMPOSED, COPY, INDEXED, REUSE


def bag_weights(energy: Tensor) -> Tensor:
    """The weights of steps 0..N-1, from their scaled fp32 energies N x H x (K+1) (entry 0 the tail's, entry
    K - d that of distance d < K): N x (H (K+2) + 1), per step the H x (K+2) weights of ring slots 0..K and of
    the tail's sum, flattened, then 1 (the weight of both terms of the next tail's sum)."""
    steps, heads, width = energy.shape
    k, device = width - 1, energy.device
    n = torch.arange(steps, device=device).unsqueeze(1)
    distance = torch.arange(k, -1, -1, device=device)  # of each entry; entry 0 (distance K): the tail
    # keys per entry at step n: the tail's n + 1 - K, one at each distance d <= n (none before the start)
    counts = torch.where(distance == k, (n + 1 - k).clamp(min=0), (distance <= n).long()).float()
    probs = torch.softmax(energy + counts.log().unsqueeze(1), dim=-1)
    # the tail's weight multiplies its sum, not its mean
    probs = torch.cat([probs[..., :1] / counts[:, None, :1].clamp(min=1.0), probs[..., 1:]], dim=-1)
    # slot j holds distance (n - j) mod (K+1), entry K - that (distance K: the tail's, entry 0); then the tail
    entries = torch.cat([k - (n - torch.arange(k + 1, device=device)) % (k + 1), torch.zeros_like(n)], dim=1)
    weights = probs.gather(2, entries.unsqueeze(1).expand(steps, heads, k + 2))
    return torch.cat([weights.reshape(steps, -1), torch.ones(steps, 1, device=device)], dim=1)


def ring_dtype(mixer, dtype: torch.dtype) -> torch.dtype:
    """The type of the ring, and of the weights a step reads it with, for values of ``dtype``: the mixer's
    ``ring_dtype`` where its model is int8 (fp16), else fp32 or ``dtype`` if wider."""
    return mixer.ring_dtype or torch.promote_types(dtype, torch.float32)


def step(mixer, buffer: Dict[str, Tensor], n: int, value: Tensor, weights: Tensor) -> Tensor:
    """Step ``n`` of rows without pads: ``value`` the step's 1 x B x E values (heads side by side), ``weights``
    the weight of every ring row the step reads (the layer's :func:`row_weights`); returns the 1 x B x E output
    (heads side by side) in ``value``'s dtype."""
    batch = value.size(1)
    slots = buffer.get("ring_slots")
    if slots is None:
        slots = _new_ring(mixer, buffer, value, weights)
    k, allocated = len(slots) - 3, slots[0].size(1)
    if batch > allocated:
        raise ValueError(f"rPosNet decoding: a step of {batch} rows after a state of {allocated}: beam search "
                         "only drops rows")
    index = buffer["ring_index"]
    rows, after, offsets = mixer.shared(("ring_rows", n, batch, allocated), lambda: _reads(index, n, allocated), index)
    mixer.keep_state(buffer, "ring_index", after, COMPOSED)
    written, tail = slots[n % (k + 1)], slots[k + 1 + (n + 1) % 2]
    if batch < allocated:  # (sentences have finished: their rows stay allocated, unread)
        written, tail = written[:, :batch], tail[:, :batch]
    written.copy_(value)
    # the outputs, then the next tail's sums (each layer its own weights)
    out, sums = read_rows(buffer["ring_rows"], rows, offsets, weights).view(2, 1, batch, -1).unbind(0)
    tail.copy_(sums)
    return out if out.dtype == value.dtype else out.to(value.dtype)  # (an fp32 model: no call)


def _new_ring(mixer, buffer: Dict[str, Tensor], value: Tensor, weights: Tensor):
    """A search's ring of :func:`step` for ``value``'s rows, of :func:`ring_dtype`, with the views a step
    writes and reads through (made once, not per step: issue 48, host time per layer and step): the slots, each
    1 x A x E as a step's values, and the ring as rows of D_h numbers (``embedding_bag``'s table); returns the
    slots."""
    batch, heads = value.size(1), mixer.num_heads
    k, head_dim = weights.numel() // (batch * heads) - 4, value.size(-1) // heads
    ring = mixer.keep_state(buffer, "ring", value.new_zeros(k + 3, batch, heads, 1, head_dim,
                                                            dtype=ring_dtype(mixer, value.dtype)), INDEXED)
    mixer.keep_state(buffer, "ring_rows", ring.view(-1, head_dim), INDEXED)
    start = mixer.shared(("ring_index", batch, k), lambda: identity(batch, batch, heads, k + 3, value.device))
    mixer.keep_state(buffer, "ring_index", start, COMPOSED)
    return mixer.keep_state(buffer, "ring_slots", ring.view(k + 3, 1, batch, heads * head_dim).unbind(0), INDEXED)


def _reads(index: Tensor, n: int, allocated: int) -> Tuple[Tensor, Tensor, Tensor]:
    """What every layer's step ``n`` reads, made once per step: :func:`_rows` and the bags' :func:`_offsets`."""
    batch, heads, slots = index.shape
    return (*_rows(index, n, allocated), _offsets(batch, heads, slots - 3, index.device))


def row_weights(weights: Tensor, batch: int, heads: int) -> Tensor:
    """The weight of every ring row that a step of ``batch`` hypotheses reads, in :func:`step`'s order, from the
    step's rows of :func:`bag_weights` of any number of layers (L x (H (K+2) + 1)): L x B H (K+4), made for all
    of them at once (issue 48: one operator per step, not one per layer and step). Every hypothesis reads with
    the same H (K+2) output weights, and both terms of every next tail's sum with the last entry, so the rows are
    those repeated: one concatenation of broadcast views, a tenth of the time of a lookup through an index of
    every row, which for the fp16 weights of an int8 model took 0.5 ms per step at 128 rows, K = 16."""
    layers = weights.shape[:-1]
    outputs = weights[..., :-1].unsqueeze(-2).expand(*layers, batch, -1).flatten(-2)
    return torch.cat([outputs, weights[..., -1:].expand(*layers, 2 * batch * heads)], dim=-1)


def _rows(index: Tensor, n: int, allocated: int) -> Tuple[Tensor, Tensor]:
    """Step ``n``'s ring rows to read (``embedding_bag``'s input: the output bags of every hypothesis and head,
    then their next tail's bags), and the index after the step: its slot and its next tail slot are the rows
    written for each hypothesis."""
    batch, heads, slots = index.shape
    k = slots - 3
    phase = n % (2 * (k + 1))
    after = advance(index, _written(k, index.device)[phase], allocated)
    return after.view(-1).index_select(0, _gathers(batch, heads, k, index.device)[phase]), after


def _written(k: int, device) -> List[Tensor]:
    """For each phase n mod 2(K+1) of the steps, the slots the step writes (1 x 1 x (K+3): its value's and the
    next tail's). A list, so that a step picks its phase's without an operator."""
    def make():
        written = torch.zeros(2 * (k + 1), 1, 1, k + 3, dtype=torch.bool)
        for n in range(2 * (k + 1)):
            written[n, 0, 0, [n % (k + 1), k + 1 + (n + 1) % 2]] = True
        return list(written.to(device).unbind(0))
    return cached(("rposnet written", k, device), make)


def _gathers(batch: int, heads: int, k: int, device) -> List[Tensor]:
    """For each phase n mod 2(K+1) of the steps, where the bags' rows are in the B x H x (K+3) index seen flat
    (one gather per step, not one of the columns and one of the bags): every hypothesis and head's K+2 output
    columns (slots 0..K and the tail), then every one's 2 columns of the next tail (the tail and the slot now at
    distance K). A list, so that a step picks its phase's without an operator."""
    def make():
        bag = (torch.arange(batch).view(-1, 1, 1) * heads + torch.arange(heads).view(1, -1, 1)) * (k + 3)
        phases = []
        for n in range(2 * (k + 1)):
            tail = k + 1 + n % 2
            outputs, tails = torch.tensor([*range(k + 1), tail]), torch.tensor([tail, (n + 1) % (k + 1)])
            phases.append(torch.cat([(bag + outputs).view(-1), (bag + tails).view(-1)]))
        return list(torch.stack(phases).to(device).unbind(0))
    return cached(("rposnet gathers", batch, heads, k, device), make)


def _offsets(batch: int, heads: int, k: int, device) -> Tensor:
    """The bags' offsets: B H bags of K+2 rows, then B H of 2."""
    def make():
        return torch.cat([torch.arange(0, batch * heads * (k + 2), k + 2),
                          batch * heads * (k + 2) + torch.arange(0, batch * heads * 2, 2)]).to(device)
    return cached(("rposnet bags", batch, heads, k, device), make)


def unfold(mixer, buffer: Dict[str, Tensor], n: int, dtype: torch.dtype):
    """Before step ``n`` of ``clipped_decoding_step`` (a pad has come): the ring taken apart into its state, the
    window (slot m mod K holds position m, n-K <= m < n), the tail's sum and the counts made from the step."""
    ring, index = buffer.pop("ring"), buffer.pop("ring_index")
    buffer.pop("ring_rows"), buffer.pop("ring_slots")
    batch, heads, k = index.size(0), index.size(1), index.size(2) - 3
    head_dim = ring.size(-1)
    flat = ring.view(-1, head_dim)
    if k:
        # window slot i: the position m in n-K..n-1 with m = i mod K, in ring slot m mod (K+1)
        held = torch.tensor([(n - k + (i - (n - k)) % k) % (k + 1) for i in range(k)], device=index.device)
        window = flat.index_select(0, index.index_select(2, held).view(-1)).view(batch, heads, k, head_dim)
        mixer.keep_state(buffer, "window", window.to(dtype), REUSE)
    else:
        mixer.keep_state(buffer, "window", ring.new_zeros(batch, heads, 0, head_dim, dtype=dtype), REUSE)
    acc = torch.promote_types(dtype, torch.float32)  # (the state's sums: fp32 also where the ring was narrower)
    tail = flat.index_select(0, index[:, :, k + 1 + n % 2].reshape(-1)).view(batch, heads, 1, head_dim)
    mixer.keep_state(buffer, "tail", tail.to(acc), COPY)
    mixer.keep_state(buffer, "counts", uniform_counts(k, n).to(ring.device, acc).repeat(batch, 1), COPY)


# The shared reader of the rings read through an index of rows per hypothesis (this module's and HC-SA's,
# ``hc_decoding.py``): a ring of S slots x A rows x H heads x D_h, seen as rows of D_h numbers, and a B x H x S
# index of the row that hypothesis b reads for head h in slot s.

def identity(batch: int, allocated: int, heads: int, slots: int, device) -> Tensor:
    """The B x H x S index of each hypothesis's own rows, ``(s * allocated + b) * H + h``: made once per shape."""
    def make():
        rows = torch.arange(slots).view(1, 1, -1) * allocated + torch.arange(batch).view(-1, 1, 1)
        return (rows * heads + torch.arange(heads).view(1, -1, 1)).to(device)
    return cached(("identity", batch, allocated, heads, slots, device), make)


def advance(index: Tensor, written: Tensor, allocated: int) -> Tensor:
    """The index after a step that wrote the slots ``written`` (1 x 1 x S, bool) for every hypothesis: there each
    reads its own rows."""
    batch, heads, slots = index.shape
    return torch.where(written, identity(batch, allocated, heads, slots, index.device), index)


def read(ring: Tensor, rows: Tensor, offsets: Tensor, weights: Tensor) -> Tensor:
    """The bags' weighted sums of ring rows (:func:`read_rows` of the ring seen as rows of D_h numbers)."""
    return read_rows(ring.view(-1, ring.size(-1)), rows, offsets, weights)


def read_rows(table: Tensor, rows: Tensor, offsets: Tensor, weights: Tensor) -> Tensor:
    """The bags' weighted sums of the rows of ``table`` (one ``embedding_bag``): bag i sums
    ``rows[offsets[i]:offsets[i+1]]``, each row times its entry of ``weights``; bags x D_h in the table's dtype.
    (torch's operator itself, in mode 0, the sum: ``F.embedding_bag`` would check in Python, per layer and step,
    arguments made here.)"""
    return torch.embedding_bag(table, rows, offsets, False, 0, False, weights)[0]


# Bounded rather than kept per call or per search: made per call (per step), they would cost their operators and
# host-to-device copies at every step, which is what keeping them saves; a search's state is one buffer per layer,
# with no place that every layer reads. A search reads few shapes at a time (its rows shrink as sentences finish),
# so the most recently used CACHED are kept, and a process that decodes many shapes holds no more.
CACHED = 16
_CACHE: "OrderedDict[tuple, object]" = OrderedDict()


def cached(key: tuple, make):
    """``make()`` for ``key`` (a shape and a device), kept while among the :data:`CACHED` keys last used."""
    made = _CACHE.get(key)
    if made is None:
        if len(_CACHE) >= CACHED:
            _CACHE.popitem(last=False)
        made = _CACHE[key] = make()
    else:
        _CACHE.move_to_end(key)
    return made
