"""``mha``: fairseq's own MultiheadAttention (Vaswani et al., 2017, Eq. 1).

The model builds it exactly as fairseq's Transformer layers do, so a model with
``mha`` at every site is numerically the stock ``transformer``.
"""
from .. import families
from ..sites import SITES
from .registry import register_mixer


@register_mixer("mha", sites=SITES)
def multihead_attention(ctx):
    """Scaled dot-product multi-head attention, fairseq's implementation."""
    return ctx.build_fairseq_attention()


# The presets of fairseq's own attention (families.py): the Transformer, and
# NoPE (Kazemnejad et al., NeurIPS 2023: MHA everywhere and no position
# information at all, so only the decoder's causal mask tells order; the same
# model as tisa_nope_* --tisa-kernels 0). Neither adds a mixer, so both live here.
families.declare(
    __name__, "fairseq's attention: the Transformer", "model",
    families.Family(
        "posnet_transformer", "every site `mha`: numerically fairseq's `transformer`", {},
        {"tiny": families.TESTS, "small": "the Transformer row of PosNet Table 3 (small De-En)",
         "base": "the Transformer rows of PosNet Tables 2, 4, 6; AAN+ Tables 2, 4, 5, 6, 7; You et al. Tables 2 "
                 "(WMT), 3 and 7",
         "big": "the Transformer rows of PosNet Table 3 (big En-De) and AAN+ Table 4 (big)"},
        bare_alias=True, benchmark="baseline", short="transformer",
        ctranslate2=families.CONVERTS),
    families.Family(
        "nope_transformer", "NoPE: `mha` everywhere and no position embeddings (only the decoder's causal mask "
        "tells order)", {"no_token_positional_embeddings": True},
        {"tiny": families.TESTS, "small": families.NO_TABLE, "base": families.NO_TABLE, "big": families.NO_TABLE},
        benchmark="mechanism", page="position-schemes", title="NoPE",
        ctranslate2=families.NO_POSITION_EMBEDDINGS),
)
