"""``rope``: rotary position embedding (Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding").

Queries and keys are rotated by their absolute position before the dot
product, pairwise in the paper's layout (dimensions 2i-1 and 2i form pair i,
i = 1..d/2), by the angle m theta_i at position m (Eq. 14, 15)::

    f_{q,k}(x_m, m) = R^d_{Theta,m} W_{q,k} x_m                          (Eq. 14)
    R^d_{Theta,m} = diag(rot(m theta_1), ..., rot(m theta_{d/2})),
    theta_i = base^(-2(i-1)/d), base = 10000                             (Eq. 15)

so that the logit depends on the positions only through their difference::

    q_m^T k_n = (W_q x_m)^T R^d_{Theta,n-m} (W_k x_n)                     (Eq. 16)

computed elementwise as in Eq. 34:
``R x = x * cos(m theta) + rotate_pairs(x) * sin(m theta)`` with
``rotate_pairs(x1, x2, ...) = (-x2, x1, ...)``. d is the head dimension; no
parameters. At generation time a trained model's frequencies can be scaled
for lengths beyond training (position interpolation, NTK-aware, YaRN:
``rope_scaling.py``). Many codebases (GPT-NeoX, LLaMA) pair dimension i with i + d/2
instead: a fixed permutation of W_q and W_k's rows, i.e. the same model
family, not the same parameters.

The rotation is the q/k-transform hook of :class:`ContentAttention`; the
decoding cache holds rotated keys (a key's rotation depends on its own
position only). Self-attention sites only: the RoFormer paper rotates
queries and keys of one sequence, and between a target and a source position
there is no shared position axis for Eq. 16 to measure.
"""
from typing import Optional

import torch
from torch import Tensor, nn

from .. import families, flags
from .registry import register_mixer
from .content_attention import ContentAttention, scheme_family
from .rope_scaling import FLAGS as SCALING_FLAGS, RopeScaling

FLAGS = flags.declare(
    "RoPE (rotary position embedding)", "position-schemes",
    flags.Flag("--rope-base", 10000.0, "rope: the base of the rotation frequencies theta_i = base^(-2(i-1)/d_h) "
               "(RoFormer Eq. 15)", type=float, metavar="BASE",
               check=lambda base: None if base > 1 else "must be greater than 1"),
)

# Its presets (families.py): the scheme in every self-attention, at every size.
families.declare(__name__, "RoPE", "position-schemes", scheme_family(
    "rope_transformer", "rope", "RoPE in every self-attention, no position embeddings"))


class Rotary(nn.Module):
    """R^d_{Theta,m} applied to B x H x T x d_h vectors at B x T positions m (Eq. 15, 34), in fp32."""

    def __init__(self, head_dim: int, base: float = 10000.0, scaling: RopeScaling = RopeScaling()):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rope rotates pairs of dimensions: the head dimension {head_dim} "
                             "(embedding dimension / attention heads) must be even")
        self.head_dim, self.base, self.scaling = head_dim, base, scaling
        # (device, factor) -> theta': a plain attribute, not a buffer, so that a half-precision model keeps
        # them in fp32; kept because incremental decoding asks for them at every step.
        self._fixed_frequencies = {}

    def frequencies(self, device, s=None) -> Tensor:
        """theta_i, i = 1..d/2 (Eq. 15), changed by the inference-time scaling if any (``rope_scaling.py``;
        ``s``: its factor, a number or B x 1 per sentence, then B x d/2), in fp32."""
        if torch.is_tensor(s):  # per sentence (--rope-scaling-factor auto): new with every batch
            return self._frequencies(device, s)
        key = (device, s)
        if key not in self._fixed_frequencies:
            self._fixed_frequencies[key] = self._frequencies(device, s)
        return self._fixed_frequencies[key]

    def _frequencies(self, device, s):
        exponents = torch.arange(0, self.head_dim, 2, device=device, dtype=torch.float32) / self.head_dim
        return self.scaling.frequencies(self.base ** -exponents, self.base, self.head_dim, s)

    def rotation(self, positions: Tensor, device, source_lengths: Optional[Tensor] = None) -> Tensor:
        """e^{i m theta_i} at the B x T positions m: B x 1 x T x d/2 complex, computed once for queries and keys
        (of modulus 1, or YaRN's factor on both). ``source_lengths`` (B) choose the factor of
        ``--rope-scaling-factor auto``, per sentence."""
        s = self.scaling.factors(source_lengths)
        theta = self.frequencies(device, s)
        angles = positions.float()[:, None, :, None] * (theta[:, None, None, :] if theta.dim() == 2 else theta)
        magnitude = self.scaling.magnitude(s)
        if torch.is_tensor(magnitude):  # per sentence: B x 1 -> B x 1 x T x d/2
            return torch.polar(magnitude[:, :, None, None].expand_as(angles), angles)
        return torch.polar(torch.full_like(angles, magnitude), angles)

    def rotate(self, x: Tensor, rotation: Tensor) -> Tensor:
        """R^d_{Theta,m} x (Eq. 34) for B x H x T x d_h vectors, given :meth:`rotation` of their positions."""
        # Pair i as the complex number x_{2i-1} + i x_{2i}: the rotation is one
        # product with e^{i m theta_i} (the paper's Eq. 12 form of Eq. 34), with no
        # interleaving copy of the two halves.
        pairs = torch.view_as_complex(x.float().contiguous().unflatten(-1, (-1, 2)))  # B x H x T x d/2
        return torch.view_as_real(pairs * rotation).flatten(-2).to(x.dtype)

    def rotate_key(self, x: Tensor, rotation: Tensor) -> Tensor:
        """Keys turn as the queries do: f_q and f_k share R^d_{Theta,m} (Eq. 14)."""
        return self.rotate(x, rotation)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        return self.rotate(x, self.rotation(positions, x.device))

    def extra_repr(self):
        scaling = "" if self.scaling.method == "none" else f", scaling={self.scaling.method} x{self.scaling.factor}"
        return f"head_dim={self.head_dim}, base={self.base:g}{scaling}"


@register_mixer("rope", sites=("encoder_self", "decoder_self"), variants={
    "base100": {"rope_base": 100.0},
    "yarn": {"rope_scaling": "yarn", "rope_scaling_factor": 4.0, "rope_scaling_train_length": 8}})
class RopeAttention(ContentAttention):
    """Content attention with rotary position embedding on queries and keys (RoFormer Eq. 14-16, 34)."""

    @classmethod
    def build(cls, ctx):
        rotary = Rotary(ctx.embed_dim // ctx.num_heads, ctx.options(FLAGS).rope_base,
                        RopeScaling.from_options(ctx.options(SCALING_FLAGS)))
        if rotary.scaling.auto and ctx.forward_context is not None:
            ctx.forward_context.needs_source_lengths = True
        return cls(ctx.embed_dim, ctx.num_heads, ctx.dropout, ctx.site.causal, transform=rotary,
                   forward_context=ctx.forward_context)
