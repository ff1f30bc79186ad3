"""Self-attention decoding caches that grow in place.

Decoding, a self-attention mixer caches its keys and values (B x H x S x D_h,
``Mixer.split_heads`` layout): every decoder call appends its steps, and beam
search reorders the batch at every step. Appending with ``torch.cat`` and
reordering with ``index_select`` each allocate a new cache; on the CPU a
tensor of this size (52 MB at base size for 128 hypotheses at S = 200) is
allocated from fresh pages every time, and the page faults cost about five
times the copy (40-46 ms against 8 ms for one such tensor on this project's
machine). At 200 output tokens these allocations took 80% of a base
decoder's step, fairseq's MultiheadAttention included.

A growing cache allocates spare steps instead: the buffer holds the valid
view (the first S steps) of a B x H x C x D_h allocation, C >= S, an append
writes into the spare steps (a new allocation, with ``GROWTH`` spare steps,
only when they run out), and the beam reorder
(``Mixer.reorder_incremental_state``) copies into the allocation that the
previous reorder released, which the search's incremental state keeps until
then (so it is freed with the search). The numbers
are those of ``cat``/``index_select``: the same values, copied.

An append writes past the end of the view it is given, so a cache must have
one owner: fairseq's search uses an incremental state linearly, never
continuing two copies of one.
"""
from typing import Optional

from torch import Tensor

# Spare steps of a new allocation: a reallocation (one copy of the cache)
# every GROWTH steps, at most GROWTH steps of memory unused.
GROWTH = 32


def capacity(cache: Tensor) -> int:
    """The steps C of the allocation whose first S steps ``cache`` (B x H x S x D_h) views.

    C = S for a cache that is no such view (any tensor not made by :func:`append`).
    """
    _, heads, steps, dim = cache.shape
    capacity = cache.stride(1) // dim if dim else steps
    view_of_allocation = (cache.stride(3) == 1 and cache.stride(2) == dim and cache.stride(1) == capacity * dim
                          and cache.stride(0) == heads * capacity * dim and cache.storage_offset() == 0)
    return capacity if view_of_allocation and capacity > steps else steps


def allocation(cache: Tensor) -> Tensor:
    """The whole B x H x C x D_h allocation behind ``cache`` (``cache`` itself when C = S)."""
    spare_steps = capacity(cache)
    if spare_steps == cache.size(2):
        return cache
    batch, heads, _, dim = cache.shape
    return cache.as_strided((batch, heads, spare_steps, dim), cache.stride())


def append(cache: Optional[Tensor], steps: Tensor) -> Tensor:
    """``cache`` (B x H x S x D_h, or None) followed by ``steps`` (B x H x T x D_h) on the time dim.

    Written into the cache's spare steps where it has T of them; otherwise
    into a new allocation with ``GROWTH`` spare steps.
    """
    past = 0 if cache is None else cache.size(2)
    total = past + steps.size(2)
    if cache is None or capacity(cache) < total:
        batch, heads, _, dim = steps.shape
        whole = steps.new_empty(batch, heads, total + GROWTH, dim)
        if past:
            whole[:, :, :past] = cache
    else:
        whole = allocation(cache)
    extended = whole[:, :, :total]
    extended[:, :, past:] = steps
    return extended
