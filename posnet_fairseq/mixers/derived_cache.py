"""Values made once from a tensor and kept until that tensor changes (rPosNet's decoding rows, HC-SA's ring weights).

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
from typing import Any, Callable, Dict, Hashable

from torch import Tensor


class DerivedCache:
    """Values made from one source tensor by ``make``, one per ``extra`` key (e.g. a device and a dtype)."""

    def __init__(self):
        self._alias = None  # the source it was made from (detached: same memory, same version counter)
        self._version = -1
        self._values: Dict[Hashable, Any] = {}

    def get(self, source: Tensor, make: Callable[[], Any], extra: Hashable = None) -> Any:
        """The value made by ``make()`` for ``source`` and ``extra``, made anew if ``source`` changed since."""
        if not self.holds(source):
            self._alias, self._version, self._values = source.detach(), _version(source), {}
        if extra not in self._values:
            self._values[extra] = make()
        return self._values[extra]

    def holds(self, source: Tensor) -> bool:
        """Whether the kept values were made from ``source`` as it is now."""
        alias = self._alias
        return (alias is not None and alias.data_ptr() == source.data_ptr() and _version(alias) == self._version
                and _version(source) == self._version and alias.shape == source.shape
                and alias.stride() == source.stride() and alias.dtype == source.dtype
                and alias.device == source.device)


def _version(tensor: Tensor):
    """``tensor``'s version counter, or None for an inference tensor, which has none (reading it raises)."""
    return None if tensor.is_inference() else tensor._version
