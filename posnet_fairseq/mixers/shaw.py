"""Relative-position self-attention: ``shaw`` (Shaw et al., 2018) and ``relattn``.

``shaw`` is the multi-head attention of Shaw, Uszkoreit & Vaswani (2018),
"Self-Attention with Relative Position Representations": a learned embedding
of the clipped key-query distance is added to every key (Eq. 4, 5) and,
optionally, to every value (Eq. 3)::

    e_ij = q_i . (k_j + w^K[clip(j - i, -K, K)]) / sqrt(d_h)     (Eq. 4, 5)
    a_ij = softmax_j(e_ij)                                       (Eq. 2)
    z_i  = sum_j a_ij (v_j + w^V[clip(j - i, -K, K)])            (Eq. 3; --relative-values)

``relattn`` is the "relative attention" baseline of Schmidt & Di Gangi
(PosNet paper, Table 6): the token-token term is dropped, so a content query
meets relative-position keys only and there is no key projection W_K::

    e_ij = q_i . w^K[clip(j - i, -K, K)] / sqrt(d_h)

Both serve the encoder and decoder self-attention sites only (cross attention
has no distance between a target and a source position). Distances are taken
between real positions (sources are left-padded); the decoder is causal.

Both mixers share their flags (``FLAGS`` below): the clipping distance K;
``--relative-embeddings``: a (2K+1) x D table whose D columns are split into
one d_h slice per head, as in the PosNet paper's baseline (AppTek
``RelativeMultiHeadAttention``), or one (2K+1) x d_h table shared by all
heads, as in Shaw et al.; ``--relative-values``: the value-side term of Eq. 3
(off by default, as in the PosNet paper's baseline and the NEU fairseq fork).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import families, flags
from .attention import masked_softmax
from .base import Mixer
from .registry import register_mixer

EMBEDDING_KINDS = ("per-head", "shared")

# Option sets the contract tests run besides the defaults: the Shaw table
# layout, the value term, and a K shorter than the test sentences (clipping).
VARIANTS = {
    "shared": {"relative_embeddings": "shared"},
    "values": {"relative_values": True},
    "shared_values_k2": {"relative_embeddings": "shared", "relative_values": True, "relative_max_distance": 2},
}


FLAGS = flags.declare(
    "Shaw et al. / relative attention", "posnet",
    flags.Flag("--relative-max-distance", 16, "shaw/relattn: distances are clipped to [-K, K] (*_big presets: 8)",
               type=int, metavar="K", check=flags.non_negative_integer),
    flags.Flag("--relative-embeddings", "per-head", "shaw/relattn: 'per-head' slices of a (2K+1) x D table "
               "(PosNet paper baseline) or one (2K+1) x d_h table 'shared' by all heads (Shaw et al., 2018)",
               choices=EMBEDDING_KINDS),
    flags.Flag("--relative-values", False, "shaw/relattn: also add relative embeddings to the values "
               "(Shaw et al. Eq. 3)"),
)


@register_mixer("shaw", sites=("encoder_self", "decoder_self"), variants=VARIANTS)
class ShawRelativeAttention(Mixer):
    """Shaw et al. (2018) relative-position self-attention (Eq. 3-5): key term, optional value term.

    Projections are named as in fairseq's MultiheadAttention so that site
    wrappers (the PosNet GeLU gating) can wrap them: ``v_proj`` maps the value
    input (T x B x D) before the head split, ``out_proj`` maps the
    concatenated heads. ``q_proj``/``k_proj`` map query and key; ``k_proj`` is
    None for ``relattn``.

    Logit bias hook (e.g. TISA, Wennberg & Henter 2021): set ``logit_bias``
    (default None) to a module; it is called as
    ``logit_bias(query_positions, key_positions)`` with B x T and B x S long
    tensors of 0-based real positions (from the padding mask; during
    incremental decoding the query positions are the decoding steps and the
    key positions 0..S-1) and must return a float tensor of shape
    B x H x T x S or broadcastable to it (e.g. 1 x H x T x S). It is added,
    in fp32, to the logits after the 1/sqrt(d_h) scaling and before padding
    and causal masking and the softmax. Assigning a module registers it as a
    submodule, so its parameters train and are saved with the model.
    """

    CONTENT_KEYS = True  # False for relattn: no W_K, no token-token term

    def __init__(self, embed_dim, num_heads, max_distance, embeddings="per-head", values=False, dropout=0.0,
                 causal=False, logit_bias=None):
        super().__init__(embed_dim, num_heads)
        self.max_distance = max_distance
        self.embeddings = embeddings
        self.causal = causal
        self.dropout = dropout
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim) if self.CONTENT_KEYS else None
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        width = embed_dim if embeddings == "per-head" else self.head_dim
        self.relative_keys = nn.Parameter(torch.empty(2 * max_distance + 1, width))
        self.relative_values = nn.Parameter(torch.empty(2 * max_distance + 1, width)) if values else None
        self.reset_parameters()
        self.logit_bias = logit_bias

    def reset_parameters(self):
        # As fairseq's MultiheadAttention initialises self-attention, so that
        # swapping mha for shaw changes only the position treatment.
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            if proj is not None:
                nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.constant_(self.out_proj.bias, 0.0)
        # Xavier for the relative tables, as in the NEU fairseq fork.
        for table in (self.relative_keys, self.relative_values):
            if table is not None:
                nn.init.xavier_uniform_(table)

    @classmethod
    def build(cls, ctx, logit_bias=None):
        opts = ctx.options(FLAGS)
        return cls(ctx.embed_dim, ctx.num_heads, opts.relative_max_distance, opts.relative_embeddings,
                   opts.relative_values, ctx.dropout, ctx.causal, logit_bias)

    def _dot_table(self, q, table):
        """q (B x H x T x d_h) against every table row: B x H x T x (2K+1)."""
        if self.embeddings == "shared":
            return torch.matmul(q, table.t())
        return torch.einsum("bhtd,rhd->bhtr", q, table.view(table.size(0), self.num_heads, self.head_dim))

    def _mix_table(self, weights, table):
        """weights (B x H x T x (2K+1)) times the table rows: B x H x T x d_h."""
        if self.embeddings == "shared":
            return torch.matmul(weights, table)
        return torch.einsum("bhtr,rhd->bhtd", weights, table.view(table.size(0), self.num_heads, self.head_dim))

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        # attn_mask (fairseq's -inf future mask, given only when not
        # incremental) is not used: causality comes from the positions below.
        if before_softmax:
            raise ValueError(f"{type(self).__name__} does not return pre-softmax logits (before_softmax=True)")
        length, batch, _ = query.shape
        q = self.split_heads(self.q_proj(query) * self.scaling)
        k = self.split_heads(self.k_proj(key)) if self.k_proj is not None else None
        v = self.split_heads(self.v_proj(value))
        v, k, pad, query_pos, key_pos = self.self_attention_positions(incremental_state, key_padding_mask,
                                                                      prev_value=v, prev_key=k)
        key_len = v.size(2)

        distance = key_pos.unsqueeze(1) - query_pos.unsqueeze(2)  # B x T x S, j - i
        slot = (distance.clamp(-self.max_distance, self.max_distance) + self.max_distance).unsqueeze(1)
        slot = slot.expand(batch, self.num_heads, length, key_len)

        # Position terms in (at least) fp32 (Eq. 5's q . w^K over the 2K+1
        # slots, then gathered per pair), the content term in the input dtype
        # like fairseq's MultiheadAttention; the softmax runs in fp32.
        acc = torch.promote_types(q.dtype, torch.float32)
        logits = self._dot_table(q.to(acc), self.relative_keys.to(acc)).gather(-1, slot)
        if k is not None:
            logits = logits + torch.matmul(q, k.transpose(-1, -2)).to(acc)
        if self.logit_bias is not None:
            logits = logits + self.logit_bias(query_pos, key_pos).to(acc)

        invalid = None
        if pad is not None:
            invalid = pad[:, None, None, :]
        if self.causal:
            future = (distance > 0).unsqueeze(1)
            invalid = future if invalid is None else invalid | future
        probs = masked_softmax(logits, invalid)
        dropped = F.dropout(probs, p=self.dropout, training=self.training)

        out = torch.matmul(dropped.to(v.dtype), v)
        if self.relative_values is not None:
            # Eq. 3's sum_j a_ij w^V[slot_ij]: add up the weights that fall in
            # each slot, then mix the 2K+1 table rows once.
            per_slot = dropped.new_zeros(batch, self.num_heads, length, 2 * self.max_distance + 1)
            per_slot.scatter_add_(-1, slot, dropped)
            out = out + self._mix_table(per_slot, self.relative_values.to(acc)).to(out.dtype)
        return self.merge_heads(out), self.fairseq_weights(probs, query.dtype, need_weights, need_head_weights)


@register_mixer("relattn", sites=("encoder_self", "decoder_self"), variants=VARIANTS)
class RelativeAttention(ShawRelativeAttention):
    """Relative attention (PosNet paper, Table 6): content queries x relative keys only, no W_K."""

    CONTENT_KEYS = False


# The presets (families.py): Shaw et al.'s relative attention and "relative
# attention" (content queries x relative keys, no W_K), K = 16 (big: K = 8),
# as the PosNet paper's baseline, without absolute position embeddings (Shaw
# et al. and the PosNet baseline: use_pos_embed False); to keep fairseq's
# sinusoids, use --arch posnet_transformer_<size> --encoder-self-mixer shaw
# --decoder-self-mixer shaw.
def _relative(mixer):
    return {"encoder_self_mixer": mixer, "decoder_self_mixer": mixer, "no_token_positional_embeddings": True,
            "relative_max_distance": 16}


_SIZES = {"tiny": families.TESTS, "small": "PosNet Table 3 (small De-En)", "base": "PosNet Tables 2 and 6",
                "big": "PosNet Table 3 (big En-De), K = 8"}
_RELATTN_SIZES = {"tiny": families.TESTS, "small": "the PosNet paper's small size (in no table)",
                  "base": "PosNet Table 6", "big": "the PosNet paper's big size (in no table), K = 8"}
families.declare(
    __name__, "Shaw et al. (2018) relative attention, relative-only attention", "posnet",
    families.Family("shaw_transformer", "Shaw et al., K = 16 (big: K = 8; base: Table 2, big: Table 3)",
                    _relative("shaw"), _SIZES, at_size={"big": {"relative_max_distance": 8}},
                    benchmark="mechanism",
                    ctranslate2=families.CONVERTS),  # benchmark/ctranslate2_relative.py
    families.Family("relattn_transformer", "the same with `relattn` (Table 6)", _relative("relattn"), _RELATTN_SIZES,
                    at_size={"big": {"relative_max_distance": 8}}, benchmark="mechanism",
                    ctranslate2=families.CONVERTS),  # benchmark/ctranslate2_relative.py
)
