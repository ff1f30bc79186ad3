"""What an encoder or decoder tells its mixers about the forward call under way.

A mixer's call signature is fairseq's MultiheadAttention's, which carries no positions and no source
lengths. What a mixer needs beyond it, and what must be the same for every layer of one call, the side
(encoder or decoder) sets here for the length of the call (:meth:`ForwardContext.call`):

* ``positions``: the B x T positions of the side's tokens when a training augmentation drew them
  (``position_augmentation``), else None (the plain positions from the padding mask);
* ``source_lengths``: the B source lengths (tokens, EOS included), for the mixers that asked for them
  (``needs_source_lengths``: RoPE scaling with ``--rope-scaling-factor auto``), else None. The decoder
  reads them from the encoder output, whose rows follow beam search.

A side holds one context, and every mixer built for it a reference (``MixerContext.forward_context``).
"""
import contextlib
from typing import Optional

from torch import Tensor


class ForwardContext:
    def __init__(self):
        self.positions: Optional[Tensor] = None
        self.source_lengths: Optional[Tensor] = None
        self.needs_source_lengths = False
        # How many modules of the side read ``positions`` (token position embeddings, q/k transforms):
        # an augmentation that no module reads is refused at model build.
        self.position_readers = 0

    @contextlib.contextmanager
    def call(self, positions: Optional[Tensor] = None, source_lengths: Optional[Tensor] = None):
        """``positions`` and ``source_lengths`` for the mixers, until the call ends."""
        self.positions, self.source_lengths = positions, source_lengths
        try:
            yield self
        finally:
            self.positions = self.source_lengths = None
