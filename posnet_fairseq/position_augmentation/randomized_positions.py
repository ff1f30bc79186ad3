"""Randomized positions (Ruoss et al., ACL 2023, "Randomized Positional Encodings Boost Length Generalization
of Transformers", section 3).

In training, a sentence of n tokens takes, instead of the positions 0 .. n - 1, n positions drawn without
replacement from the larger range {0, ..., L - 1} and sorted::

    (p_1 < p_2 < ... < p_n) = sort(a uniform n-subset of {0, ..., L - 1})

so the order of the tokens is kept while the position values of sentences up to L tokens long are all
seen in training. L must be at least the longest training sentence. Each sentence, and each side, draws
its own subset.

At test time the positions are the plain 0 .. n - 1 by default. Ruoss et al. sample at test time too; a
draw per decoding step would make incremental decoding differ from teacher forcing, so the alternative
offered here (``--randomized-test-positions spread``) is deterministic: the expected positions of a draw,
the i-th smallest of a uniform n-subset of {0, ..., L - 1} having the mean (i + 1)(L + 1)/(n + 1) - 1::

    p_i = round((i + 1)(L + 1) / (n + 1)) - 1,    i = 0, 1, ...

with n the sentence's length, tokens and EOS. The decoder does not know its length while it decodes: its n
is the one its source's n_s leads to expect, (n_s - 1) / gamma + 1 with gamma the corpus's mean source /
mean target length (``--length-ratio``, computed from the training data when a randomized decoder is built for
training, and stored in its checkpoint).
A target longer than that goes on with the same spacing past L - 1.
"""
from typing import Optional

import torch
from torch import Tensor


def sampled(positions: Tensor, pad: Optional[Tensor], range_: int) -> Tensor:
    """For B x T 0-based real ``positions`` (pad columns: ``pad`` True), the sorted random positions from
    [0, ``range_``) of every sentence's tokens, in their order; pad columns get 0."""
    batch, width = positions.shape
    if width > range_:
        raise ValueError(f"--randomized-positions-range {range_}: a training batch holds a sentence of {width} "
                         "tokens; the range must be at least the longest training sentence")
    lengths = torch.full((batch, 1), width, device=positions.device) if pad is None else (~pad).sum(1, keepdim=True)
    # The indices of the `width` largest of L i.i.d. uniform keys: `width` distinct values in a uniformly random
    # order, so the first n of them are a uniform n-subset of [0, L).
    drawn = torch.rand(batch, range_, device=positions.device).topk(width, dim=1).indices
    unused = torch.arange(width, device=positions.device).unsqueeze(0) >= lengths
    chosen = drawn.masked_fill(unused, range_).sort(dim=1).values  # a sentence's n draws first, ascending
    out = chosen.gather(1, positions)
    return out if pad is None else out.masked_fill(pad, 0)


def spread(positions: Tensor, pad: Optional[Tensor], lengths: Tensor, range_: int) -> Tensor:
    """For B x T 0-based real ``positions`` (pad columns: ``pad`` True), the expected positions of a draw from
    [0, ``range_``) for a sentence of ``lengths`` (B) tokens (module docstring); pad columns get 0."""
    # A reciprocal, then products (the arithmetic spread_bound repeats on the host), in double.
    stride = (lengths.to(torch.float64).unsqueeze(1) + 1).reciprocal() * (range_ + 1)
    out = ((positions + 1).to(torch.float64) * stride).round().long() - 1
    return out if pad is None else out.masked_fill(pad, 0)


def spread_bound(width: int, shortest: int, range_: int) -> int:
    """One more than the largest :func:`spread` position of a token at most ``width`` - 1 in a sentence of at
    least ``shortest`` tokens: the position grows with the token's index and falls with the length. The same
    double arithmetic and half-to-even rounding as :func:`spread`, on the host."""
    return round(width * ((1 / (shortest + 1)) * (range_ + 1)))
