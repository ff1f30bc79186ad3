"""rPosNet's decoding state for rows without pads, kept in write order and read through beam indices (PosNet
paper, Eq. 4 and 10; docs/constant-cost-decoding.md).

While no row of a search has had a pad key (beam search), every row attends at step n with the same weights,
which depend on n only and are made once per table of energies (:func:`bag_weights`): the key at distance
d < K with its own energy, the keys at distance >= K (the tail) each with the tail's weight over their count.
The state of a layer:

* ``ring``, (K+3) x B x H x D_h, fp32 whatever the model's dtype: slot j <= K holds the value of the last
  position m <= n with m = j mod (K+1) (zeros before the start); slots K+1 and K+2 hold the tail's sum,
  written to each in turn (step n reads slot K+1 + n mod 2 and writes the other);
* ``ring_index``, B x (K+3) int64: for hypothesis b and slot j, the row ``j * B + b'`` of the ring that holds
  its value (b' the row the value was written for).

A beam reorder copies no ring, the largest state: it composes the index (``state_reorder.COMPOSED``:
``index[order]``, once for every layer). A step writes its value into slot n mod (K+1), and one
``embedding_bag`` reads, for every hypothesis and head, its K+2 rows with their weights (the output, Eq. 4) and
the tail's sum with the value now at distance K (the next tail's sum, written to the other tail slot). The
step's gather indices and weights are the same in every layer: made once per step (``Mixer.shared``).
"""
from typing import Dict, Tuple

import torch
import torch.nn.functional as F
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


def step(mixer, buffer: Dict[str, Tensor], n: int, v: Tensor, weights: Tensor) -> Tensor:
    """Step ``n`` of rows without pads: ``v`` B x H x 1 x D_h, ``weights`` the step's row of :func:`bag_weights`;
    returns the B x H x 1 x D_h output in ``v``'s dtype."""
    batch, heads, _, head_dim = v.shape
    k = (weights.numel() - 1) // heads - 2
    if "ring" not in buffer:  # (made here, only written in place)
        acc = torch.promote_types(v.dtype, torch.float32)
        mixer.keep_state(buffer, "ring", v.new_zeros(k + 3, batch, heads, head_dim, dtype=acc), INDEXED)
        start = mixer.shared(("ring_index", batch, k), lambda: _constants(batch, batch, heads, k, v.device)[0])
        mixer.keep_state(buffer, "ring_index", start, COMPOSED)
    ring, index = buffer["ring"], buffer["ring_index"]
    if batch > ring.size(1):
        raise ValueError(f"rPosNet decoding: a step of {batch} rows after a state of {ring.size(1)}: beam search "
                         "only drops rows")
    ring[n % (k + 1), :batch] = v[:, :, 0]
    rows, after = mixer.shared(("ring_rows", n, batch, ring.size(1)), lambda: _rows(index, n, ring.size(1), heads),
                               index)
    mixer.keep_state(buffer, "ring_index", after, COMPOSED)
    _, offsets, _, _, weight_map = _constants(batch, ring.size(1), heads, k, v.device)
    bag = weights.index_select(0, weight_map)  # (each layer its own energies)
    out = F.embedding_bag(rows, ring.view(-1, head_dim), offsets, mode="sum", per_sample_weights=bag)
    ring[k + 1 + (n + 1) % 2, :batch] = out[batch * heads:].view(batch, heads, head_dim)
    out = out[: batch * heads].view(batch, heads, 1, head_dim)
    return out if out.dtype == v.dtype else out.to(v.dtype)  # (an fp32 model: no call)


def _rows(index: Tensor, n: int, allocated: int, heads: int) -> Tuple[Tensor, Tensor]:
    """Step ``n``'s ring rows to read (``embedding_bag``'s input), and the index after the step: its slot and its
    next tail slot are the rows written for each hypothesis."""
    batch, k = index.size(0), index.size(1) - 3
    identity, _, gather, head, _ = _constants(batch, allocated, heads, k, index.device)
    written, columns = _step_columns(k, n, index.device)
    after = torch.where(written, identity, index)
    rows = torch.add(head, after.index_select(1, columns).view(-1).index_select(0, gather), alpha=heads)
    return rows, after


def _step_columns(k: int, n: int, device) -> Tuple[Tensor, Tensor]:
    """Step ``n``'s slots written (1 x (K+3): its value's and the next tail's) and the index columns its bags
    read (K+4: slots 0..K and the tail for the output; the tail and the slot now at distance K for the next tail)."""
    key = (k, n % (k + 1), n % 2, device)
    made = _STEP_COLUMNS.get(key)
    if made is None:
        slot, tail = n % (k + 1), k + 1 + n % 2
        written = torch.zeros(1, k + 3, dtype=torch.bool)
        written[0, [slot, k + 1 + (n + 1) % 2]] = True
        columns = torch.tensor(list(range(k + 1)) + [tail, tail, (n + 1) % (k + 1)])
        made = _STEP_COLUMNS[key] = (written.to(device), columns.to(device))
    return made


_STEP_COLUMNS: Dict[tuple, Tuple[Tensor, Tensor]] = {}


def _constants(batch: int, allocated: int, heads: int, k: int, device) -> Tuple[Tensor, ...]:
    """What a step of ``batch`` rows over a ring of ``allocated`` rows per slot reads, made once per shape:
    the identity index (B x (K+3): ``j * allocated + b``), the bags' offsets (B H bags of K+2 rows, then B H of
    2), and for the flat bag input (b, h, column), the position in the B x (K+4) step columns, the head, and the
    entry of the weights row (:func:`bag_weights`)."""
    key = (batch, allocated, heads, k, device)
    made = _CONSTANTS.get(key)
    if made is None:
        if len(_CONSTANTS) > 16:  # a search's batch shrinks as sentences finish: keep a few shapes
            _CONSTANTS.clear()
        b = torch.arange(batch).view(batch, 1, 1)
        h = torch.arange(heads).view(1, heads, 1)
        out_cols, tail_cols = torch.arange(k + 2).view(1, 1, -1), torch.arange(k + 2, k + 4).view(1, 1, -1)
        gather = torch.cat([(b * (k + 4) + out_cols).expand(batch, heads, -1).reshape(-1),
                            (b * (k + 4) + tail_cols).expand(batch, heads, -1).reshape(-1)])
        head = torch.cat([h.expand(batch, heads, k + 2).reshape(-1), h.expand(batch, heads, 2).reshape(-1)])
        weight_map = torch.cat([(h * (k + 2) + out_cols).expand(batch, heads, -1).reshape(-1),
                                torch.full((batch * heads * 2,), heads * (k + 2))])
        offsets = torch.cat([torch.arange(0, batch * heads * (k + 2), k + 2),
                             batch * heads * (k + 2) + torch.arange(0, batch * heads * 2, 2)])
        identity = torch.arange(k + 3).unsqueeze(0) * allocated + torch.arange(batch).unsqueeze(1)
        made = _CONSTANTS[key] = tuple(t.to(device) for t in (identity, offsets, gather, head, weight_map))
    return made


_CONSTANTS: Dict[tuple, Tuple[Tensor, ...]] = {}


def unfold(mixer, buffer: Dict[str, Tensor], n: int, dtype: torch.dtype):
    """Before step ``n`` of ``clipped_decoding_step`` (a pad has come): the ring taken apart into its state, the
    window (slot m mod K holds position m, n-K <= m < n), the tail's sum and the counts made from the step."""
    ring, index = buffer.pop("ring"), buffer.pop("ring_index")
    _, allocated, heads, head_dim = ring.shape
    batch, k = index.size(0), index.size(1) - 3
    flat = ring.view(-1, heads, head_dim)
    if k:
        # window slot i: the position m in n-K..n-1 with m = i mod K, in ring slot m mod (K+1)
        slots = torch.tensor([(n - k + (i - (n - k)) % k) % (k + 1) for i in range(k)], device=index.device)
        window = flat.index_select(0, index.index_select(1, slots).view(-1)).view(batch, k, heads, head_dim)
        mixer.keep_state(buffer, "window", window.transpose(1, 2).to(dtype, memory_format=torch.contiguous_format),
                         REUSE)
    else:
        mixer.keep_state(buffer, "window", ring.new_zeros(batch, heads, 0, head_dim, dtype=dtype), REUSE)
    tail = flat.index_select(0, index[:, k + 1 + n % 2]).unsqueeze(2)
    mixer.keep_state(buffer, "tail", tail, COPY)
    mixer.keep_state(buffer, "counts", uniform_counts(k, n).to(ring.device, ring.dtype).repeat(batch, 1), COPY)
