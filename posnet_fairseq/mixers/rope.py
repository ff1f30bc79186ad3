"""``rope``: rotary position embedding (Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding").

Queries and keys are rotated by their absolute position before the dot
product, pairwise in the paper's layout (dimensions 2i-1 and 2i form pair i,
i = 1..d/2), by the angle m theta_i at position m (Eq. 14, 15)::

    f_{q,k}(x_m, m) = R^d_{Theta,m} W_{q,k} x_m                          (Eq. 14)
    R^d_{Theta,m} = diag(rot(m theta_1), ..., rot(m theta_{d/2})),
    theta_i = base^(-2(i-1)/d), base = 10000                             (Eq. 15)

so that the logit depends on the positions only through their difference::

    q_m^T k_n = (W_q x_m)^T R^d_{Theta,n-m} (W_k x_n)                     (Eq. 16)

the product of Eq. 34,
``R x = x * cos(m theta) + rotate_pairs(x) * sin(m theta)`` with
``rotate_pairs(x1, x2, ...) = (-x2, x1, ...)``, computed as one matrix
product with the block-diagonal R of Eq. 15 (:func:`rotation_matrices`,
made once per call in the projections' dtype). d is the head dimension; no
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
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from .. import families, flags
from .registry import register_mixer
from .content_attention import ContentAttention, scheme_family
from .distance_bias import FOLD_START
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
        # The rotation at the steps 0 .. N - 1 of every sentence, for decoding (decoding_rotation): a plain
        # attribute, on the device and in the dtype of the step that made it.
        self.decoding_table = None
        self._decoding_views = {}  # (start, length) -> its view of the table

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

    def turn(self, positions: Tensor, device, source_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """(cos, sin) of m theta_i at the B x T positions m: B x T x d/2 each, fp32, times YaRN's factor if any.
        ``source_lengths`` (B) choose the factor of ``--rope-scaling-factor auto``, per sentence."""
        s = self.scaling.factors(source_lengths)
        theta = self.frequencies(device, s)
        angles = positions.float()[:, :, None] * (theta[:, None, :] if theta.dim() == 2 else theta)
        cos, sin = torch.cos(angles), torch.sin(angles)
        magnitude = self.scaling.magnitude(s)
        if torch.is_tensor(magnitude):  # per sentence: B x 1 -> B x 1 x 1
            magnitude = magnitude[:, :, None]
        elif magnitude == 1:
            return cos, sin
        return cos * magnitude, sin * magnitude

    def rotation(self, positions: Tensor, device, source_lengths: Optional[Tensor] = None,
                 dtype=torch.float32) -> Tensor:
        """R^d_{Theta,m} at the B x T positions m as matrices (:func:`rotation_matrices`), in ``dtype``: computed
        once for queries and keys, and for every layer of a call (``ContentAttention._rotate``)."""
        if positions.size(0) > 1 and positions.stride(0) == 0:  # one row expanded: one matrix per step
            positions = positions[:1]
        return rotation_matrices(*self.turn(positions, device, source_lengths), dtype)

    def decoding_rotation(self, start: int, length: int, device, dtype) -> Tensor:
        """:meth:`rotation` at the steps start .. start + length - 1 of every sentence (positions 1 x length):
        a view of a table of the steps 0 .. N - 1, made at the first step and doubled when a longer prefix needs
        it, so that a decoding step computes no rotation (it has no parameters for the table to follow)."""
        table, end = self.decoding_table, start + length
        time = None if table is None else table.dim() - 4  # the steps' dim: T x 1 x d x d (xPos: 2 x T x ...)
        if table is None or table.size(time) < end or table.device != device or table.dtype != dtype:
            size = max(end, FOLD_START if table is None else 2 * table.size(time))
            with torch.no_grad():
                table = self.decoding_table = self.rotation(torch.arange(size, device=device)[None], device,
                                                            dtype=dtype)
            time, self._decoding_views = table.dim() - 4, {}
        view = self._decoding_views.get((start, length))
        if view is None:  # each block's view made once: a decoding step's rotation is no operator
            view = self._decoding_views[start, length] = table.narrow(time, start, length)
        return view

    def rotate(self, x: Tensor, rotation: Tensor) -> Tensor:
        """R^d_{Theta,m} x (Eq. 34) for B x H x T x d_h vectors, given :meth:`rotation` of their positions."""
        # One matrix product in the time-major layout the projections made (split_heads views it): on a GPU
        # one kernel, and one for its gradient, where pairwise arithmetic takes several and casts.
        batch, heads, length, dim = x.shape
        rows = x.permute(2, 0, 1, 3)  # T x B x H x d_h
        if rotation.size(1) == 1:  # every sentence at the same positions: one matrix per step
            turned = torch.bmm(rows.reshape(length, batch * heads, dim), rotation.reshape(length, dim, dim))
        else:
            turned = torch.bmm(rows.reshape(length * batch, heads, dim), rotation.reshape(length * batch, dim, dim))
        return turned.view(length, batch, heads, dim).permute(1, 2, 0, 3)

    def rotate_key(self, x: Tensor, rotation: Tensor) -> Tensor:
        """Keys turn as the queries do: f_q and f_k share R^d_{Theta,m} (Eq. 14)."""
        return self.rotate(x, rotation)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        return self.rotate(x, self.rotation(positions, x.device, dtype=x.dtype))

    def extra_repr(self):
        scaling = "" if self.scaling.method == "none" else f", scaling={self.scaling.method} x{self.scaling.factor}"
        return f"head_dim={self.head_dim}, base={self.base:g}{scaling}"


def rotation_matrices(cos: Tensor, sin: Tensor, dtype) -> Tensor:
    """The d_h x d_h matrices M with x M = R^d_{Theta,m} x for row vectors x (Eq. 15: 2 x 2 blocks
    [[cos, sin], [-sin, cos]] on the diagonal, pair i on rows and columns 2i-1, 2i), from P x T x d/2 ``cos``
    and ``sin`` (P: 1, every sentence at the same positions, or B): T x P x d_h x d_h, time first as the
    projections lay out their rows."""
    batch, length, pairs = cos.shape
    blocks = torch.stack([cos, sin, -sin, cos], dim=-2)  # P x T x 4 x d/2: entry (a, b) of pair i's block
    diagonal = torch.diag_embed(blocks).view(batch, length, 2, 2, pairs, pairs)  # [.., a, b, i, j]: i = j only
    return diagonal.permute(1, 0, 4, 2, 5, 3).reshape(length, batch, 2 * pairs, 2 * pairs).to(dtype)


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
        return cls.at_site(ctx, transform=rotary)
