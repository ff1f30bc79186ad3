"""Hard-coded Gaussian attention (You, Sun & Iyyer, 2020, "Hard-Coded Gaussian
Attention for Neural Machine Translation").

Every head of a hard-coded layer attends with a fixed Gaussian instead of
learned query-key scores (paper §3.1, HC-SA)::

    w_h(i, j) = exp(-(j - mu_h(i))^2 / (2 sigma^2)) / (sigma sqrt(2 pi))
    out_i     = W_O concat_h( sum_j w_h(i, j) W_V x_j )

with ``mu_h(i) = i + o_h`` for self-attention and
``mu_h(i) = floor(gamma i + o_h)`` for hard-coded cross attention (paper §3.2,
HC-ALL), gamma being the mean source / mean target length of the training data.
The weights are the raw pdf: no softmax and no renormalisation, so mass that
falls beyond a sentence border, on padding or on future tokens is simply lost
(paper footnote 5; an encoder head with offset -1 keeps 0.300 of its mass at
position 0). Only the value and output projections are learned. The weights
get no dropout, as in You et al.'s code; ``--hc-weight-dropout P`` drops them
in training as the AppTek GaussianNet does (docs/conventions.md).

Table 5's variants replace the pdf by ``conv`` (the pdf truncated to the 3
positions nearest the centre: [0.242, 0.399, 0.242] for sigma = 1) or by
``index`` (weight 1 on the position nearest the centre: each head copies one
token).

SH-X keeps hard-coded self-attention and a single learned cross-attention
head of dimension D in the last decoder layer only: the ``learned_cross``
mixer is fairseq's MultiheadAttention with ``--learned-cross-heads`` heads.

Offsets are given per site (``--hc-encoder-offsets``, ``--hc-decoder-offsets``, ``--hc-cross-offsets``)
as a comma-separated list of numbers or the paper's symbols ``l`` (-1), ``c`` (0), ``r`` (+1). A list
shorter than the number of heads is repeated cyclically (head h uses ``offsets[h mod len]``), so three
offsets over eight heads give l,c,r,l,c,r,l,c (and over two heads l,c: the default l,c,r of cross
attention serves any number of heads). ``;`` separates one list per layer (paper appendix A searches
settings of the first and last layers)::

    --hc-encoder-offsets "l,c;l,r;l,r;l,r;l,r;l,r"    # first encoder layer (l, c)

A list that starts with ``-`` must be attached with ``=`` (``--hc-cross-offsets=-2,0,2``)
because argparse reads a leading ``-`` as a flag.
"""
import math
from typing import List

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor, nn

from .. import families, flags
from ..sites import SITE_LIST, dest, layer_indices, per_layer, spec_items
from . import hc_decoding
from .attention import real_positions
from .base import Mixer
from .derived_cache import DerivedCache
from .registry import register_mixer
from .state_reorder import COPY

SYMBOLS = {"l": -1.0, "c": 0.0, "r": 1.0}
KERNELS = ("gaussian", "conv", "index")
CENTERS = ("floor", "exact")


FLAGS = flags.declare(
    "Hard-coded Gaussian attention", "hc_gaussian",
    *(flags.Flag(site.hc_offsets_flag, default, f"hard-coded {site.name.replace('_', ' ')} attention {what}",
                 metavar="OFFSETS")
      for site, default, what in zip(SITE_LIST, ("l,r", "l,c", "l,c,r"), (
          "centres i+o per head: numbers or l/c/r, cyclic over heads, ';' separates per-layer lists",
          "offsets, same syntax", "offsets around gamma*i, same syntax"))),
    flags.Flag("--hc-sigma", 1.0, "standard deviation of the hard-coded Gaussians", type=float, metavar="SIGMA",
               check=flags.positive_number),
    flags.Flag("--hc-kernel", "gaussian", "gaussian: the full pdf; conv: the pdf on the 3 positions nearest the "
               "centre; index: weight 1 on the position nearest the centre", choices=KERNELS),
    flags.Flag("--hc-cross-center", "floor", "hard-coded cross-attention centre: floor(gamma*i + o) as in the "
               "paper, or the unfloored gamma*i + o of the reference code", choices=CENTERS),
    flags.Flag("--hc-bias", False, "give the value and output projections of hard-coded heads a bias"),
    flags.Flag("--hc-weight-dropout", 0.0, "dropout on the hard-coded attention weights in training, one mask per "
               "sentence (the AppTek GaussianNet: the model dropout; You et al.: none)", type=float, metavar="P",
               check=flags.probability),
    flags.Flag("--learned-cross-heads", 1, "heads of the learned_cross mixer (SH-X: 1 head of dimension D)",
               type=int, metavar="N", check=flags.positive_integer),
    flags.Flag("--learned-cross-layers", "-1", "hc_gaussian_shx* architectures: comma-separated 0-based decoder "
               "layers that get a learned_cross sub-layer, negative counts from the end; the other layers have no "
               "cross attention", metavar="LAYERS", default_doc="-1, the last layer"),
)


def parse_offsets(spec, flag: str, num_layers: int, num_heads: int) -> List[List[float]]:
    """Per-layer, per-head offsets from ``spec`` (see the module docstring)."""

    def head_offsets(group):
        values = []
        for item in spec_items(group):
            try:
                value = SYMBOLS[item] if item in SYMBOLS else float(item)
            except ValueError:
                raise ValueError(f"{item!r} is not an offset (a number or one of l, c, r)") from None
            if not math.isfinite(value):
                raise ValueError(f"offset {item!r} is not finite")
            values.append(value)
        return [values[h % len(values)] for h in range(num_heads)]

    return per_layer(flag, spec, num_layers, parse=head_offsets, sep=";")


def layer_offsets(ctx, opts) -> List[float]:
    """The offsets of the heads of ``ctx``'s layer, from the site's --hc-*-offsets flag."""
    flag = ctx.site.hc_offsets_flag
    return parse_offsets(getattr(opts, dest(flag)), flag, ctx.num_layers, ctx.num_heads)[ctx.layer_idx]


def hard_coded_weights(distance: Tensor, sigma: float, kernel: str) -> Tensor:
    """Head weights from the distance ``j - mu`` between key position and centre, in fp32.

    fp32 whatever the model's dtype: fp16 would round the pdf's tail and its
    exponent, and the caller casts the finished weights.
    """
    d = distance.float()
    if kernel == "index":
        return ((d >= -0.5) & (d < 0.5)).float()
    pdf = torch.exp(-0.5 * (d / sigma) ** 2) / (sigma * math.sqrt(2.0 * math.pi))
    if kernel == "conv":
        return pdf * ((d >= -1.5) & (d < 1.5))
    return pdf


class _HardCodedAttention(Mixer):
    """Value projection, fixed per-head weights, output projection."""

    def __init__(self, embed_dim, num_heads, kdim, offsets, sigma, kernel, bias, weight_dropout=0.0):
        super().__init__(embed_dim, num_heads)
        self.weight_dropout = weight_dropout
        self.v_proj = nn.Linear(kdim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        # Not a parameter and not in the state dict: offsets are configuration.
        self.register_buffer("offsets", torch.tensor(offsets, dtype=torch.float32), persistent=False)
        self.sigma, self.kernel = float(sigma), kernel
        for proj in (self.v_proj, self.out_proj):  # as the reference code (Xavier-uniform, zero bias)
            nn.init.xavier_uniform_(proj.weight)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    def extra_repr(self):
        return f"offsets={self.offsets.tolist()}, sigma={self.sigma}, kernel={self.kernel}"

    def _mix(self, weights: Tensor, v: Tensor, need_weights: bool, need_head_weights: bool):
        """``weights``: (B or 1) x H x T x S in fp32; ``v``: B x H x S x head_dim."""
        B, H, S, d = v.shape
        T = weights.size(2)
        returned = weights  # as fairseq's MultiheadAttention: the weights before dropout
        if self.weight_dropout and self.training:
            # Like attention dropout, after masking, on the weights (the AppTek
            # GaussianNet); one mask per sentence, so the pattern is expanded.
            weights = F.dropout(weights.expand(B, H, T, S), self.weight_dropout, training=True)
        weights = weights.to(v.dtype)
        if weights.size(0) == 1:
            # One pattern for the whole batch: fold the batch into the columns of
            # a bmm over heads, so the pattern is never expanded (nor saved for
            # backward) as a B x H x T x S tensor.
            mixed = torch.bmm(weights[0], v.permute(1, 2, 0, 3).reshape(H, S, B * d))  # H x T x B*d
            mixed = mixed.view(H, T, B, d).permute(2, 0, 1, 3)  # B x H x T x d
        else:
            mixed = torch.matmul(weights, v)
        weights = self.fairseq_weights(returned.expand(B, H, T, S), v.dtype, need_weights, need_head_weights)
        return self.merge_heads(mixed), weights


# How far decoding_window looks when the mixer is built without --max-target-positions.
WINDOW_SCAN = 1 << 16


@register_mixer(
    "hc_gaussian",
    sites=("encoder_self", "decoder_self"),
    variants={
        "conv": {"hc_kernel": "conv"},
        "index": {"hc_kernel": "index"},
        "bias": {"hc_bias": True},
        "weight_dropout": {"hc_weight_dropout": 0.1, "hc_bias": True},
        "three_offsets_sigma2": {"hc_encoder_offsets": "l,c,r", "hc_decoder_offsets": "0,-2,l", "hc_sigma": 2.0},
    },
)
class HardCodedSelfAttention(_HardCodedAttention):
    """Hard-coded Gaussian self-attention centred at i + o_h (You et al., 2020, §3.1).

    In the decoder, incremental decoding keeps only the last ``window`` values
    (:meth:`decoding_window`): every older key's weight is exactly 0.0 in fp32. They are
    kept in a ring (``hc_decoding.py``).
    """

    def __init__(self, embed_dim, num_heads, offsets, sigma, kernel, bias, causal, weight_dropout=0.0,
                 max_length=None):
        super().__init__(embed_dim, num_heads, embed_dim, offsets, sigma, kernel, bias, weight_dropout)
        self.causal = causal
        self.window = self.decoding_window(max_length, offsets) if causal else None
        # The window's weights rotated to the ring's slots (_ring_weights), per (device, dtype), made once per
        # offsets tensor (its replacement or an in-place write makes them anew: derived_cache.py).
        self._window_weights = DerivedCache()

    def extra_repr(self):
        return f"{super().extra_repr()}, causal={self.causal}, window={self.window}"

    def _causal_weights(self, lo, hi, offsets=None):
        """H x (hi-lo) fp32 weights of the keys at j - i = -hi+1 .. -lo (oldest first), computed as forward does."""
        offsets = self.offsets if offsets is None else offsets
        distance = -torch.arange(hi - 1, lo - 1, -1, device=offsets.device).view(1, -1)
        return hard_coded_weights(distance - offsets.float().view(-1, 1), self.sigma, self.kernel)

    @torch.no_grad()
    def decoding_window(self, max_length, offsets):
        """How many of the latest keys a decoding step needs, or None for the whole prefix.

        Found numerically, not from a formula: the weights of every distance a
        target of ``max_length`` tokens can hold (--max-target-positions;
        WINDOW_SCAN without one) are evaluated as forward evaluates them, and
        the window ends where every head's weight is exactly 0.0 in fp32 from
        there on (the pdf underflows near 14.4 sigma + |o|; conv and index
        are 0 beyond their 3 / 1 positions by definition). Keys beyond the
        window then add exactly 0, so the window is the same function. If
        some weight at the longest distance is not 0, no window is shorter
        than the longest target: None keeps the cache, which grows only as
        far as the target does.
        """
        length = int(max_length or WINDOW_SCAN)
        # On the CPU from the configured offsets: the module may be built on the meta device.
        weights = self._causal_weights(0, length, torch.tensor(offsets, dtype=torch.float32, device="cpu"))
        nonzero = (weights != 0).any(dim=0).nonzero()
        if nonzero.numel() == 0:
            return 1  # every weight is 0: one zero-weight key keeps the shapes
        window = length - int(nonzero[0])  # the oldest key with a weight, counted from the query
        return None if window >= length else window

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        mixer = cls(ctx.embed_dim, ctx.num_heads, layer_offsets(ctx, opts), opts.hc_sigma, opts.hc_kernel,
                    opts.hc_bias, ctx.causal, opts.hc_weight_dropout, getattr(ctx.args, "max_target_positions", None))
        mixer.forward_context = ctx.forward_context  # a decoding step's ring rows, made once for every layer
        return mixer

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        T, B, _ = query.shape
        if incremental_state is not None and self.window is not None:
            return self._decode_window(incremental_state, value, key_padding_mask, need_weights or need_head_weights)
        v = self._values(value, key_padding_mask)
        if incremental_state is not None:  # a window as long as the longest target: the cache is cheaper
            buffer = self._get_input_buffer(incremental_state)
            query_pos = self.decoding_steps(buffer, B, T, query.device)  # B x T
            v, _, _ = self.cache_self_attention(incremental_state, buffer, None, pad_key=None, value=v)
        else:
            # Self-attention weights depend only on j - i, which is the same in
            # column indices as in per-sentence positions: left padding shifts
            # queries and keys alike, and pad keys carry zeroed values. So one
            # T x S pattern serves the whole batch (no B x H x T x S tensor).
            query_pos = torch.arange(T, device=query.device).unsqueeze(0)  # 1 x T
        key_pos = torch.arange(v.size(2), device=query.device)
        distance = key_pos.view(1, 1, 1, -1) - query_pos.unsqueeze(1).unsqueeze(-1)  # (B|1) x 1 x T x S
        weights = hard_coded_weights(distance - self.offsets.float().view(1, -1, 1, 1), self.sigma, self.kernel)
        if self.causal:
            weights = weights.masked_fill(distance > 0, 0.0)
        return self._mix(weights, v, need_weights, need_head_weights)

    def _values(self, value, key_padding_mask):
        """The B x H x S x D_h values of ``value`` (S x B x C), pads' zeroed (their weight lost, not renormalised)."""
        v = self.split_heads(self.v_proj(value))
        return v if key_padding_mask is None else v.masked_fill(key_padding_mask.view(v.size(0), 1, -1, 1), 0)

    def _decode_window(self, incremental_state, value, key_padding_mask, need_weights):
        """Causal decoding with the last ``self.window`` values as the whole state, in a ring (``hc_decoding.py``): each
        step one H x window weighting; a step without pads projects its value into the ring (``projects_into``)."""
        if need_weights:
            raise ValueError("hc_gaussian decoder self-attention keeps only its window while decoding "
                             "incrementally: it returns no attention weights there")
        buffer = self._get_input_buffer(incremental_state)
        direct = value.size(0) == 1 and key_padding_mask is None and hc_decoding.projects_into(self.v_proj, value)
        v = value if direct else self._values(value, key_padding_mask)
        dtype = torch.float32 if self.weight_dropout and self.training else v.dtype  # dropout: as _mix drops
        out = hc_decoding.decode_window(self, buffer, v, lambda: self._ring_weights(v.device, dtype), direct)
        self._set_input_buffer(incremental_state, buffer)
        return self.merge_heads(out), None

    def _ring_weights(self, device, dtype):
        """The window's weights rotated to the ring's slots (``hc_decoding.rotated_weights``) in ``dtype``: the
        same at every decoding step, so made once, not per step."""
        return self._window_weights.get(self.offsets, lambda: hc_decoding.rotated_weights(
            self._causal_weights(0, self.window)).to(device=device, dtype=dtype), (device, dtype))


@register_mixer(
    "hc_gaussian_cross",
    sites=("cross",),
    uses_length_ratio=True,
    variants={
        "exact": {"hc_cross_center": "exact"},
        "conv": {"hc_kernel": "conv"},
        "index": {"hc_kernel": "index"},
        "bias": {"hc_bias": True},
    },
)
class HardCodedCrossAttention(_HardCodedAttention):
    """Hard-coded Gaussian cross attention centred at floor(gamma i + o_h) (You et al., 2020, §3.2)."""

    def __init__(self, embed_dim, num_heads, kdim, offsets, sigma, kernel, bias, length_ratio, floor_center,
                 weight_dropout=0.0):
        super().__init__(embed_dim, num_heads, kdim, offsets, sigma, kernel, bias, weight_dropout)
        self.length_ratio, self.floor_center = float(length_ratio), floor_center

    def extra_repr(self):
        return f"{super().extra_repr()}, gamma={self.length_ratio}, floor={self.floor_center}"

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        if ctx.length_ratio is None:
            raise ValueError("--length-ratio: hard-coded cross attention needs the length ratio gamma "
                             "(mean source / mean target length)")
        return cls(ctx.embed_dim, ctx.num_heads, ctx.kdim, layer_offsets(ctx, opts), opts.hc_sigma, opts.hc_kernel,
                   opts.hc_bias, ctx.length_ratio, opts.hc_cross_center == "floor", opts.hc_weight_dropout)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        T, B, _ = query.shape
        buffer = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        if buffer is not None and "value" in buffer:
            # The encoder side is static: projected once at the first step.
            v, key_pos, pads = buffer["value"], buffer["key_positions"], buffer["key_padding_mask"]
        else:
            v = self.split_heads(self.v_proj(value))
            # Source sentences are left-padded: gamma * i must meet real positions.
            key_pos = real_positions(key_padding_mask, B, v.size(2), query.device)
            pads = key_padding_mask if key_padding_mask is not None else key_pos.new_zeros(key_pos.shape).bool()
        if buffer is not None:
            query_pos = self.decoding_steps(buffer, B, T, query.device)
            for name, tensor in (("value", v), ("key_positions", key_pos), ("key_padding_mask", pads)):
                self.keep_state(buffer, name, tensor, COPY)
            self._set_input_buffer(incremental_state, buffer)
        else:
            query_pos = torch.arange(T, device=query.device).unsqueeze(0)
        # The centres (B x H x T) in float64 so that floor(gamma * i) is the
        # floor of the exact product; the B x H x T x S distances in fp32.
        center = self.length_ratio * query_pos.double().unsqueeze(1) + self.offsets.double().view(1, -1, 1)
        if self.floor_center:
            center = torch.floor(center)
        distance = key_pos.float().view(key_pos.size(0), 1, 1, -1) - center.float().unsqueeze(-1)
        # Pads share real position 0: zero their weights (the mass is lost, not renormalised).
        weights = hard_coded_weights(distance, self.sigma, self.kernel).masked_fill(pads.view(B, 1, 1, -1), 0.0)
        return self._mix(weights, v, need_weights, need_head_weights)


@register_mixer("learned_cross", sites=("cross",), variants={"two_heads": {"learned_cross_heads": 2}})
def learned_cross_heads(ctx):
    """Learned cross attention with --learned-cross-heads heads (SH-X: one head of dimension D)."""
    heads = ctx.options(FLAGS).learned_cross_heads
    if ctx.embed_dim % heads:
        raise ValueError(f"--learned-cross-heads {heads}: must be a positive divisor of the decoder "
                         f"embedding dimension {ctx.embed_dim}")
    return MultiheadAttention(ctx.embed_dim, heads, kdim=ctx.kdim, vdim=ctx.kdim, dropout=ctx.dropout,
                              encoder_decoder_attention=True)


# The presets (families.py); the base size (the paper's WMT setting) has no
# suffix. HC-SA: hard-coded self-attention; HC-ALL: hard-coded cross
# attention as well; SH-X: HC-SA with one learned cross head (dim D) in the
# last decoder layer only; -SA: no self-attention sub-layers. The conv /
# index variants (Table 5) and -FF (Table 3) are flags: --hc-kernel
# conv|index, --no-encoder-ffn --no-decoder-ffn.
def _learned_cross_layers(args):
    """SH-X's per-layer --cross-mixer: learned_cross in the layers that
    --learned-cross-layers names (default: the last one), no cross attention elsewhere."""
    chosen = layer_indices("--learned-cross-layers", args.learned_cross_layers, args.decoder_layers)
    return ",".join("learned_cross" if i in chosen else "none" for i in range(args.decoder_layers))


_HC_SA = {"encoder_self_mixer": "hc_gaussian", "decoder_self_mixer": "hc_gaussian"}
families.declare(
    __name__, "hard-coded Gaussian attention", "hc_gaussian",
    families.Family(
        "hc_gaussian", "HC-SA: hard-coded encoder and decoder self-attention, learned cross attention", _HC_SA,
        {"tiny": families.TESTS, "iwslt": "You et al. Tables 2 (small datasets), 5 and 7 (HC-SA; also Table 6, "
                                          "which has no recipe)",
         "base": "You et al. Tables 2 (large datasets) and 3 (HC-SA)"},
        unsuffixed_base=True, benchmark="mechanism", ctranslate2=families.OWN_PARAMETERS),
    families.Family(
        "hc_gaussian_all", "HC-ALL: hard-coded cross attention as well", {**_HC_SA, "cross_mixer": "hc_gaussian_cross"},
        {"tiny": families.TESTS, "iwslt": "You et al. Table 2 (small datasets, HC-ALL)",
         "base": "You et al. Table 2 (large datasets, HC-ALL)"},
        unsuffixed_base=True, ctranslate2=families.OWN_PARAMETERS),
    families.Family(
        "hc_gaussian_shx", "SH-X: HC-SA with a single learned cross head (dim D) in the last decoder layer and no "
        "cross attention elsewhere", {**_HC_SA, "cross_mixer": _learned_cross_layers},
        {"tiny": families.TESTS, "iwslt": "You et al. Table 2 (small datasets) and Table 7 (SH-X)",
         "base": "You et al. Table 2 (large datasets) and Table 3 (SH-X)"},
        unsuffixed_base=True, benchmark="mechanism", ctranslate2=families.OWN_PARAMETERS),
    families.Family(
        "hc_gaussian_shx_nosa", "SH-X -SA: SH-X's cross attention and no self-attention sub-layers",
        {"encoder_self_mixer": "none", "decoder_self_mixer": "none", "cross_mixer": _learned_cross_layers},
        {"tiny": families.TESTS, "iwslt": "You et al. Table 7 (SH-X/-SA)", "base": "You et al. Table 3 (SH-X/-SA)"},
        unsuffixed_base=True, ctranslate2=families.OWN_PARAMETERS),
)
