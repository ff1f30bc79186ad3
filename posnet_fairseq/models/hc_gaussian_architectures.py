"""Architectures of You, Sun & Iyyer (2020), "Hard-Coded Gaussian Attention for NMT", for ``mixers/hc_gaussian.py``.

The base size has no suffix (``hc_gaussian``: the paper's WMT setting, the
Transformer base); ``_iwslt`` is the paper's IWSLT setting (embedding 288,
FFN 507, 4 heads, 5 layers).

* HC-SA: hard-coded self-attention, learned cross attention
* HC-ALL: hard-coded cross attention as well
* SH-X: HC-SA with one learned cross head (dim D) in the last decoder layer
  only (``--learned-cross-layers`` moves it or adds more)
* -SA: no self-attention sub-layers (the Transformer's and SH-X's)

The conv / index variants (Table 5) and -FF (Table 3) are flags:
``--hc-kernel conv|index`` and ``--no-encoder-ffn --no-decoder-ffn``.
"""
from ..sites import layer_indices
from .architectures import BASE, IWSLT, TESTS, TINY, Architecture, register


def learned_cross_layers(args):
    """SH-X's per-layer ``--cross-mixer`` spec: ``learned_cross`` in the layers that
    ``--learned-cross-layers`` names (default: the last one), no cross attention elsewhere."""
    chosen = layer_indices("--learned-cross-layers", args.learned_cross_layers, args.decoder_layers)
    return ",".join("learned_cross" if i in chosen else "none" for i in range(args.decoder_layers))


HC_SA = {"encoder_self_mixer": "hc_gaussian", "decoder_self_mixer": "hc_gaussian"}
HC_ALL = {**HC_SA, "cross_mixer": "hc_gaussian_cross"}
SH_X = {**HC_SA, "cross_mixer": learned_cross_layers}
NO_SA = {"encoder_self_mixer": "none", "decoder_self_mixer": "none"}
SH_X_NO_SA = {**NO_SA, "cross_mixer": learned_cross_layers}

register(
    Architecture("hc_gaussian_tiny", TINY, HC_SA, TESTS),
    Architecture("hc_gaussian_iwslt", IWSLT, HC_SA, "You et al. Tables 2 (small datasets), 5 (En-De), 6 and 7 (HC-SA)"),
    Architecture("hc_gaussian", BASE, HC_SA, "You et al. Tables 2 (large datasets), 3 and 5 (En-Ro) (HC-SA)"),
    Architecture("hc_gaussian_all_tiny", TINY, HC_ALL, TESTS),
    Architecture("hc_gaussian_all_iwslt", IWSLT, HC_ALL, "You et al. Table 2 (small datasets, HC-ALL)"),
    Architecture("hc_gaussian_all", BASE, HC_ALL, "You et al. Table 2 (large datasets, HC-ALL)"),
    Architecture("hc_gaussian_shx_tiny", TINY, SH_X, TESTS),
    Architecture("hc_gaussian_shx_iwslt", IWSLT, SH_X, "You et al. Table 2 (small datasets) and Table 7 (SH-X)"),
    Architecture("hc_gaussian_shx", BASE, SH_X, "You et al. Table 2 (large datasets) and Table 3 (SH-X)"),
    Architecture("transformer_nosa_tiny", TINY, NO_SA, TESTS),
    Architecture("transformer_nosa_iwslt", IWSLT, NO_SA, "You et al. Table 7 (BASE/-SA)"),
    Architecture("transformer_nosa", BASE, NO_SA, "You et al. Table 3 (BASE/-SA)"),
    Architecture("hc_gaussian_shx_nosa_tiny", TINY, SH_X_NO_SA, TESTS),
    Architecture("hc_gaussian_shx_nosa_iwslt", IWSLT, SH_X_NO_SA, "You et al. Table 7 (SH-X/-SA)"),
    Architecture("hc_gaussian_shx_nosa", BASE, SH_X_NO_SA, "You et al. Table 3 (SH-X/-SA)"),
)
