"""How a beam reorder copies each decoding-state tensor of a mixer: the one way to reuse released memory.

Beam search reorders the decoding state before every step
(``Mixer.reorder_incremental_state``): each state tensor is copied in the
new beam order, and the tensor it replaces is no longer read. For a large
state reordered at every step (the key/value cache, rPosNet's K-value window)
a fresh allocation costs more than the copy (``growing_cache.py`` has the
figures), so such a tensor is copied into the memory the previous reorder
released instead: that memory is kept in the search's incremental state
under ``name + SPARE`` (freed with the search, never shared between two
searches), and the released tensor's memory becomes the next reorder's spare.

This is safe only for a tensor that the mixer created and that nothing else
refers to (no view of an input, of the encoder's output or of another state
tensor), so every state tensor is declared where it is created, with
``Mixer.keep_state(buffer, name, tensor, how)``: ``how`` is one of

* :data:`COPY`: into fresh memory (small state, or state that may alias
  memory the mixer does not own);
* :data:`REUSE`: into the released memory, same shape (rPosNet's and
  LightConv's window, written in place by ``clipped_decoding.py``);
* :data:`GROW`: into the released memory with one spare step on the time dim
  (-2) for the next append, which ``growing_cache.append`` writes in place,
  so the cache stays contiguous;
* :func:`part`: not copied itself: a view of another state tensor that holds
  it side by side with others (a layer's key and value caches,
  ``Mixer.append_self_attention``), remade from that tensor's copy, so that
  one ``index_select`` reorders them all;
* :data:`SHARED`: not copied: the same for every hypothesis, as the step
  count (all hypotheses of a search decode the same step), a Python int, so
  that neither making nor reading it costs an operator or waits for the
  device (rPosNet's, HC-SA's, AAN+ AVG's);
* :data:`INDEXED`: not copied: kept in the rows it was written to and read
  through an index of rows per hypothesis (rPosNet's ring, ``indexed_ring.py``);
* :data:`PER_SENTENCE`: the same in every hypothesis of a sentence (made from
  the encoder output, which beam search repeats per hypothesis: aPosNet's
  cross-attention values, key positions and padding, rPosNet's sources and
  their prefix and suffix sums): a reorder that keeps
  the number of rows moves hypotheses within their sentences (beam search's
  parents; fairseq's MultiheadAttention skips its static keys and values
  then, on the same ground) and keeps it as it is; one that drops finished
  sentences copies the remaining rows, into fresh memory (the state may be
  the caller's tensor);
* :data:`COMPOSED`: a batch-first tensor that every layer holds, reordered,
  ``state[order]``, once for all of them (:func:`compose`), not once per layer:
  such an index (rPosNet's and HC-SA's rings, never written), or AAN+ AVG's
  means of every layer (``aan.py``), which each layer writes in place in its
  own slot between two reorders. What such a state needs, this kind gives: the
  composition is fresh memory (``index_select``: never the state itself, a
  view of it, or memory a reorder released, which another layer may still
  read), and it is handed out only within one reorder of every layer, which
  fairseq makes with a new order each time before any layer steps, so never
  after a write (``tests/test_aan.py``). (A kind of its own would change
  nothing: a reorder hands every composed kind to :func:`compose` alike.)

A reorder refuses a state tensor that was stored without a declaration
(``tests/test_state_reorder.py`` decodes every registered decoder mixer with
reorders). The copied values are those of ``index_select``.
"""
import functools
import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import Tensor

from .growing_cache import GROWTH

# The dim along which a state holds its parts (part) side by side: n x B x H x S x D_h (the batch on dim 1), so
# that each part is a B x H x S x D_h cache whose matrices lie one after the other, as the batched products of
# attention read them fastest (with the parts interleaved per head, B x H x n x S x D_h, the products of one
# decoding step took 1.6-2.4x as long on the CPU at S = 30-200, base, 128 rows; B x n x H x S x D_h made them
# copy the cache).
BESIDE = 0

# Suffix of the buffer key under which a reorder keeps the memory it released, the next one's spare.
SPARE = ".spare"


@dataclass(frozen=True)
class Reorder:
    """How a beam reorder copies one state tensor (B x ...: the batch on dim 0)."""

    reuse: bool  # into the memory the previous reorder of this name released
    room: int = 0  # spare steps on the time dim (-2) of the copy (B x ... x S x D_h), for the next append
    slack: int = 0  # further steps of an allocation made anew: it then fits this many more reorders
    shared: bool = False  # one value for the whole batch (no batch dim), or read through an index: kept as it is
    composed: bool = False  # an index of rows, composed with the order (compose)
    # (key, index): a view, ``state.select(BESIDE, index)``, of the state under ``key``, remade from its copy
    part: Optional[Tuple[str, int]] = None
    batch: int = 0  # the dim of the batch: 1 in a state that holds parts (BESIDE)
    per_sentence: bool = False  # the same within a sentence's hypotheses: copied only when rows are dropped


COPY = Reorder(reuse=False)
REUSE = Reorder(reuse=True)
# One reallocation every GROWTH steps of a cache that grows by one step per reorder.
GROW = Reorder(reuse=True, room=1, slack=GROWTH)
# GROW, for a state that holds parts side by side (BESIDE): the batch on dim 1.
GROW_PARTS = Reorder(reuse=True, room=1, slack=GROWTH, batch=1)
SHARED = Reorder(reuse=False, shared=True)
INDEXED = Reorder(reuse=False, shared=True)
COMPOSED = Reorder(reuse=False, composed=True)
PER_SENTENCE = Reorder(reuse=False, per_sentence=True)


@functools.lru_cache(maxsize=None)
def part(key: str, index: int) -> Reorder:
    """How a reorder remakes ``state.select(BESIDE, index)`` of the state under ``key``: from that state's copy, so
    that the states that one tensor holds side by side are reordered by one copy (the key and the value
    caches of a layer, ``Mixer.append_self_attention``). One declaration per key and index."""
    return Reorder(reuse=False, part=(key, index))


# The last composition, (index, order, index[order]): holding both keeps their ids from being reused.
_composed = [None]


def compose(index: Tensor, order: Tensor) -> Tensor:
    """``index[order]``: made once for the layers that hold the same ``index`` and are reordered with the same
    ``order`` (every layer of a search, in turn). Sound because fairseq makes a new order for every reorder and
    reorders every layer before any layer steps: a tensor written in place between two reorders (AAN+'s means)
    is composed anew with the next order."""
    last = _composed[0]
    if last is None or last[0] is not index or last[1] is not order:
        last = _composed[0] = (index, order, index.index_select(0, order))
    return last[2]


@functools.lru_cache(maxsize=4096)
def layout(rows: int, shape: Tuple[int, ...], how: Reorder) -> Tuple[Tuple[int, ...], Tuple[int, ...], int]:
    """The size of a state of ``shape`` with ``rows`` rows on its batch dim, and the row-major strides and the
    element count of an allocation with ``how.room`` more steps on the time dim (-2): made once per shape, not
    in every layer at every step."""
    size = tuple(rows if dim == how.batch else extent for dim, extent in enumerate(shape))
    strides, elements = [], 1
    for dim in range(len(size) - 1, -1, -1):
        strides.append(elements)
        elements *= size[dim] + how.room if dim == len(size) - 2 else size[dim]
    return size, tuple(strides[::-1]), elements


def reorder(state: Tensor, order: Tensor, spare: Optional[Tensor], how: Reorder) -> Tuple[Tensor, Tensor]:
    """``state`` in beam order ``order``, copied into the memory of ``spare`` (a tensor whose whole storage is
    free, or None: new memory) as ``how`` says. Returns the reordered state and the next spare: ``state``
    itself, whose storage this copy released.

    The copy is one ``index_select`` into a view made by one ``as_strided`` of the spare's storage: a reorder
    is paid at every step in every layer, and on a GPU its host time is the step's (issue 48)."""
    size, strides, elements = layout(order.shape[0], state.shape, how)
    if (spare is None or spare.dtype != state.dtype or spare.device != state.device
            or spare.untyped_storage().nbytes() < elements * spare.element_size()):
        spare = state.new_empty(elements + math.prod(size[:-2]) * how.slack * size[-1])
    return torch.index_select(state, how.batch, order, out=spare.as_strided(size, strides, 0)), state
