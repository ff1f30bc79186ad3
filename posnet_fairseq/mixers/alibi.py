"""``alibi``: attention with linear biases (Press, Smith & Lewis, ICLR 2022, "Train Short, Test Long").

No position embeddings; each head h adds a fixed penalty proportional to the
key-query distance to its scaled logits (section 3; the paper numbers no
equation for it)::

    softmax(q_i K^T / sqrt(d_h) + m_h * [-(i-1), ..., -2, -1, 0])

The slopes m_h are a geometric sequence that starts at 2^(-8/n) with that
ratio, for n heads a power of two (n = 8: 1/2, 1/4, ..., 1/256). For other
head counts (section 3, footnote; the authors' ``get_slopes``) the first
2^floor(log2 n) slopes are those of that power of two, and the rest are
every other slope of the next power of two (its 1st, 3rd, 5th, ...): the
slopes lie between the ones already taken.

The paper's model is a causal language model. For the encoder's
bidirectional self-attention the bias is the symmetric ``-m_h |j - i|``, the
form the first author gives for encoder attention (ofirpress/
attention_with_linear_biases, issue 5); under the causal mask (decoder) it
is the paper's bias. Cross attention: no shared position axis (see
``content_attention.py``). No parameters and no flags.
"""
import functools
import math
from typing import List, Tuple

import torch
from torch import Tensor

from .. import families
from .registry import register_mixer
from .content_attention import ContentAttention, DistanceBias, scheme_family

# Its presets (families.py): the scheme in every self-attention, at every size.
families.declare(__name__, "ALiBi", "position-schemes", scheme_family(
    "alibi_transformer", "alibi", "ALiBi in every self-attention, no position embeddings"))


def alibi_slopes(num_heads: int) -> List[float]:
    """m_1..m_n of Press et al. (section 3), for any number of heads n >= 1."""
    if num_heads < 1:
        raise ValueError(f"alibi needs at least one attention head, got {num_heads}")
    power = 2 ** int(math.floor(math.log2(num_heads)))
    base = 2.0 ** (-8.0 / power)
    slopes = [base ** (h + 1) for h in range(power)]
    if power < num_heads:
        # Every other slope of the next power of two: exponents -8/(2 power) * (1, 3, 5, ...).
        finer = 2.0 ** (-8.0 / (2 * power))
        slopes += [finer ** (2 * h + 1) for h in range(num_heads - power)]
    return slopes


@functools.lru_cache(maxsize=None)
def slope_column(slopes: Tuple[float, ...], device) -> Tensor:
    """The fixed ``slopes`` m_h as an H x 1 fp32 column on ``device``, made once per device: a copy of them to a
    GPU at every call is a host-to-device copy, which waits for the GPU's queue to drain (issue 48)."""
    with torch.inference_mode(False):  # a normal tensor even when first asked for while decoding
        return torch.tensor(slopes, dtype=torch.float32, device=device).unsqueeze(1)


class AlibiBias(DistanceBias):
    """-m_h |j - i| for every head (fp32); no parameters."""

    FIXED = True
    ELEMENTWISE = True

    def __init__(self, num_heads: int):
        super().__init__()
        self.slopes = tuple(alibi_slopes(num_heads))  # a tuple, not a buffer: a half-precision model keeps them exact

    def profile(self, distances: Tensor) -> Tensor:
        return -slope_column(self.slopes, distances.device) * distances.abs().float().unsqueeze(0)

    def extra_repr(self):
        return f"heads={len(self.slopes)}"


@register_mixer("alibi", sites=("encoder_self", "decoder_self"))
class AlibiAttention(ContentAttention):
    """Content attention with ALiBi's linear distance penalties (Press et al. 2022, section 3)."""

    BIAS = AlibiBias
