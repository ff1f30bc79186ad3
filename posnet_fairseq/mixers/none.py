"""``none``: no sub-layer at this site.

At a self-attention site it is the -SA ablation of You et al. (2020, Table 3):
the mixer outputs zeros and the layer drops the sub-layer's LayerNorm, so the
residual passes the input through unchanged. At the cross site the model
builds the decoder layer without a cross-attention sub-layer at all (SH-X
keeps cross attention in chosen layers only), so ``build`` is never called
there.
"""
from .. import families
from ..sites import SITES
from .base import Mixer
from .registry import register_mixer


@register_mixer("none", sites=SITES)
class NoMixer(Mixer):
    """No sub-layer (the -SA ablation; no cross attention in that layer)."""

    @classmethod
    def build(cls, ctx):
        if ctx.site.cross:
            raise AssertionError("cross-site 'none' is built as a decoder layer without encoder attention")
        return cls(ctx.embed_dim, ctx.num_heads)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, need_weights=False,
                static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        return query.new_zeros(query.shape), None


# The Transformer without self-attention sub-layers (families.py): You et
# al.'s BASE/-SA (Tables 3 and 7), the ceiling of what a self-attention
# mechanism can save. SH-X/-SA lives in hc_gaussian.py (it adds learned_cross).
families.declare(
    __name__, "no sub-layer (the -SA ablation)", "model",
    families.Family(
        "transformer_nosa", "BASE -SA: the Transformer without self-attention sub-layers (encoder and decoder)",
        {"encoder_self_mixer": "none", "decoder_self_mixer": "none"},
        {"tiny": families.TESTS, "iwslt": "You et al. Table 7 (BASE/-SA)", "base": "You et al. Table 3 (BASE/-SA)"},
        unsuffixed_base=True, benchmark="ceiling", page="hc_gaussian",
        ctranslate2=families.OWN_PARAMETERS),
)
