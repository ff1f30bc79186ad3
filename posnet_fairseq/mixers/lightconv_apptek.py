"""AppTek's light convolution (``lightconv_apptek``): the "LightConv" baseline of the PosNet paper.

Schmidt & Di Gangi (PosNet paper, Tables 2 and 5) compare rPosNet with a light
convolution written as position-only attention: every head h has one learned
weight per clipped distance, shared by all query positions, and the weights
of the keys a query sees are softmax-normalised::

    e_h(n, m) = W[h, clip(m - n, -K, K) + K]                     W: H x (2K+1)
    a_h(n, m) = softmax over the valid keys m of e_h(n, m)
    out_n     = W_o concat_h( sum_m a_h(n, m) (W_v x_m)_h )

Valid keys are the real (non-pad) tokens, in the decoder those up to n, and,
without global context, those within the window |m - n| <= K: the softmax is
renormalised over the window, so a query at a sentence border spreads all its
mass over fewer keys (unlike fairseq's ``LightweightConv1dTBC``, whose
zero-padded borders are not renormalised). The window is symmetric in the
encoder and the decoder; the decoder is made causal by the mask. With
``--lightconv-global-context`` (Table 5's "+ global context" step) the window
mask is dropped: distances beyond K share the border weights, as rPosNet's
clipped distances do, and every query sees the whole sentence.

This is not fairseq's LightConv (no GLU, no kernel per layer, no DropConnect):
it is a separate mechanism, labelled as AppTek's. n and m are real 0-based
positions from the padding mask (sources are left-padded). Table 5's
"+ GeLU gating" step is the PosNet gating wrapper (``--encoder-self-gating on
--decoder-self-gating on``, see gating.py), which wraps this mixer's
``v_proj``/``out_proj``.
"""
import torch
import torch.nn.functional as F
from torch import nn

from .. import flags
from .attention import masked_softmax
from .base import Mixer
from .clipped_decoding import clipped_decoding_step
from .registry import register_mixer

# Option sets the contract tests run besides the defaults: global context, and
# a window shorter than the test sentences, with and without global context.
VARIANTS = {
    "global": {"lightconv_global_context": True},
    "k2": {"lightconv_max_relative": 2},
    "global_k2": {"lightconv_global_context": True, "lightconv_max_relative": 2},
}


FLAGS = flags.declare(
    "AppTek light convolution", "posnet",
    flags.Flag("--lightconv-max-relative", 16, "lightconv_apptek: one weight per distance in [-K, K] per head; "
               "without global context keys further than K are not seen", type=int, metavar="K",
               check=flags.non_negative_integer),
    flags.Flag("--lightconv-global-context", False, "lightconv_apptek: every query sees the whole sentence, "
               "distances beyond K share the border weights (PosNet paper Table 5 '+ global context')"),
)


@register_mixer("lightconv_apptek", sites=("encoder_self", "decoder_self"), variants=VARIANTS)
class AppTekLightConv(Mixer):
    """AppTek's light convolution: softmax over learned per-head distance weights in a +-K window.

    ``v_proj`` (applied to the value input before the head split) and
    ``out_proj`` (applied to the concatenated heads) are ``nn.Linear`` with
    bias, so the PosNet gating wrapper can gate them. Incremental decoding
    keeps the last K values and, with global context, the sum of the older
    ones: constant cost per step (:meth:`_decode`).
    """

    def __init__(self, embed_dim, num_heads, max_relative=16, global_context=False, dropout=0.0, causal=False):
        super().__init__(embed_dim, num_heads)
        self.max_relative = max_relative
        self.global_context = global_context
        self.dropout = dropout
        self.causal = causal
        self.weight = nn.Parameter(torch.empty(num_heads, 2 * max_relative + 1))
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.reset_parameters()

    def reset_parameters(self):
        # AppTek's init_weights: xavier_uniform_ on every parameter with dim > 1,
        # so W gets U(+-sqrt(6 / (H + 2K + 1))); biases start at zero.
        for p in (self.weight, self.v_proj.weight, self.out_proj.weight):
            nn.init.xavier_uniform_(p)
        nn.init.zeros_(self.v_proj.bias)
        nn.init.zeros_(self.out_proj.bias)

    @classmethod
    def build(cls, ctx):
        opts = ctx.options(FLAGS)
        return cls(ctx.embed_dim, ctx.num_heads, opts.lightconv_max_relative, opts.lightconv_global_context,
                   ctx.dropout, ctx.causal)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        # attn_mask (fairseq's -inf future mask, given only when not
        # incremental) is not used: causality comes from the positions below.
        if before_softmax:
            raise ValueError("lightconv_apptek does not return pre-softmax logits (before_softmax=True)")
        length, batch, _ = query.shape
        v = self.split_heads(self.v_proj(value))  # B x H x S x d_h
        acc = torch.promote_types(v.dtype, torch.float32)
        if incremental_state is not None:
            return self._decode(incremental_state, v, key_padding_mask, acc, need_weights or need_head_weights)
        # Teacher-forced from here on (decoding returned above).
        v, pad, query_pos, key_pos = self.self_attention_positions(None, key_padding_mask, prev_value=v)
        key_len = v.size(2)

        distance = key_pos.unsqueeze(1) - query_pos.unsqueeze(2)  # B x T x S, m - n
        slot = distance.clamp(-self.max_relative, self.max_relative) + self.max_relative
        # Energies and softmax in (at least) fp32 whatever the model's dtype; W
        # is gathered per head: H x B x T x S -> B x H x T x S.
        logits = self.weight.to(acc)[:, slot].transpose(0, 1)

        invalid = None if pad is None else pad[:, None, :].expand(batch, length, key_len)
        if self.causal:
            invalid = distance > 0 if invalid is None else invalid | (distance > 0)
        if not self.global_context:
            outside = distance.abs() > self.max_relative
            invalid = outside if invalid is None else invalid | outside
        probs = masked_softmax(logits, None if invalid is None else invalid.unsqueeze(1))
        dropped = F.dropout(probs, p=self.dropout, training=self.training)

        out = self.merge_heads(torch.matmul(dropped.to(v.dtype), v))
        return out, self.fairseq_weights(probs, query.dtype, need_weights, need_head_weights)

    def _decode(self, incremental_state, v, pad, acc, need_weights):
        """Causal decoding in constant state: a query sees the distances 0..K with their own weights and,
        with global context, every older key with the border weight W[h, 0] (a running sum of their
        values); without it only the key at distance K has W[h, 0] (docs/constant-cost-decoding.md)."""
        if need_weights:
            raise ValueError("lightconv_apptek keeps no per-key state while decoding incrementally: it returns "
                             "no attention weights there")
        buffer = self._get_input_buffer(incremental_state)
        steps = self.decoding_steps(buffer, v.size(0), v.size(2), v.device)
        energy = self.weight.to(acc)[:, : self.max_relative + 1].unsqueeze(0)  # distances K..0
        out = torch.cat([
            clipped_decoding_step(self, buffer, int(steps[0, t]), v[:, :, t: t + 1],
                                  None if pad is None else pad[:, t: t + 1], energy,
                                  shared_tail=self.global_context, dropout=self.dropout, training=self.training)
            for t in range(v.size(2))], dim=2)
        self._set_input_buffer(incremental_state, buffer)
        return self.merge_heads(out), None


# ----- the presets (families.py) -----
# Table 5 one step at a time: window +-16 at every size (AppTek's
# configurations), then + GeLU gating, then + global context. fairseq's
# sinusoids are kept (the notes do not say whether AppTek's LightConv models
# add them). The block imports what it needs itself, so that it stays one
# piece at the end of the module.
from .. import families  # noqa: E402

_LIGHTCONV = {"encoder_self_mixer": "lightconv_apptek", "decoder_self_mixer": "lightconv_apptek",
              "lightconv_max_relative": 16}
_GATED = {**_LIGHTCONV, "encoder_self_gating": "on", "decoder_self_gating": "on"}
_SMALL, _BIG = "the PosNet paper's small size (in no table)", "the PosNet paper's big size (in no table)"
families.declare(
    __name__, "AppTek light convolution", "posnet",
    families.Family("lightconv_apptek_transformer", "light convolution (+-16) in encoder and decoder "
                    "self-attention (Table 5 \"Light Convolution\")", _LIGHTCONV,
                    {"tiny": families.TESTS, "small": "PosNet Table 3 (small De-En)",
                     "base": "PosNet Tables 2 and 5 (Light Convolution)", "big": "PosNet Table 3 (big En-De)"},
                    benchmark="mechanism",
                    ctranslate2=families.OWN_PARAMETERS),
    families.Family("lightconv_apptek_gated_transformer", "+ GeLU gating at both self sites (Table 5 \"+ GeLU "
                    "gating\")", _GATED,
                    {"tiny": families.TESTS, "small": _SMALL, "base": "PosNet Table 5 (+ GeLU gating)", "big": _BIG},
                    ctranslate2=families.OWN_PARAMETERS),
    families.Family("lightconv_apptek_global_transformer", "gated + global context (Table 5 \"+ global context\")",
                    {**_GATED, "lightconv_global_context": True},
                    {"tiny": families.TESTS, "small": _SMALL, "base": "PosNet Table 5 (+ global context)",
                     "big": _BIG},
                    ctranslate2=families.OWN_PARAMETERS),
)
