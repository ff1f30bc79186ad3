"""Values made once from tensors and kept until one of them changes (rPosNet's decoding rows, HC-SA's ring weights,
a distance bias's decoding table, made from its parameters), or grown meanwhile as their readers ask more of them
(aPosNet's causal weights: :meth:`DerivedCache.grow`).

A decoding step reads values derived from a module's tensor (an energy table, the head offsets) that are
the same at every step, so they are made once. The cache must notice when the tensor changes:

* replaced (a table grown or converted, ``module.to``, which swaps a parameter's data): the entry holds an
  alias of the tensor it was made from, so that memory stays allocated while the entry lives and a new
  tensor can never sit at the same address; a data pointer alone could be freed and handed out again;
* written in place (``load_state_dict`` copies into a precomputed table): the alias shares the tensor's
  version counter, which every in-place write bumps, and the entry records the count it was made at.

A write through ``tensor.data`` bypasses version counting in PyTorch, and so bypasses this cache too, as does
an in-place write of an inference tensor (made under ``torch.inference_mode``, e.g. a folded table grown while
decoding in it): such a tensor has no version counter, so only a replacement is noticed.
"""
from typing import Any, Callable, Dict, Hashable, Iterable, Union

from torch import Tensor


class DerivedCache:
    """Values made by ``make`` from a source tensor, or from several (a module's parameters), one per ``extra`` key
    (e.g. a device and a dtype)."""

    def __init__(self):
        self._aliases = ()  # the sources they were made from (detached: same memory, same version counters)
        self._signatures = None  # the sources' signatures (_signature) when the values were made
        self._values: Dict[Hashable, Any] = {}

    def get(self, source: Union[Tensor, Iterable[Tensor]], make: Callable[[], Any], extra: Hashable = None) -> Any:
        """The value made by ``make()`` for ``source`` and ``extra``, made anew if ``source`` changed since."""
        self._follow(source)
        if extra not in self._values:
            self._values[extra] = make()
        return self._values[extra]

    def grow(self, source: Union[Tensor, Iterable[Tensor]], fits: Callable[[Any], bool], make: Callable[[Any], Any],
             extra: Hashable = None) -> Any:
        """A value that its readers ask more of as they go (aPosNet's causal weights, ``prefix_decoding.py``): the
        one kept for ``source`` and ``extra`` where ``fits(value)``, else ``make(value)``, kept in its place
        (``value`` None where none is kept: made anew from nothing after ``source`` changed)."""
        self._follow(source)
        kept = self._values.get(extra)
        if kept is None or not fits(kept):
            kept = self._values[extra] = make(kept)
        return kept

    def _follow(self, source):
        """Drops the values made from ``source`` before it changed (replaced or written in place)."""
        sources = _sources(source)
        signatures = tuple(map(_signature, sources))
        if signatures != self._signatures:
            self._aliases = tuple(tensor.detach() for tensor in sources)
            self._signatures, self._values = signatures, {}

    def holds(self, source: Union[Tensor, Iterable[Tensor]]) -> bool:
        """Whether the kept values were made from ``source`` as it is now."""
        return tuple(map(_signature, _sources(source))) == self._signatures


def _sources(source):
    return (source,) if isinstance(source, Tensor) else tuple(source)


def _signature(tensor: Tensor):
    """What tells a tensor from another, and from itself before an in-place write, while an alias of it keeps its
    memory allocated: its address, version counter, layout, dtype and device (one tuple, compared at once: a
    decoding step compares those of every source in every layer)."""
    return tensor.data_ptr(), _version(tensor), tensor.shape, tensor.stride(), tensor.dtype, tensor.device


def _version(tensor: Tensor):
    """``tensor``'s version counter, or None for an inference tensor, which has none (reading it raises)."""
    return None if tensor.is_inference() else tensor._version
