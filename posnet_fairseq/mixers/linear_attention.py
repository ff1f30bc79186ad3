"""``linear_attention``: the linear attention of Katharopoulos et al. (2020).

Katharopoulos, Vyas, Pappas & Fleuret, "Transformers are RNNs: Fast
Autoregressive Transformers with Linear Attention" (ICML 2020); the AAN+
paper (Zhang et al., section 6.2 and Tables 2, 4, 7) uses it in place of the
decoder self-attention as a baseline. The softmax similarity is replaced by a
kernel ``phi(q)^T phi(k)`` with the feature map (Eq. 7)::

    phi(x) = elu(x) + 1

so that, per head, with ``q, k, v`` the usual projections ``W_q x``, ``W_k x``,
``W_v x`` (Eqs. 9-11, causal masking, section 3.3)::

    S_i = sum_{j<=i} phi(k_j) v_j^T          D_h x D_h
    z_i = sum_{j<=i} phi(k_j)                D_h
    out_i = phi(q_i)^T S_i / phi(q_i)^T z_i

and the heads are concatenated and projected by ``W_o``. The parameters are
MHA's (q, k, v and output projections with bias), so the parameter count is
the Transformer's (AAN+ Table 2: 72.31M for both). In the encoder the sums run
over the whole sentence (Eq. 5/6, no mask).

Training, parallel form (chunked): the sequence is cut into chunks of
``CHUNK`` steps. Within a chunk the causal kernel matrix
``phi(Q) phi(K)^T`` (lower-triangular, CHUNK x CHUNK) is applied directly;
the chunks before it enter through their summed states ``S`` and ``z``
(exclusive cumulative sums over chunks). Memory is O(T * CHUNK + T/CHUNK *
D_h^2) per head instead of the O(T * D_h^2) of a cumulative sum of outer
products, and no loop runs over time or chunks.

Decoding is the RNN form (section 3.4): per layer and head the state is
``S`` (D_h x D_h) and ``z`` (D_h), O(d^2 / H) floats per layer that do not
grow with the step; a step adds ``phi(k) v^T`` and ``phi(k)``.

Numerics: phi > 0, and sums are taken in fp32 whatever the model's dtype (a
sum over a long prefix can exceed fp16's range). Pad keys get phi(k) = 0, so
either padding side leaves real tokens' outputs unchanged; a query with no
real key before it outputs 0 instead of 0/0. No epsilon is added to the
denominator. No attention dropout applies (no weights are formed); the
layer's residual dropout does. ``v_proj`` and ``out_proj`` are the Linear
layers the PosNet gating wrapper (``gating.py``) can gate.
"""
import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import families
from .aan import baseline_family, safe_divide
from .attention import autocast_off
from .base import Mixer
from .registry import register_mixer
from .state_reorder import COPY

# Steps per chunk of the training form: the intra-chunk kernel matrix is
# CHUNK x CHUNK per head and position block; translation-length targets fit in one.
CHUNK = 64


def feature_map(x: Tensor) -> Tensor:
    """phi(x) = elu(x) + 1 (Eq. 7), in fp32."""
    return F.elu(x.float()) + 1.0


def causal_linear_attention(q: Tensor, k: Tensor, v: Tensor, state: Optional[Tuple[Tensor, Tensor]] = None,
                            chunk: int = CHUNK):
    """Causal linear attention over B x H x T x D_h feature-mapped ``q``, ``k`` and values ``v`` (fp32).

    ``state`` = (S: B x H x D_h x D_h, z: B x H x D_h) of the steps before
    this block. Returns the numerators and denominators' ratio (B x H x T x
    D_h) and the state after the block.
    """
    B, H, T, d = q.shape
    n = -(-T // chunk)
    pad = n * chunk - T
    if pad:  # zero keys and values add nothing to any sum
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    q, k, v = (t.view(B, H, n, chunk, t.size(-1)) for t in (q, k, v))
    kv = torch.einsum("bhncd,bhnce->bhnde", k, v)  # per-chunk sums of phi(k) v^T
    ks = k.sum(dim=3)  # per-chunk sums of phi(k)
    # S and z of everything before each chunk: exclusive cumulative sums.
    S = torch.cumsum(kv, dim=2) - kv
    z = torch.cumsum(ks, dim=2) - ks
    if state is not None:
        S, z = S + state[0].unsqueeze(2), z + state[1].unsqueeze(2)
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    kernel = torch.einsum("bhncd,bhnsd->bhncs", q, k).masked_fill(~causal, 0.0)
    num = torch.einsum("bhncs,bhnse->bhnce", kernel, v) + torch.einsum("bhncd,bhnde->bhnce", q, S)
    den = kernel.sum(dim=-1) + torch.einsum("bhncd,bhnd->bhnc", q, z)
    out = safe_divide(num, den.unsqueeze(-1)).reshape(B, H, n * chunk, -1)[:, :, :T]
    return out, (S[:, :, -1] + kv[:, :, -1], z[:, :, -1] + ks[:, :, -1])


@register_mixer("linear_attention", sites=("encoder_self", "decoder_self"))
class LinearAttention(Mixer):
    """Linear attention (Katharopoulos et al., 2020): elu+1 kernel, O(d^2/H)-state decoding per head."""

    def __init__(self, embed_dim: int, num_heads: int, causal: bool):
        super().__init__(embed_dim, num_heads)
        self.causal = causal
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        # As fairseq's MultiheadAttention initialises its projections.
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.constant_(self.out_proj.bias, 0.0)

    @classmethod
    def build(cls, ctx):
        return cls(ctx.embed_dim, ctx.num_heads, ctx.causal)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        # attn_mask (fairseq's -inf future mask) is not used: causality is the
        # prefix sums' own.
        if before_softmax:
            raise ValueError("linear_attention has no attention logits (before_softmax=True)")
        length = query.size(0)
        q = feature_map(self.split_heads(self.q_proj(query)))
        k = feature_map(self.split_heads(self.k_proj(key)))
        v = self.split_heads(self.v_proj(value)).float()
        if key_padding_mask is not None:
            k = k.masked_fill(key_padding_mask[:, -k.size(2):].view(k.size(0), 1, -1, 1), 0.0)

        # fp32 from here on, also under --amp: S and z are running sums.
        with autocast_off(v):
            if not self.causal:
                S = torch.einsum("bhsd,bhse->bhde", k, v)
                out = safe_divide(torch.einsum("bhtd,bhde->bhte", q, S),
                                  torch.einsum("bhtd,bhd->bht", q, k.sum(dim=2)).unsqueeze(-1))
            else:
                buffer = self._get_input_buffer(incremental_state) if incremental_state is not None else None
                state = None if buffer is None or "S" not in buffer else (buffer["S"], buffer["z"])
                if length == 1 and buffer is not None:
                    S = k.transpose(2, 3) @ v  # phi(k) v^T of this step
                    z = k.squeeze(2)
                    if state is not None:
                        S, z = S + state[0], z + state[1]
                    out = safe_divide(q @ S, (q.squeeze(2) * z).sum(-1)[..., None, None])
                    state = (S, z)
                else:
                    out, state = causal_linear_attention(q, k, v, state)
                if buffer is not None:
                    self.keep_state(buffer, "S", state[0], COPY)
                    self.keep_state(buffer, "z", state[1], COPY)
                    self._set_input_buffer(incremental_state, buffer)
        return self.merge_heads(out.to(query.dtype)), None

# The presets (families.py): the AAN+ paper's baseline; its base size has no suffix, as in that paper.
families.declare(__name__, "linear attention", "aan-baselines", baseline_family(
    "linear_attention", "linear_attention", "linear attention",
    "linear attention (Katharopoulos et al., 2020) in every decoder self-attention",
    # MultiheadAttention's parameter names: fairseq's Transformer loads it, as softmax attention
    families.NotConverted("converted, but as fairseq's Transformer, which has no counterpart of "
                          "--decoder-self-mixer linear_attention",
                          "it loads (MultiheadAttention's parameter names) and converts, but as softmax attention: "
                          "`convert` refuses it, naming the plugin flag the converted model would ignore")))
