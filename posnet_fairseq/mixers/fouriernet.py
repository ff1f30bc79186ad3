"""FourierNet: a fixed per-sentence DFT over positions (Schmidt & Di Gangi, PosNet paper, Table 2 baseline).

For a sentence of L real tokens (0-based positions n, m from the padding
mask, so left padding does not shift the transform)::

    F_L[n, m] = exp(-2 pi i n m / L) / sqrt(L)
    out_n     = W_o Re( sum_m F_L[n, m] (W_v x_m) )

as the authors' ``FNetAttentionLayer``: one DFT along the sequence only, a
single "head", the real part kept. ``W_v x`` is real, so the real part is
the cosine transform ``cos(2 pi n m / L) / sqrt(L)``: the sine half of the
complex product is never computed. The angle is reduced exactly in integers,
``(n m) mod L``, before the fp32 ``cos``, so long sentences lose no accuracy;
the matrix is cast to the model's dtype afterwards. Pad rows and columns are
zero. No attention dropout and no parameters besides ``W_v`` and ``W_o``
(``nn.Linear`` with bias).

Non-causal (every output mixes the whole sentence, and F depends on L):
``fouriernet`` serves the encoder self-attention site only.
"""
import math

import torch
from torch import nn

from .. import families
from .attention import real_positions, sentence_lengths
from .base import Mixer
from .registry import register_mixer


@register_mixer("fouriernet", sites=("encoder_self",))
class FourierNetMixer(Mixer):
    """The real part of the per-sentence DFT over positions, between W_v and W_o (PosNet paper's FourierNet)."""

    def __init__(self, embed_dim, num_heads):
        super().__init__(embed_dim, num_heads)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        for proj in (self.v_proj, self.out_proj):  # as the reference code (Xavier-uniform, zero bias)
            nn.init.xavier_uniform_(proj.weight)
            nn.init.zeros_(proj.bias)

    @classmethod
    def build(cls, ctx):
        return cls(ctx.embed_dim, ctx.num_heads)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        if incremental_state is not None or before_softmax:
            raise ValueError("fouriernet is an encoder mixer: no incremental decoding and no logits")
        S, B, _ = value.shape
        v = self.v_proj(value).transpose(0, 1)  # B x S x D
        pos = real_positions(key_padding_mask, B, S, value.device)  # B x S
        length = sentence_lengths(key_padding_mask, B, S, value.device).clamp(min=1).view(B, 1, 1)
        turns = (pos.unsqueeze(2) * pos.unsqueeze(1)) % length  # B x S x S, exact integer n m mod L
        weights = torch.cos(turns.float() * (2 * math.pi) / length.float()) / length.float().sqrt()
        if key_padding_mask is not None:
            pads = key_padding_mask.unsqueeze(2) | key_padding_mask.unsqueeze(1)
            weights = weights.masked_fill(pads, 0.0)
        weights = weights.to(v.dtype)
        out = self.out_proj(torch.bmm(weights, v).transpose(0, 1))
        if not (need_weights or need_head_weights):
            return out, None
        return out, weights.unsqueeze(0) if need_head_weights else weights


# The presets (families.py): FourierNet in the encoder self-attention only, as in the paper.
families.declare(
    __name__, "FourierNet", "posnet",
    families.Family("fouriernet_transformer", "FourierNet in the encoder, MHA elsewhere (63.4M; 63.35M here)",
                    {"encoder_self_mixer": "fouriernet"},
                    {"tiny": families.TESTS, "small": "PosNet Table 3 (small De-En)", "base": "PosNet Table 2",
                     "big": "PosNet Table 3 (big En-De)"},
                    benchmark="mechanism",
                    ctranslate2=families.OWN_PARAMETERS),
)
