"""Self-attention decoding caches without an allocation per step.

Decoding, a self-attention mixer caches its keys and values (B x H x S x D_h,
``Mixer.split_heads`` layout): every decoder call appends its steps, and beam
search reorders the batch before every step. fairseq's MultiheadAttention
appends with ``torch.cat`` and reorders with ``index_select``, two copies of
the cache and two new allocations per step; on the CPU a tensor of this size
(52 MB at base size for 128 hypotheses at S = 200) comes from fresh pages at
every allocation, and the page faults cost about five times the copy (40-46 ms
against 8 ms for one such tensor on this project's machine). At 200 output
tokens these allocations took 80% of a base decoder's step.

Here the beam reorder is the one copy per step, and it writes into memory
the search already holds:

* the reorder (``state_reorder.GROW``, declared by
  ``Mixer.cache_self_attention``) copies the cache, in the new beam order,
  into the spare memory that the previous reorder released (the released
  tensor, kept in the search's incremental state, so it is freed with the search),
  laid out as B x H x (S + 1) x D_h (n x B x H x (S + 1) x D_h for n caches
  side by side, ``state_reorder.part``): the extra step is room for the next
  append;
* :func:`append` writes the next steps into that room, so the cache is
  contiguous again; where there is no room (the first step, a block of
  several steps, decoding without reorders) it allocates anew with ``GROWTH``
  spare steps.

The cached values are those of ``cat``/``index_select``: the same numbers,
copied. :func:`append` writes past the end of the view it is given and the
reorder into memory the cache no longer uses, so a cache has one owner:
fairseq's search uses an incremental state linearly, never continuing two
copies of one.
"""
from typing import Optional

import torch
from torch import Tensor

# Spare steps of a new allocation: a reallocation (one copy of the cache)
# every GROWTH steps, at most GROWTH steps of memory unused.
GROWTH = 32


def capacity(cache: Tensor) -> int:
    """The steps C of the allocation whose first S steps ``cache`` (... x S x D_h: time on dim -2) views.

    C = S for a cache that is no such view (any tensor not made here).
    """
    *outer, steps, dim = cache.shape
    capacity = cache.stride(-3) // dim if dim and outer else steps
    expected = capacity * dim
    view_of_allocation = cache.stride(-1) == 1 and cache.stride(-2) == dim
    for size, stride in zip(reversed(outer), reversed(cache.stride()[:-2])):
        view_of_allocation = view_of_allocation and stride == expected
        expected *= size
    return capacity if view_of_allocation and capacity > steps else steps


def append(cache: Optional[Tensor], steps: Tensor) -> Tensor:
    """``cache`` (... x S x D_h, or None) followed by ``steps`` (... x T x D_h) on the time dim (-2).

    Written into the cache's spare steps where it has T of them; otherwise
    into a new allocation with ``GROWTH`` spare steps.
    """
    past = 0 if cache is None else cache.size(-2)
    total = past + steps.size(-2)
    *outer, _, dim = steps.shape
    if cache is not None and capacity(cache) >= total:
        extended = cache.as_strided((*outer, total, dim), cache.stride())
    else:
        extended = steps.new_empty(*outer, total + GROWTH, dim).narrow(-2, 0, total)
        if past:
            extended.narrow(-2, 0, past).copy_(cache)
    extended.narrow(-2, past, steps.size(-2)).copy_(steps)
    return extended
