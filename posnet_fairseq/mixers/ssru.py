"""``ssru``: the Simpler Simple Recurrent Unit of Kim et al. (2019) in place of decoder self-attention.

Kim, Junczys-Dowmunt, Hassan, Aji, Heafield, Grundkiewicz & Bogoychev, "From
Research to Production and Back: Ludicrously Fast Neural Machine
Translation" (WNGT 2019), the SSRU equations (1)-(3); the AAN+ paper (Zhang
et al., section 6.2 and Tables 2, 4, 7) uses it as a baseline::

    f_t = sigmoid(W_f x_t + b_f)                        (1)  forget gate
    c_t = f_t * c_{t-1} + (1 - f_t) * (W x_t)           (2)  cell, c_0 = 0
    o_t = ReLU(c_t)                                     (3)  output

``*`` is elementwise; ``x_t`` is the layer input at target step t (T x B x C).
SRU's reset gate, highway connection and output projection are gone: ``W``
(no bias) and ``W_f`` (with bias) are the only parameters, 2d^2 + d per layer
against MHA's 4d^2 + 4d. Without bias on ``W`` and without an output
projection, as Marian (Kim et al.'s toolkit) and Sockeye build it, the
parameter counts of AAN+ Tables 2 and 4 come out exactly (see
tests/test_ssru.py and docs/aan-baselines.md). fairseq's decoder layer adds
the residual, dropout and LayerNorm around it as around self-attention.

Training, parallel form. (2) is a first-order linear recurrence
``c_t = a_t c_{t-1} + b_t`` with ``a_t = f_t``, ``b_t = (1 - f_t) W x_t``. Its
closed form ``c_t = sum_k exp(L_t - L_k) b_k`` (``L_t`` = cumulative sum of
log f) cannot be computed as ``exp(L_t) * cumsum(exp(-L_k) b_k)``: log f is
unbounded below (f -> 0), so exp(-L_k) overflows within a few steps. Instead
:func:`linear_recurrence` runs an inclusive parallel prefix scan (Hillis &
Steele) of the affine maps ``c -> a_t c + b_t``: ceil(log2 T) rounds of
elementwise products and sums over the whole sequence, no loop over time
steps. It only ever multiplies numbers in [0, 1] (products of gates) and adds
bounded terms, so nothing overflows: a product that underflows to 0 is a
contribution the sequential loop also loses. |c_t| <= max_k |W x_k| because
the weights of the b_k sum to at most 1. The scan runs in fp32 whatever the
model's dtype.

Decoding keeps ``c`` (B x C) per layer: one step is ``c = f c + (1 - f) W x``,
O(d) state that does not grow with the step.

Padding: a pad step leaves the cell unchanged (f = 1, no input), so left- or
right-padded targets give the real tokens the same outputs. fairseq's
``attn_mask`` is ignored: the recurrence is causal by construction. No
attention dropout applies (there are no attention weights); the layer's
residual dropout does.
"""
from typing import Optional

import torch
from torch import Tensor, nn

from .. import families
from .aan import baseline_family
from .base import Mixer
from .registry import register_mixer
from .state_reorder import COPY


def linear_recurrence(a: Tensor, b: Tensor, initial: Optional[Tensor] = None) -> Tensor:
    """All ``c_t = a_t * c_{t-1} + b_t`` along dim 0, ``c_{-1} = initial`` (zeros when None).

    An inclusive Hillis-Steele scan: after the round with shift s, entry t
    holds the composition of the maps t-2s+1 .. t as (product of a, offset b);
    ceil(log2 T) rounds in all.
    """
    if initial is not None:
        b = torch.cat([b[:1] + a[:1] * initial.unsqueeze(0), b[1:]])
    length, shift = a.size(0), 1
    while shift < length:
        # Compose each map with the one `shift` steps earlier; the offsets use
        # the old products, so b is updated before a.
        b = torch.cat([b[:shift], b[shift:] + a[shift:] * b[:-shift]])
        if 2 * shift < length:  # the products are not needed after the last round
            a = torch.cat([a[:shift], a[shift:] * a[:-shift]])
        shift *= 2
    return b


@register_mixer("ssru", sites=("decoder_self",))
class SSRU(Mixer):
    """SSRU (Kim et al., 2019): a gated recurrence with O(d) decoding state replaces decoder self-attention."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__(embed_dim, num_heads)
        self.linear = nn.Linear(embed_dim, embed_dim, bias=False)  # W of (2)
        self.forget_gate = nn.Linear(embed_dim, embed_dim)  # W_f, b_f of (1)
        nn.init.xavier_uniform_(self.linear.weight)
        nn.init.xavier_uniform_(self.forget_gate.weight)
        nn.init.zeros_(self.forget_gate.bias)

    @classmethod
    def build(cls, ctx):
        return cls(ctx.embed_dim, ctx.num_heads)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        if before_softmax:
            raise ValueError("ssru has no attention logits (before_softmax=True)")
        length = query.size(0)
        # Projections in the model's dtype, the recurrence in fp32.
        forget = torch.sigmoid(self.forget_gate(query).float())
        inputs = (1.0 - forget) * self.linear(query).float()
        if key_padding_mask is not None:
            # During decoding the mask covers the whole prefix: this block's steps are the last ones.
            pad = key_padding_mask[:, -length:].t().unsqueeze(-1)
            forget = forget.masked_fill(pad, 1.0)
            inputs = inputs.masked_fill(pad, 0.0)

        buffer = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        previous = None if buffer is None else buffer.get("cell")
        if length == 1:
            cell = inputs if previous is None else forget * previous.unsqueeze(0) + inputs
        else:
            cell = linear_recurrence(forget, inputs, previous)
        if buffer is not None:
            self.keep_state(buffer, "cell", cell[-1], COPY)  # B x C: the whole decoding state of this layer
            self._set_input_buffer(incremental_state, buffer)
        return torch.relu(cell).to(query.dtype), None

# The presets (families.py): the AAN+ paper's baseline; its base size has no suffix, as in that paper.
families.declare(__name__, "SSRU", "aan-baselines", baseline_family(
    "ssru", "ssru", "SSRU", "SSRU (Kim et al., 2019) in every decoder self-attention", families.OWN_PARAMETERS))
