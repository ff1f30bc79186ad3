"""``aan``: the (generalized) average attention network of the decoder.

Zhang, Xiong & Su (2018), "Accelerating Neural Transformer via an Average
Attention Network", and Zhang et al., "AAN+: Generalized Average Attention
Network for Accelerating Neural Transformer". Decoder self-attention only.

For the layer input ``z_1 .. z_m`` (T x B x C), each pattern ``p`` gives a
weighted cumulative average (Eqs. 4, 6)::

    g_j = sum_{k<=j} a_k z_k / sum_{k<=j} a_k

with ``a_k`` (Eqs. 7-10; ``k`` is the 1-based absolute target position, the
decoding step + 1):

* ``avg``  a_k = 1                        (the 2018 AAN average, Eq. 7)
* ``ner``  a_k = exp(alpha k)             (nearer tokens weigh more, Eq. 8)
* ``far``  a_k = exp(-beta k)             (farther tokens weigh more, Eq. 9)
* ``wet``  a_k = exp(gamma U z_k)         (per dimension, U: Linear(d, d), Eq. 10)

``--aan-activation relu|square`` replaces exp by relu(x) or x^2 for ``ner`` and
``wet`` (Table 5; ``far`` and ``avg`` keep their forms). Several patterns
(``--aan-patterns ner,far``, Table 6) run side by side and their averages are
average-pooled into one ``g``. The 2018 AAN (``--aan-ffn``) passes ``g`` through
an FFN (Eq. 2); AAN+ has none. The gate (Eqs. 3, 5) is
``[i; f] = sigmoid(W [z; g] + b)``, ``o = i * z + f * g``; the fairseq decoder
layer then does ``LN(z + dropout(o))`` (Eq. 17).

Numerics. Every pattern is written as ``a_k = exp(s_k) * w_k`` with a log-scale
``s_k`` (alpha k, -beta k, gamma U z_k; 0 for avg and the relu/square
activations) and a linear factor ``w_k`` (1, or relu(x) / x^2). Sums are kept
relative to a reference ``r >= max s - LEVEL``, so every exp(s_k - r) is at
most e^LEVEL and the largest term is at least 1: nothing overflows at any
length (exp(0.1 k) itself overflows fp32 at k = 888 and fp16 at k = 111) and
no real prefix underflows to 0/0. All of it runs in fp32 and is cast back.

* Training, the masked form (Eq. 11): cumulative sums over time. The reference
  of row ``j`` is its running max rounded down to a multiple of LEVEL; rows
  that share a reference share one cumulative sum, so the loop runs over the
  few distinct reference levels (one for lengths below LEVEL / alpha), never
  over time.
* Decoding, the dynamic programme (Eqs. 12-14): per pattern the running
  numerator ``g~`` (B x C), denominator ``a~`` (B x 1, or B x C for wet) and
  their reference ``r``; a step rescales them by exp(r_old - r_new) and adds
  the new token. The state does not grow with the step. AVG's steps without
  pads keep the average itself instead, ``g_n = g_{n-1} + (z_n - g_{n-1}) / n``
  (Eq. 12 divided by Eq. 13's ``a~_n = n``), updated in place in one operator,
  with the count ``n`` a Python int (no tensor to make or read per layer and
  step): on a GPU a decoding step is bound by
  kernel launches (issue 48), and a sum, a count and their division are three
  per layer, plus the count's beam reorder. Every layer of the decoder keeps
  its mean in one B x L x C tensor (a slot per layer, made at a search's first
  step for every layer: ``Mixer.shared``), so that a beam reorder copies all of
  them with one ``index_select`` (``state_reorder.COMPOSED``: made once for
  every layer that holds the same tensor), not one per layer. The means are
  written in place, which that composition allows: every layer is reordered
  before any of them steps, so the tensor a reorder composes from is read by
  no later reorder.

Padding: pad keys get s = -inf (weight 0) and positions come from the padding
mask, so a left- or right-padded target gives the same averages for its real
tokens; a row whose prefix has no weight (only pads, or relu weights all 0)
averages to 0 instead of 0/0. fairseq's ``attn_mask`` is ignored: the average
is causal by construction.
"""
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import families, flags
from .attention import autocast_off, real_positions
from .base import Mixer
from .functional_calls import linear
from .registry import register_mixer
from .state_reorder import COMPOSED, COPY, SHARED

PATTERNS = ("avg", "ner", "far", "wet")
ACTIVATIONS = ("exp", "relu", "square")
# Exponent headroom per reference level: terms are at most e^32, so a cumulative
# sum of up to e^56 terms times |z| <= 65504 (fp16's max) stays below fp32's max.
LEVEL = 32.0


def parse_patterns(spec) -> Tuple[str, ...]:
    """The patterns of ``--aan-patterns`` (its flag type): comma-separated, each once."""
    names = [n.strip() for n in str(spec).split(",")]
    if any(n not in PATTERNS for n in names):
        raise ValueError(f"give a comma-separated list of {', '.join(PATTERNS)}")
    if len(set(names)) != len(names):
        raise ValueError("a pattern is listed twice")
    return tuple(names)


FLAGS = flags.declare(
    "AAN / AAN+", "aan",
    flags.Flag("--aan-patterns", "avg", "average-attention patterns, comma-separated from avg, ner, far, wet; "
               "several are average-pooled (AAN+ Table 6)", type=parse_patterns, metavar="LIST"),
    flags.Flag("--aan-alpha", 0.1, "NER pattern exp(alpha k)", type=float, metavar="A",
               check=flags.positive_number),
    flags.Flag("--aan-beta", 0.1, "FAR pattern exp(-beta k)", type=float, metavar="B", check=flags.positive_number),
    flags.Flag("--aan-gamma", 0.1, "WET pattern exp(gamma U z_k)", type=float, metavar="G",
               check=flags.positive_number),
    flags.Flag("--aan-activation", "exp", "activation of the NER and WET patterns: exp, relu or square "
               "(AAN+ Table 5)", metavar="ACT", choices=ACTIVATIONS),
    flags.Flag("--aan-ffn", False, "FFN on the average before the gate, as in the 2018 AAN (AAN+ has none)"),
    flags.Flag("--aan-ffn-dim", None, "inner dimension of the --aan-ffn FFN", type=int, metavar="N",
               default_doc="--decoder-ffn-embed-dim", check=flags.positive_integer),
)


def weighted_prefix_average(s: Tensor, v: Tensor, w: Optional[Tensor] = None,
                            state: Optional[Tuple[Tensor, Tensor, Tensor]] = None):
    """Masked form (Eq. 11): ``g_j = sum_{k<=j} e^{s_k} w_k v_k / sum_{k<=j} e^{s_k} w_k``.

    ``s`` and ``w`` are T x B x P (P = 1 or C), fp32, ``s`` may be -inf (weight
    0); ``w`` None means 1; ``v`` is T x B x C fp32. ``state`` = (numerator
    B x C, denominator B x P, reference B x P) of the tokens before this block.
    Returns ``g`` (T x B x C) and the state after the block.
    """
    if state is not None:
        # The earlier tokens enter as one summarised token at the reference.
        num0, den0, ref0 = state
        s = torch.cat([ref0.unsqueeze(0), s], 0)
        wv = torch.cat([num0.unsqueeze(0), v if w is None else w * v], 0)
        w = torch.cat([den0.unsqueeze(0), torch.ones_like(s[1:]) if w is None else w], 0)
    else:
        wv = v if w is None else w * v
    running_max = torch.cummax(s, dim=0).values
    # Rows with no weight yet (running max -inf) sit at level 0 with zero sums.
    level = torch.nan_to_num(torch.floor(running_max / LEVEL), neginf=0.0)
    num = den = None
    for lv in torch.unique(level).tolist():
        ref = lv * LEVEL
        # Rows at this level have every s_k - ref < LEVEL; the clamp only touches
        # later rows of higher levels, which the next iteration computes.
        e = torch.exp((s - ref).clamp(max=LEVEL))
        n = torch.cumsum(e * wv, dim=0)
        d = torch.cumsum(e if w is None else e * w, dim=0)
        if num is None:
            num, den = n, d
        else:
            at = level == lv
            num, den = torch.where(at, n, num), torch.where(at, d, den)
    ref = level * LEVEL
    if state is not None:
        num, den, ref = num[1:], den[1:], ref[1:]
    return safe_divide(num, den), (num[-1], den[-1], ref[-1])


def prefix_average_step(s: Tensor, v: Tensor, w: Optional[Tensor], state):
    """One decoding step of the dynamic programme (Eqs. 12-14), B x P / B x C tensors."""
    wv = v if w is None else w * v
    if state is None:
        ref = torch.nan_to_num(s, neginf=0.0)
        e = torch.exp(s - ref)
        num, den = e * wv, (e if w is None else e * w)
    else:
        num, den, ref_old = state
        ref = torch.maximum(ref_old, s)  # the running max; a pad step (-inf) keeps it
        decay, e = torch.exp(ref_old - ref), torch.exp(s - ref)
        num = num * decay + e * wv
        den = den * decay + (e if w is None else e * w)
    return safe_divide(num, den), (num, den, ref)


def running_mean_step(v: Tensor, num: Tensor, den: Tensor):
    """One decoding step of the ``avg`` pattern (a_k = 1, Eq. 7) after its first, for a real token: s = 0 keeps
    the reference at 0 and every decay at exp(0) = 1, so :func:`prefix_average_step`'s update is exactly a sum
    and a count, computed here without the exps (the denominator is then at least 1)."""
    num, den = num + v, den + 1.0
    return num / den, (num, den)


def mean_in_place_step(v: Tensor, mean: Tensor, count: int) -> Tensor:
    """AVG's average after ``count`` real tokens in every row (Eqs. 12-14 with a_k = 1): the B x C fp32 ``mean`` of
    the ``count - 1`` before, updated in place by ``v`` in one operator, ``mean + (v - mean) / count``; the first
    step copies ``v`` into it."""
    return mean.copy_(v) if count == 1 else mean.lerp_(v, 1.0 / count)


def safe_divide(num: Tensor, den: Tensor) -> Tensor:
    """num / den, and 0 where nothing has weight yet (den = 0 implies num = 0)."""
    positive = den > 0
    return torch.where(positive, num / torch.where(positive, den, torch.ones_like(den)), torch.zeros_like(num))


@register_mixer(
    "aan",
    sites=("decoder_self",),
    variants={
        "ner": {"aan_patterns": "ner"},
        "far": {"aan_patterns": "far"},
        "wet": {"aan_patterns": "wet"},
        "ner_far": {"aan_patterns": "ner,far"},
        "all_patterns": {"aan_patterns": "avg,ner,far,wet"},
        "ner_relu": {"aan_patterns": "ner", "aan_activation": "relu"},
        "wet_relu": {"aan_patterns": "wet", "aan_activation": "relu"},
        "ner_square": {"aan_patterns": "ner", "aan_activation": "square"},
        "wet_square": {"aan_patterns": "wet", "aan_activation": "square"},
        "ffn": {"aan_ffn": True},
        "wet_ffn": {"aan_patterns": "wet", "aan_ffn": True},
    },
)
class AverageAttention(Mixer):
    """Average attention (AAN / AAN+): gated weighted cumulative average, O(1)-state decoding."""

    # WET's pattern logits are computed in fp32 from its weights (_pattern): int8 decoding
    # (models/int8.py) leaves that projection in fp32.
    FP32_LINEARS = ("wet_proj",)

    def __init__(self, embed_dim: int, num_heads: int, patterns=("avg",), alpha=0.1, beta=0.1, gamma=0.1,
                 activation="exp", ffn_dim: Optional[int] = None, ffn_dropout: float = 0.0):
        super().__init__(embed_dim, num_heads)
        self.patterns = list(patterns)
        self.alpha, self.beta, self.gamma = float(alpha), float(beta), float(gamma)
        self.activation = activation
        # U of Eq. 10. A bias would cancel in the normalisation of exp weights.
        self.wet_proj = nn.Linear(embed_dim, embed_dim, bias=False) if "wet" in self.patterns else None
        if ffn_dim:
            self.ffn = nn.Sequential(nn.Linear(embed_dim, ffn_dim), nn.ReLU(), nn.Dropout(ffn_dropout),
                                     nn.Linear(ffn_dim, embed_dim))
        else:
            self.ffn = None
        # W, b of Eq. 3: rows [:C] give the input gate i, rows [C:] the forget gate f.
        self.gate = nn.Linear(2 * embed_dim, 2 * embed_dim)
        nn.init.xavier_uniform_(self.gate.weight)
        nn.init.zeros_(self.gate.bias)
        # This layer's slot among the side's AVG means while decoding, and their number (the module doc).
        self.mean_slot, self.mean_slots = 0, 1

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        ffn_dim = None
        if opts.aan_ffn:
            ffn_dim = opts.aan_ffn_dim or getattr(ctx.args, "decoder_ffn_embed_dim", 4 * ctx.embed_dim)
        mixer = cls(ctx.embed_dim, ctx.num_heads, opts.aan_patterns, opts.aan_alpha, opts.aan_beta, opts.aan_gamma,
                    opts.aan_activation, ffn_dim, getattr(ctx.args, "activation_dropout", 0.0) or 0.0)
        if ctx.forward_context is not None:  # every layer's AVG mean in one tensor (the module doc)
            mixer.forward_context = ctx.forward_context
            mixer.mean_slot, mixer.mean_slots = ctx.layer_idx, ctx.num_layers
        return mixer

    def _pattern(self, name: str, z: Tensor, k: Tensor, pad: Optional[Tensor]):
        """(s, w) of ``a_k = exp(s) * w`` (Eqs. 7-10 / Table 5), fp32, pads excluded.

        ``z`` T x B x C fp32, ``k`` T x B x 1 fp32 1-based positions (NER and FAR only), ``pad`` T x B x 1 bool.
        """
        if name == "wet":
            with autocast_off(z):
                x = self.gamma * F.linear(z, self.wet_proj.weight.float())
        elif name == "ner":
            x = self.alpha * k
        elif name == "far":
            x = -self.beta * k
        else:
            x = z.new_zeros(z.shape[:2] + (1,))
        w = None
        if name in ("ner", "wet") and self.activation != "exp":
            w = torch.relu(x) if self.activation == "relu" else x * x
            x = torch.zeros_like(w)
        if pad is not None:
            x = x.masked_fill(pad, float("-inf"))
        return x, w

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        T, B, C = query.shape
        z = query if query.dtype == torch.float32 else query.float()  # (fp32: no operator dispatched, issue 48)
        pad = None
        # Only NER and FAR weigh by position: avg and wet count no steps.
        positional = "ner" in self.patterns or "far" in self.patterns
        k = buf = None
        if incremental_state is not None:
            buf = self._get_input_buffer(incremental_state)
            if positional:
                k = self.decoding_steps(buf, B, T, query.device).t().unsqueeze(-1).float() + 1
            if key_padding_mask is not None:
                pad = key_padding_mask[:, -T:].t().unsqueeze(-1)
        else:
            if positional:
                k = real_positions(key_padding_mask, B, T, query.device).t().unsqueeze(-1).float() + 1
            if key_padding_mask is not None:
                pad = key_padding_mask.t().unsqueeze(-1)

        averages = []
        for name in self.patterns:
            if buf is None:
                s, w = self._pattern(name, z, k, pad)
                averages.append(weighted_prefix_average(s, z, w)[0])
            else:
                averages.append(self._decoded_average(buf, name, z, k, pad))
        g = averages[0] if len(averages) == 1 else torch.stack(averages).mean(0)
        g = g if g.dtype == query.dtype else g.to(query.dtype)
        if buf is not None:
            self._set_input_buffer(incremental_state, buf)

        if self.ffn is not None:
            g = self.ffn(g)
        gates = linear(self.gate, torch.cat([query, g], dim=-1))
        # o = i * z + f * g (Eq. 5). Without gradients the second product is fused with the sum (one kernel
        # less: issue 48; addcmul's backward would cost two products more than the two multiplies'), and the
        # sigmoid and both products write into the gate's output, which nothing else reads: three tensors fewer
        # allocated per layer and step.
        if torch.is_grad_enabled() or gates.dtype != query.dtype:
            i, f = torch.sigmoid(gates).chunk(2, dim=-1)
            # (under autocast the products are taken in the query's wider type)
            return (i * query + f * g if torch.is_grad_enabled() else torch.addcmul(i * query, f, g)), None
        i, f = gates.sigmoid_().chunk(2, dim=-1)
        return i.mul_(query).addcmul_(f, g), None

    def _decoded_average(self, buf: Dict[str, Optional[Tensor]], name: str, z: Tensor, k, pad):
        """Pattern ``name``'s T x B x C fp32 averages of an incremental call, its state in ``buf`` advanced: AVG's
        steps without pads in the mean form (:func:`mean_in_place_step`) until a pad or a block of several tokens
        needs the sums, then those (the module doc)."""
        T = z.size(0)
        if name == "avg" and T == 1 and pad is None and "avg_num" not in buf:
            count = buf.get("avg_count", 0) + 1
            means = buf.get("avg_mean")
            if means is None:
                rows, width = z.shape[1:]
                means = self.shared(("aan_means", rows), lambda: z.new_zeros(rows, self.mean_slots, width))
            self.keep_state(buf, "avg_mean", means, COMPOSED)
            self.keep_state(buf, "avg_count", count, SHARED)  # the same in every row: a Python int, no tensor
            return mean_in_place_step(z[0], means[:, self.mean_slot], count).unsqueeze(0)
        state = self._state(buf, name)
        if name == "avg" and state is not None and T == 1 and pad is None:
            g, state = running_mean_step(z[0], *state[:2])
            g = g.unsqueeze(0)
        else:
            if state is not None and state[2] is None:  # avg's reference: always 0
                state = (*state[:2], torch.zeros_like(state[1]))
            s, w = self._pattern(name, z, k, pad)
            if T == 1:
                g, state = prefix_average_step(s[0], z[0], None if w is None else w[0], state)
                g = g.unsqueeze(0)
            else:
                g, state = weighted_prefix_average(s, z, w, state)
        # avg's reference is 0 at every step (s is 0 or -inf): it is not kept, nor reordered.
        for part, tensor in zip(("num", "den") if name == "avg" else ("num", "den", "ref"), state):
            self.keep_state(buf, f"{name}_{part}", tensor, COPY)
        return g

    def _state(self, buf: Dict[str, Optional[Tensor]], name: str):
        """(numerator, denominator, reference or None) of pattern ``name`` in ``buf``, or None before its first
        token; AVG's mean form is taken out of ``buf`` and returned as its sums."""
        if name == "avg" and "avg_mean" in buf:
            mean, count = buf.pop("avg_mean")[:, self.mean_slot], buf.pop("avg_count")
            return mean * count, mean.new_full((mean.size(0), 1), float(count)), None
        num = buf.get(f"{name}_num")
        return None if num is None else (num, buf[f"{name}_den"], buf.get(f"{name}_ref"))

    def extra_repr(self):
        return (f"patterns={','.join(self.patterns)}, alpha={self.alpha}, beta={self.beta}, gamma={self.gamma}, "
                f"activation={self.activation}, ffn={self.ffn is not None}")


# The presets (families.py): the aan mixer in every decoder self-attention;
# the base size has no suffix, as in the AAN+ paper. Pattern combinations
# (Table 6) and activations (Table 5) are flags: --aan-patterns ner,far,
# --aan-activation relu.
def _aan_plus(pattern, formula, tables, benchmark="mechanism"):
    return families.Family(
        f"aan_plus_{pattern}", f"AAN+ with {pattern.upper()} ({formula}), gate, no FFN",
        {"decoder_self_mixer": "aan", "aan_patterns": pattern, "aan_ffn": False},
        {"tiny": families.TESTS, "base": tables, "deep": f"AAN+ Table 4 (deep, {pattern.upper()})",
         "big": f"AAN+ Table 4 (big, {pattern.upper()})"},
        unsuffixed_base=True, benchmark=benchmark,
        ctranslate2=families.OWN_PARAMETERS)


def baseline_family(prefix, mixer, label, what, ctranslate2):
    """The presets of a baseline of the AAN+ paper (SSRU, linear attention): ``mixer`` in every decoder
    self-attention, at the paper's sizes; ``ctranslate2`` as in ``families.Family``."""
    return families.Family(
        prefix, what, {"decoder_self_mixer": mixer},
        {"tiny": families.TESTS, "base": f"AAN+ Tables 2 and 7 ({label})", "deep": f"AAN+ Table 4 (deep, {label})",
         "big": f"AAN+ Table 4 (big, {label})"},
        unsuffixed_base=True, benchmark="mechanism",
        ctranslate2=ctranslate2)


families.declare(
    __name__, "AAN and AAN+ average attention", "aan",
    families.Family(
        "aan", "the 2018 AAN (AAN+ Eq. 2): AVG + FFN + gate",
        {"decoder_self_mixer": "aan", "aan_patterns": "avg", "aan_ffn": True},
        {"tiny": families.TESTS, "base": "the 2018 AAN (AAN+ Eq. 2): in no AAN+ table; a reference row of recipes/aan",
         "deep": "the 2018 AAN at AAN+ Table 4's deep size", "big": "the 2018 AAN at AAN+ Table 4's big size"},
        unsuffixed_base=True,
        ctranslate2=families.OWN_PARAMETERS),
    _aan_plus("avg", "the plain cumulative average", "AAN+ Tables 2, 6 (and its combinations) and 7 (AVG)"),
    _aan_plus("ner", "exp(alpha k)", "AAN+ Tables 2 and 7 (NER; Table 6 trains its row as aan_plus_avg "
              "--aan-patterns ner); Table 5 with --aan-activation"),
    _aan_plus("far", "exp(-beta k)", "AAN+ Tables 2 and 7 (FAR; Table 6 trains its row as aan_plus_avg "
              "--aan-patterns far)"),
    _aan_plus("wet", "exp(gamma U z_k)", "AAN+ Tables 2 and 7 (WET; Table 6 trains its row as aan_plus_avg "
              "--aan-patterns wet); Table 5 with --aan-activation"),
)
