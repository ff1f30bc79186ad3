"""``tisa``: translation-invariant self-attention (Wennberg & Henter, 2021).

Every head h of every layer gets a positional scoring function of the relative
distance k = j - i between key j and query i, a sum of S radial basis kernels

    f_h(k) = sum_{s=1..S} a_{h,s} exp(-|b_{h,s}| (k - c_{h,s})^2),

which is added to the content logits after the 1/sqrt(d) scaling and before
masking and softmax (the paper's Eq. 4):

    softmax(Q K^T / sqrt(d) + F) V,        F[h, i, j] = f_h(j - i).

Used (a) beside the model's position embeddings or (b) instead of them
(``--no-token-positional-embeddings``); S = 0 with (b) is the bag-of-words
baseline. 3 S H parameters per layer, F is computed for the actual length, so
there is no maximum length.

TISA is a bias, not an attention: :class:`TisaScorer` computes F and a host
attention adds it to its logits. Hosts:

* ``tisa`` -- fairseq's MultiheadAttention (:class:`TisaAttention` wraps it and
  hands F over as a float ``attn_mask``);
* ``tisa_shaw`` -- Shaw et al.'s relative attention (``shaw.py``), whose
  ``logit_bias`` hook takes the scorer directly.

Cross attention has no relative distance between a target and a source
position, so neither mixer serves the cross site.

Porting parameters of the reference code (ulmewennberg/tisa, ``model/tisa.py``):
it builds F[i, j] = f(i - j - 1) with [S, H] parameters; the paper's orientation
used here is f(j - i), hence c_here = -c_code - 1 (a and b unchanged), see
:meth:`TisaScorer.load_reference_parameters`.
"""

import torch
from torch import Tensor, nn

from .. import flags
from .attention import real_positions
from .base import Mixer
from .registry import register_mixer
from .shaw import ShawRelativeAttention

INIT_MODES = ("random", "local")


FLAGS = flags.declare(
    "TISA", "tisa",
    flags.Flag("--tisa-kernels", 5, "radial basis kernels per head of TISA's positional scoring function f_h "
               "(0 = no positional score: with --no-token-positional-embeddings the bag-of-words baseline)",
               type=int, metavar="S", check=flags.non_negative_integer),
    flags.Flag("--tisa-init", "random", "TISA kernel initialisation: 'random' (the reference code: "
               "c ~ N(0, 5^2), a ~ N(0.1, 0.01^2), b ~ N(0.1, 0.01^2)) or 'local' (deterministic: centres evenly "
               "spaced on -2..2, a = b = 0.1)", choices=INIT_MODES),
)


class TisaScorer(nn.Module):
    """The per-head positional scores F[b, h, i, j] = f_h(pos_j - pos_i), in fp32.

    Called as ``scorer(query_positions B x T, key_positions B x S)`` (either
    batch may be 1; 0-based positions below max(T, S)), it returns
    B x H x T x S. f is evaluated once per distinct distance and gathered into
    the Toeplitz pattern, so the cost is that of indexing, not of S kernels
    per logit.
    """

    def __init__(self, num_heads: int, num_kernels: int, init: str = "random"):
        super().__init__()
        if num_kernels < 1:
            raise ValueError(f"--tisa-kernels {num_kernels}: a scorer needs at least one kernel")
        self.num_heads, self.num_kernels = num_heads, num_kernels
        # Layout H x S (the reference code uses S x H; see load_reference_parameters).
        self.offsets = nn.Parameter(torch.empty(num_heads, num_kernels))     # c
        self.amplitudes = nn.Parameter(torch.empty(num_heads, num_kernels))  # a
        self.sharpness = nn.Parameter(torch.empty(num_heads, num_kernels))   # b
        self.reset_parameters(init)

    def reset_parameters(self, init: str):
        with torch.no_grad():
            if init == "random":
                self.offsets.normal_(0.0, 5.0)
                self.amplitudes.normal_(0.1, 0.01)
                self.sharpness.normal_(0.1, 0.01)
            elif init == "local":
                # Every head starts as the same smooth bump over distances -2..2;
                # the content projections break the symmetry between heads.
                centres = torch.linspace(-2.0, 2.0, self.num_kernels) if self.num_kernels > 1 else torch.zeros(1)
                self.offsets.copy_(centres.expand(self.num_heads, -1))
                self.amplitudes.fill_(0.1)
                self.sharpness.fill_(0.1)
            else:
                raise ValueError(f"--tisa-init {init}: choose from {', '.join(INIT_MODES)}")

    def profile(self, distances: Tensor) -> Tensor:
        """f_h(k) for every head at the given distances (any shape N): H x N, fp32."""
        # fp32 even when the model runs in fp16/bf16: the squared distances
        # reach ~1e5 at a few hundred tokens and exp of them underflows early.
        k = distances.float().reshape(1, 1, -1)
        c = self.offsets.float().unsqueeze(-1)
        a = self.amplitudes.float().unsqueeze(-1)
        b = self.sharpness.float().abs().unsqueeze(-1)
        return (a * torch.exp(-b * (k - c) ** 2)).sum(dim=1)

    def forward(self, query_positions: Tensor, key_positions: Tensor) -> Tensor:
        # Self-attention positions are 0-based and below max(T, S) (an incremental
        # step has T = 1 query at position S - 1), so the distances lie within
        # +-max(T, S): the table's range is known without a device sync.
        lowest = -max(query_positions.size(-1), key_positions.size(-1))
        highest = -lowest
        distances = key_positions.unsqueeze(1) - query_positions.unsqueeze(2)  # B x T x S
        table = self.profile(torch.arange(lowest, highest + 1, device=distances.device))
        return table[:, distances - lowest].transpose(0, 1)  # H x B x T x S -> B x H x T x S

    def load_reference_parameters(self, kernel_offsets: Tensor, kernel_amplitudes: Tensor,
                                  kernel_sharpness: Tensor):
        """Loads S x H parameters of the reference ``Tisa`` module (F[i, j] = f(i - j - 1))."""
        with torch.no_grad():
            self.offsets.copy_(-kernel_offsets.t() - 1)
            self.amplitudes.copy_(kernel_amplitudes.t())
            self.sharpness.copy_(kernel_sharpness.t())

    def extra_repr(self):
        return f"heads={self.num_heads}, kernels={self.num_kernels}"


def build_scorer(ctx):
    """The scorer for one layer, or None for S = 0 (F = 0: the host attention alone)."""
    opts = ctx.options(FLAGS)
    return TisaScorer(ctx.num_heads, opts.tisa_kernels, opts.tisa_init) if opts.tisa_kernels else None


def _causal(bias: Tensor, past: int) -> Tensor:
    """-inf above the diagonal, by column: query column t is key column past + t."""
    tgt_len, src_len = bias.shape[-2:]
    future = torch.ones(tgt_len, src_len, dtype=torch.bool, device=bias.device).triu_(past + 1)
    return bias.masked_fill(future, float("-inf"))


def _add_mask(bias: Tensor, attn_mask) -> Tensor:
    if attn_mask is None:
        return bias
    if attn_mask.dtype == torch.bool:
        return bias.masked_fill(attn_mask, float("-inf"))
    return bias + attn_mask.float()


VARIANTS = {"s0": {"tisa_kernels": 0}, "s1": {"tisa_kernels": 1}, "local": {"tisa_init": "local"}}


@register_mixer("tisa", sites=("encoder_self", "decoder_self"), variants=VARIANTS)
class TisaAttention(Mixer):
    """fairseq's MultiheadAttention plus TISA's positional scores F on its logits (Eq. 4)."""

    def __init__(self, attention: nn.Module, scorer: TisaScorer, causal: bool):
        super().__init__(attention.embed_dim, attention.num_heads)
        self.attention, self.tisa, self.causal = attention, scorer, causal

    @classmethod
    def build(cls, ctx):
        scorer = build_scorer(ctx)
        attention = ctx.build_fairseq_attention()
        if scorer is None:
            return attention
        return cls(attention, scorer, ctx.causal)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        if incremental_state is None:
            return self._forward_full(query, key, value, key_padding_mask, need_weights, attn_mask,
                                      before_softmax, need_head_weights)
        return self._forward_step(query, key, value, key_padding_mask, incremental_state, need_weights,
                                  attn_mask, before_softmax, need_head_weights)

    def _forward_full(self, query, key, value, key_padding_mask, need_weights, attn_mask, before_softmax,
                      need_head_weights):
        # Self-attention: queries and keys are the same tokens. Positions come
        # from the padding mask (sources are left-padded); for real tokens the
        # distance equals the column distance, pad rows are never read.
        tgt_len, bsz, _ = query.shape
        positions = real_positions(key_padding_mask, bsz, tgt_len, query.device)
        bias = self.tisa(positions, positions)
        if self.causal:
            bias = _causal(bias, 0)
        bias = _add_mask(bias, attn_mask)
        if key_padding_mask is not None:
            # One float mask instead of a float and a bool one (torch deprecates mixing them).
            bias = bias.masked_fill(key_padding_mask[:, None, None, :].bool(), float("-inf"))
        # fairseq's MHA adds a 3-D (B*H) x T x S float mask to its scaled logits
        # on this (non-incremental) path.
        bias = bias.reshape(bsz * self.num_heads, tgt_len, -1).to(query.dtype)
        return self.attention(query, key, value, need_weights=need_weights, attn_mask=bias,
                              before_softmax=before_softmax, need_head_weights=need_head_weights)

    def _forward_step(self, query, key, value, key_padding_mask, incremental_state, need_weights, attn_mask,
                      before_softmax, need_head_weights):
        # MHA's incremental path only broadcasts a 2-D T x S mask over heads, so
        # it returns its masked logits (before_softmax) and the softmax, dropout
        # and output projection are finished here. MHA keeps its own key/value
        # cache (and reorders it for beam search); its length is the number of
        # tokens already decoded, i.e. the absolute step of this query block.
        tgt_len, bsz, _ = query.shape
        cache = self.attention._get_input_buffer(incremental_state).get("prev_key")
        past = 0 if cache is None else cache.size(2)
        logits, v = self.attention(query, key, value, key_padding_mask=key_padding_mask,
                                   incremental_state=incremental_state, before_softmax=True)
        src_len = logits.size(-1)
        positions = torch.arange(src_len, device=query.device).unsqueeze(0)
        bias = self.tisa(positions[:, past:past + tgt_len], positions)
        if self.causal:
            bias = _causal(bias, past)
        bias = _add_mask(bias, attn_mask)
        logits = logits.view(bsz, self.num_heads, tgt_len, src_len) + bias.to(logits.dtype)
        if before_softmax:
            return logits.view(bsz * self.num_heads, tgt_len, src_len), v
        probs_float = torch.softmax(logits.float(), dim=-1)
        probs = self.attention.dropout_module(probs_float.type_as(logits))
        out = torch.bmm(probs.view(bsz * self.num_heads, tgt_len, src_len), v)
        out = self.attention.out_proj(out.transpose(0, 1).reshape(tgt_len, bsz, self.embed_dim))
        weights = None
        if need_weights or need_head_weights:
            weights = probs_float.transpose(0, 1)  # H x B x T x S, as fairseq returns them
            if not need_head_weights:
                weights = weights.mean(dim=0)
        return out, weights


@register_mixer("tisa_shaw", sites=("encoder_self", "decoder_self"))
def tisa_shaw_attention(ctx):
    """Shaw et al.'s relative attention plus TISA's positional scores on its logits (Eq. 4)."""
    # S = 0 leaves the hook empty: plain Shaw attention.
    return ShawRelativeAttention.build(ctx, logit_bias=build_scorer(ctx))
