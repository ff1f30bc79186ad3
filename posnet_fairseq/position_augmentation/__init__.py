"""Position augmentation in training: the positions a side's tokens take in a training forward pass.

One flag per side chooses the method, ``--encoder-position-augmentation`` and
``--decoder-position-augmentation``: ``shape`` (``shape.py``: one random offset per sentence) or
``randomized`` (``randomized_positions.py``: sorted random positions from a larger range). The
positions it gives replace the plain ones in the side's token position embeddings (sinusoidal or learned;
``models/augmented_position_embeddings.py``) and in its q/k transforms (RoPE, xPos: ``content_attention.py``),
in training only, and only in a teacher-forced pass: at test time, and in any incremental decoding step, the
positions are exact, or with ``--randomized-test-positions spread`` a deterministic function of the position
and the sentence's length, so incremental decoding equals teacher forcing. The draw is made once per forward
pass of the side (``mixers/forward_context.py``), so every layer sees the same positions.
"""
from dataclasses import dataclass
from typing import Optional

from torch import Tensor

from .. import flags
from . import randomized_positions, shape

SIDES = ("encoder", "decoder")
METHODS = ("none", "shape", "randomized")
TEST_POSITIONS = ("plain", "spread")

FLAGS = flags.declare(
    "Position augmentation (training positions; randomized: their test-time spread)", "length-generalisation",
    *(flags.Flag(f"--{side}-position-augmentation", "none",
                 f"the {side}'s positions in training: shifted by one random offset per sentence (SHAPE) or "
                 "sorted random positions from a larger range (randomized); at test time the plain ones (randomized: "
                 "or spread, --randomized-test-positions)",
                 choices=METHODS) for side in SIDES),
    flags.Flag("--shape-max-offset", 100, "shape: the largest offset K; a sentence's offset is drawn from 0..K",
               type=int, metavar="K", check=flags.positive_integer),
    flags.Flag("--randomized-positions-range", 256, "randomized: positions are drawn from 0..L-1; L must be at "
               "least the longest training sentence", type=int, metavar="L", check=flags.positive_integer),
    flags.Flag("--randomized-test-positions", "plain", "randomized: the positions at test time, the plain 0..n-1 "
               "or spread, the expected positions of a draw for n tokens (the decoder's n: the target length its "
               "source leads to expect, by --length-ratio); set it in training too, so that validation (--patience, "
               "the best checkpoints) measures the positions the model is translated with; or at generation "
               "(--model-overrides)", choices=TEST_POSITIONS),
)


@dataclass(frozen=True)
class Augmentation:
    """One side's method with its parameter."""

    method: str
    max_offset: int
    range: int
    test_positions: str  # randomized: "plain" or "spread"

    def positions(self, positions: Tensor, pad: Optional[Tensor]) -> Tensor:
        """The training positions for B x T 0-based real ``positions`` (pad columns: ``pad`` True)."""
        if self.method == "shape":
            return shape.shifted(positions, pad, self.max_offset)
        return randomized_positions.sampled(positions, pad, self.range)

    @property
    def may_spread_at_test(self) -> bool:
        """Randomized positions: spreading them at test time is a generation-time choice (--model-overrides)."""
        return self.method == "randomized"

    @property
    def spreads_at_test(self) -> bool:
        return self.may_spread_at_test and self.test_positions == "spread"

    def spread(self, positions: Tensor, pad: Optional[Tensor], lengths: Tensor) -> Tensor:
        """The spread test positions (:attr:`spreads_at_test`) of B x T 0-based real ``positions`` in sentences of
        ``lengths`` (B) tokens."""
        return randomized_positions.spread(positions, pad, lengths, self.range)

    def spread_bound(self, width: int, shortest: int) -> int:
        """One more than the largest spread position of a token at most ``width`` - 1 in a sentence of at least
        ``shortest`` tokens."""
        return randomized_positions.spread_bound(width, shortest, self.range)

    def bound(self, width: int) -> int:
        """One more than the largest position :meth:`positions` can give in a batch ``width`` tokens wide."""
        return width + self.max_offset if self.method == "shape" else self.range


def for_side(args, side: str) -> Optional[Augmentation]:
    """The augmentation of ``side`` ("encoder" or "decoder") that ``args`` ask for, or None."""
    opts = FLAGS.options(args)
    method = getattr(opts, f"{side}_position_augmentation")
    if method == "none":
        return None
    return Augmentation(method, opts.shape_max_offset, opts.randomized_positions_range,
                        opts.randomized_test_positions)
