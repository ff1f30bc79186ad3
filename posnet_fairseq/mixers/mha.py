"""``mha``: fairseq's own MultiheadAttention (Vaswani et al., 2017, Eq. 1).

The model builds it exactly as fairseq's Transformer layers do, so a model with
``mha`` at every site is numerically the stock ``transformer``.
"""
from ..sites import SITES
from .registry import register_mixer


@register_mixer("mha", sites=SITES)
def multihead_attention(ctx):
    """Scaled dot-product multi-head attention, fairseq's implementation."""
    return ctx.build_fairseq_attention()
