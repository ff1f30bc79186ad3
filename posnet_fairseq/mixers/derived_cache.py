"""Values made once from tensors and kept until one of them changes (rPosNet's decoding rows, HC-SA's ring weights,
a distance bias's decoding table, content attention's joined decoding projections).

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
from typing import Any, Callable, Dict, Hashable, Sequence, Union

from torch import Tensor


class DerivedCache:
    """Values made by ``make`` from a source tensor, or from a sequence of them (a module's parameters), one per
    ``extra`` key (e.g. a device and a dtype)."""

    def __init__(self):
        self._aliases = None  # the sources they were made from (detached: same memory, same version counters)
        self._versions = ()
        self._values: Dict[Hashable, Any] = {}

    def get(self, source: Union[Tensor, Sequence[Tensor]], make: Callable[[], Any], extra: Hashable = None) -> Any:
        """The value made by ``make()`` for ``source`` and ``extra``, made anew if ``source`` changed since."""
        sources = _sources(source)
        if not self._holds(sources):
            self._aliases = tuple(tensor.detach() for tensor in sources)
            self._versions, self._values = tuple(_version(tensor) for tensor in sources), {}
        if extra not in self._values:
            self._values[extra] = make()
        return self._values[extra]

    def holds(self, source: Union[Tensor, Sequence[Tensor]]) -> bool:
        """Whether the kept values were made from ``source`` as it is now."""
        return self._holds(_sources(source))

    def _holds(self, sources) -> bool:
        aliases = self._aliases
        return aliases is not None and len(aliases) == len(sources) and all(
            _same(alias, version, tensor) for alias, version, tensor in zip(aliases, self._versions, sources))


def _sources(source):
    return (source,) if isinstance(source, Tensor) else tuple(source)


def _same(alias: Tensor, version, source: Tensor) -> bool:
    """Whether ``source`` is, as it is now, the tensor ``alias`` was taken from at ``version``."""
    return (alias.data_ptr() == source.data_ptr() and _version(alias) == version and _version(source) == version
            and alias.shape == source.shape and alias.stride() == source.stride() and alias.dtype == source.dtype
            and alias.device == source.device)


def _version(tensor: Tensor):
    """``tensor``'s version counter, or None for an inference tensor, which has none (reading it raises)."""
    return None if tensor.is_inference() else tensor._version
