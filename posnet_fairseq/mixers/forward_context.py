"""What an encoder or decoder tells its mixers about the forward call under way.

A mixer's call signature is fairseq's MultiheadAttention's, which carries no positions and no source
lengths. What a mixer needs beyond it, and what must be the same for every layer of one call, the side
(encoder or decoder) sets here for the length of the call (:meth:`ForwardContext.call`):

* ``positions``: the B x T positions of the side's tokens when a training augmentation drew them or a
  randomized side spreads them at test time (``position_augmentation``; in an incremental decoding step, B x 1:
  the step's own), else None (the plain positions from the padding mask);
* ``position_bound``: with ``positions``, one more than the largest of them, known on the host, so that a
  position table is sized or checked without reading the device;
* ``source_lengths``: the B source lengths (tokens, EOS included), for the mixers that asked for them
  (``needs_source_lengths``: RoPE scaling with ``--rope-scaling-factor auto``), else None. The decoder
  reads them from the encoder output, whose rows follow beam search.

A side holds one context, and every mixer built for it a reference (``MixerContext.forward_context``).
Work that depends only on the call's positions and shapes (position grids, masks, RoPE's rotation) is
the same in every layer: :meth:`ForwardContext.shared` computes it once per call for all of them, since on
a GPU every operator is a kernel launch and the step is bound by launches (issue 48). Work that differs
between layers in their parameters only (TISA's kernel sums, PosNet's training energies) is made once for
all of them too, by the first layer, from the modules of every layer that :meth:`ForwardContext.register`
lists.
"""
import contextlib
from typing import Optional

from torch import Tensor


class ForwardContext:
    def __init__(self):
        self.positions: Optional[Tensor] = None
        self.position_bound: Optional[int] = None
        self.source_lengths: Optional[Tensor] = None
        self.needs_source_lengths = False
        # How many modules of the side read ``positions`` (token position embeddings, q/k transforms):
        # an augmentation that no module reads is refused at model build.
        self.position_readers = 0
        # key -> (anchor, value) of shared(), while a call is under way (None outside one)
        self._shared = None
        # kind -> the modules of that kind in the side's layers, in layer order (register)
        self._members = {}

    def register(self, kind, module) -> list:
        """Lists ``module`` among the side's modules of ``kind`` (a hashable) and returns that list: the layers'
        modules of a kind whose work :meth:`shared` makes for all of them at once (TISA's scorers; PosNet's
        mixers of one group, ``posnet_layers.py``)."""
        members = self._members.setdefault(kind, [])
        members.append(module)
        return members

    def unregister(self, modules):
        """Forgets the lists of the kinds that hold any of ``modules``, modules swapped out of the side's layers
        (posnet-precompute's table forms, in place): the next module of such a kind to register starts a new
        list; a list handed out stays as it is with the modules that hold it."""
        gone = {id(module) for module in modules}
        self._members = {kind: members for kind, members in self._members.items()
                         if not any(id(member) in gone for member in members)}

    @property
    def in_call(self) -> bool:
        """Whether a call is under way (:meth:`shared` then makes a value once for every layer)."""
        return self._shared is not None

    def shared(self, key, make, anchor=None):
        """``make()``, made once per call for every layer that asks with the same ``key`` and the same
        ``anchor`` (an input tensor the value depends on, compared by identity: the padding mask every
        layer of a side is given); made afresh outside a call."""
        if self._shared is None:
            return make()
        entry = self._shared.get(key)
        if entry is None or entry[0] is not anchor:
            entry = self._shared[key] = (anchor, make())
        return entry[1]

    @contextlib.contextmanager
    def call(self, positions: Optional[Tensor] = None, position_bound: Optional[int] = None,
             source_lengths: Optional[Tensor] = None):
        """``positions`` with their ``position_bound``, and ``source_lengths``, for the mixers, until the call
        ends."""
        self.positions, self.position_bound, self.source_lengths = positions, position_bound, source_lengths
        self._shared = {}
        try:
            yield self
        finally:
            self.positions = self.position_bound = self.source_lengths = self._shared = None
