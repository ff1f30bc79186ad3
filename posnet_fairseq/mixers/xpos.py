"""``xpos``: extrapolatable position embedding (Sun et al., 2022, "A Length-Extrapolatable Transformer").

RoPE (``rope.py``) with an exponential scale on top of the rotation, the
query's scale the inverse of the key's, so that the logit of query n and
key m decays with their distance (section 3)::

    f_q(q, n) = R_{Theta,n} q * zeta^(n / B)
    f_k(k, m) = R_{Theta,m} k * zeta^(-m / B)
    f_q(q, n)^T f_k(k, m) = q^T R_{Theta,m-n} k * zeta^((n - m) / B)

per pair i = 0 .. d/2 - 1 of dimensions, with

    zeta_i = (i / (d/2) + gamma) / (1 + gamma),   gamma = 0.4,   B = 512 (the scale base)

zeta_i lies in [gamma / (1 + gamma), 1): the fast-turning pairs (small i)
decay fastest, which is what the paper adds to RoPE to stabilise the
attention resolution at long distances. The values are those of the
authors' release (torchscale's ``XPOS``): zeta_i = (2i + 0.4 d) / (1.4 d),
the query scaled by zeta^(n/B), the key by its inverse. The authors shift
the positions of a block by half its length before the power, to keep the
factors near 1; any constant shift cancels in the product, and a fixed
origin (0, the first token) keeps each cached key's factor independent of
how far decoding has got, so decoding stays exact.

**Causal attention only** (``decoder_self``): zeta^((n - m) / B) <= 1
decays for keys before the query (n >= m), and would *grow* without bound
for keys after it, so a bidirectional encoder has no use for it; its
presets put RoPE in the encoder. Range: the key's factor at position m is
at most (1.4 / 0.4)^(m / 512); in fp16 (largest value 65,504) that holds
for m up to about 4,500 tokens, far beyond the longest target fairseq
accepts by default (1,024). The paper's blockwise causal attention at
inference is not implemented: a translation target is one block.

The q/k hook of :class:`ContentAttention` is asymmetric for this scheme:
``rotate`` (queries) and ``rotate_key`` (keys) apply the two factors; the
decoding cache holds scaled, rotated keys (a key's factor depends on its
own position only). No parameters; the rotation's base is RoPE's flag
(``--rope-base``).
"""
from typing import Tuple

import torch
from torch import Tensor

from .. import families, flags
from . import rope
from .registry import register_mixer
from .content_attention import ContentAttention, scheme_family

FLAGS = flags.declare(
    "xPos (extrapolatable position embedding)", "position-schemes",
    flags.Flag("--xpos-gamma", 0.4, "xpos: zeta_i = (i / (d_h/2) + gamma) / (1 + gamma), the decay of pair i "
               "(Sun et al. 2022: 0.4)", type=float, metavar="GAMMA", check=flags.positive_number),
    flags.Flag("--xpos-scale-base", 512.0, "xpos: the scale base B: the logit of keys n - m back is scaled by "
               "zeta^((n - m) / B) (Sun et al. 2022: 512)", type=float, metavar="B", check=flags.positive_number),
)

# Its presets (families.py): xPos in the decoder self-attention, RoPE in the encoder's, at every size.
families.declare(__name__, "xPos", "position-schemes", scheme_family(
    "xpos_transformer", "xpos", "xPos in the decoder self-attention, RoPE in the encoder's, no position embeddings",
    encoder_mixer="rope"))


class XPos(rope.Rotary):
    """R_{Theta,n} x zeta^(n/B) on queries, R_{Theta,m} x zeta^(-m/B) on keys (fp32)."""

    def __init__(self, head_dim: int, base: float = 10000.0, gamma: float = 0.4, scale_base: float = 512.0):
        super().__init__(head_dim, base)
        self.gamma, self.scale_base = gamma, scale_base

    def decay(self, device) -> Tensor:
        """zeta_i, i = 0 .. d/2 - 1, fp32, computed on use like the frequencies."""
        pairs = torch.arange(self.head_dim // 2, device=device, dtype=torch.float32)
        return (pairs / (self.head_dim / 2) + self.gamma) / (1 + self.gamma)

    def rotation(self, positions: Tensor, device, source_lengths=None, dtype=torch.float32) -> Tensor:
        """The query factor R_{Theta,n} zeta^(n/B) and the key factor R_{Theta,n} zeta^(-n/B) as matrices
        (``rope.rotation_matrices``), stacked (2 x T x P x d x d), in ``dtype`` (no RoPE scaling:
        ``source_lengths`` are not used)."""
        cos, sin = self.turn(positions, device)
        scale = self.decay(device) ** (positions.float()[:, :, None] / self.scale_base)  # B x T x d/2
        return torch.stack((rope.rotation_matrices(cos * scale, sin * scale, dtype),
                            rope.rotation_matrices(cos / scale, sin / scale, dtype)))

    def rotate(self, x: Tensor, rotation: Tensor) -> Tensor:
        return super().rotate(x, rotation[0])

    def rotate_key(self, x: Tensor, rotation: Tensor) -> Tensor:
        return super().rotate(x, rotation[1])

    def extra_repr(self):
        return f"{super().extra_repr()}, gamma={self.gamma:g}, scale_base={self.scale_base:g}"


@register_mixer("xpos", sites=("decoder_self",))
class XPosAttention(ContentAttention):
    """Content attention with xPos: RoPE with an exponential decay, the key's scale the inverse of the query's."""

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        xpos = XPos(ctx.embed_dim // ctx.num_heads, ctx.options(rope.FLAGS).rope_base, opts.xpos_gamma,
                    opts.xpos_scale_base)
        return cls.at_site(ctx, transform=xpos)
