"""LinearNet: a learned position-to-position weight table (Schmidt & Di Gangi, PosNet paper, Table 2 baseline).

Each layer learns an ``H x N x N`` table ``W`` that *is* the attention
matrix: no queries, no keys, no softmax::

    out_n = W_o concat_h( sum_m W[h, n, m] (W_v x_m)_h )

n and m are 0-based positions in the sentence (from the padding mask, so
left-padded sources index the table from their first real token). Padding
keys and, in the decoder, future keys get weight 0 (no renormalisation, as
in the authors' code), then attention dropout. ``W_v`` and ``W_o`` are
``nn.Linear`` with bias, the Linear layers the gating wrapper (``gating.py``)
replaces: LinearNet with ``--encoder-self-gating on --decoder-self-gating
on`` is the paper's gLinearNet.

N is ``--linearnet-max-length`` (default: the site's ``--max-source-positions``
/ ``--max-target-positions``; the ``linearnet_*`` presets use the paper's 128 for
all three). Positions >= N have no row or column; the model refuses a larger
``--max-*-positions`` at build time. Init as the reference code's
``xavier_uniform_`` on its ``1 x H x N x N`` tensor: uniform in
``+-sqrt(6 / ((H + 1) N^2))`` (0.0064 at H = 8, N = 128), small weights, so
a fresh layer adds little to the residual.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import families, flags
from ..sites import dest
from .base import Mixer
from .registry import register_mixer


FLAGS = flags.declare(
    "LinearNet", "posnet",
    flags.Flag("--linearnet-max-length", None, "LinearNet: positions covered by the learned H x N x N weight table",
               type=int, metavar="N", check=flags.positive_integer, default_doc="the site's --max-source-positions / --max-target-positions; "
               "linearnet_* presets: 128"),
)


@register_mixer(
    "linearnet",
    sites=("encoder_self", "decoder_self"),
    variants={
        "n32": {"linearnet_max_length": 32, "max_source_positions": 32, "max_target_positions": 32},
        "gated": {"encoder_self_gating": "on", "decoder_self_gating": "on"},  # gLinearNet
    },
)
class LinearNetAttention(Mixer):
    """A learned H x N x N table used directly as attention weights (PosNet paper's LinearNet)."""

    def __init__(self, embed_dim, num_heads, max_length, dropout, causal):
        super().__init__(embed_dim, num_heads)
        self.max_length, self.dropout, self.causal = max_length, dropout, causal
        self.weight = nn.Parameter(torch.empty(num_heads, max_length, max_length))
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        with torch.no_grad():
            bound = math.sqrt(6.0 / ((num_heads + 1) * max_length * max_length))
            self.weight.uniform_(-bound, bound)
            for proj in (self.v_proj, self.out_proj):
                nn.init.xavier_uniform_(proj.weight)
                nn.init.zeros_(proj.bias)

    def extra_repr(self):
        return f"max_length={self.max_length}, causal={self.causal}"

    @classmethod
    def build(cls, ctx):
        length = ctx.options(FLAGS).linearnet_max_length
        if length is None:
            length = getattr(ctx.args, dest(ctx.site.max_positions_flag))
        return cls(ctx.embed_dim, ctx.num_heads, length, ctx.dropout, ctx.causal)

    def max_positions(self):
        return self.max_length

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        # attn_mask (fairseq's -inf future mask) is not used: causality comes from the positions.
        if before_softmax:
            raise ValueError("linearnet has no logits: its weights are used without a softmax (before_softmax)")
        T, B, _ = query.shape
        v = self.split_heads(self.v_proj(value))  # B x H x S x d (cache layout)
        if key_padding_mask is not None:  # a pad step cached while decoding must contribute nothing later
            v = v.masked_fill(key_padding_mask.view(B, 1, -1, 1), 0)
        v, _, query_pos, key_pos = self.self_attention_positions(incremental_state, key_padding_mask, pad_key=None,
                                                                 value=v)
        # A position is never larger than its column index, so this bounds them without a device sync.
        if v.size(2) > self.max_length or T > self.max_length:
            raise ValueError(f"linearnet: a sequence of {max(T, v.size(2))} positions exceeds its table of "
                             f"{self.max_length} (--linearnet-max-length)")
        # The table is the weights: no arithmetic before the matmul that fp32 would protect.
        weights = self.weight[:, query_pos.unsqueeze(2), key_pos.unsqueeze(1)]  # H x B x T x S
        invalid = None
        if key_padding_mask is not None and incremental_state is None:  # zero weights, not only values
            invalid = key_padding_mask.view(1, B, 1, -1)
        if self.causal:
            future = (key_pos.unsqueeze(1) > query_pos.unsqueeze(2)).unsqueeze(0)
            invalid = future if invalid is None else invalid | future
        if invalid is not None:
            weights = weights.masked_fill(invalid, 0.0)
        weights = F.dropout(weights, self.dropout, self.training).to(v.dtype).transpose(0, 1)  # B x H x T x S
        out = self.merge_heads(torch.matmul(weights, v))
        return out, self.fairseq_weights(weights, v.dtype, need_weights, need_head_weights)


# The presets (families.py): LinearNet in the encoder and decoder
# self-attention, a 128 x 128 table per head (the paper's maximum sentence
# length); gLinearNet adds the gating of Eq. 4. The presets carry their limit:
# --max-source- and --max-target-positions default to the table's length, so
# they train with fairseq's default flags; a larger explicit value is refused
# at model build.
def _table_length(args):
    return args.linearnet_max_length


_LINEARNET = {"encoder_self_mixer": "linearnet", "decoder_self_mixer": "linearnet", "linearnet_max_length": 128,
             "max_source_positions": _table_length, "max_target_positions": _table_length}
_SIZES = {"tiny": families.TESTS, "small": "PosNet Table 3 (small De-En)", "base": "PosNet Table 2",
          "big": "PosNet Table 3 (big En-De)"}
families.declare(
    __name__, "LinearNet", "posnet",
    families.Family("linearnet_transformer", "LinearNet in encoder and decoder self-attention, N = 128 (base: 61.8M "
                    "in the paper, 61.77M here)", _LINEARNET, _SIZES,
                    ctranslate2=families.OWN_PARAMETERS),
    families.Family("glinearnet_transformer", "the same with gating at both self sites (65.0M; 64.93M here)",
                    {**_LINEARNET, "encoder_self_gating": "on", "decoder_self_gating": "on"}, _SIZES,
                    benchmark="mechanism",
                    ctranslate2=families.OWN_PARAMETERS),
)
