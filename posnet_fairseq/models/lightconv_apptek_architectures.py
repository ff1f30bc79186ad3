"""Architectures of AppTek's light convolution (the PosNet paper's "LightConv") for ``mixers/lightconv_apptek.py``.

Table 5 goes from the light convolution to rPosNet one step at a time; each
step is one family:

* ``lightconv_apptek_transformer_*``: ``lightconv_apptek`` in encoder and
  decoder self-attention, window +-16, no gating ("Light Convolution");
* ``lightconv_apptek_gated_transformer_*``: the same with the PosNet GeLU
  gating at both self-attention sites ("+ GeLU gating");
* ``lightconv_apptek_global_transformer_*``: gated, and with
  ``--lightconv-global-context`` ("+ global context").

Cross attention is fairseq's MultiheadAttention. K = 16 at every size, as in
AppTek's configurations. fairseq's sinusoidal position embeddings are kept
(the notes do not say whether AppTek's LightConv models add them).
"""
from .architectures import BASE, BIG, SMALL, TESTS, TINY, Architecture, register

LIGHTCONV = {"encoder_self_mixer": "lightconv_apptek", "decoder_self_mixer": "lightconv_apptek",
             "lightconv_max_relative": 16}
GATED = {**LIGHTCONV, "encoder_self_gating": "on", "decoder_self_gating": "on"}
GLOBAL = {**GATED, "lightconv_global_context": True}

register(
    Architecture("lightconv_apptek_transformer_tiny", TINY, LIGHTCONV, TESTS),
    Architecture("lightconv_apptek_transformer_small", SMALL, LIGHTCONV, "the PosNet paper's small setting (no table)"),
    Architecture("lightconv_apptek_transformer_base", BASE, LIGHTCONV, "PosNet Tables 2 and 5 (Light Convolution)"),
    Architecture("lightconv_apptek_transformer_big", BIG, LIGHTCONV, "the PosNet paper's big setting (no table)"),
    Architecture("lightconv_apptek_gated_transformer_tiny", TINY, GATED, TESTS),
    Architecture("lightconv_apptek_gated_transformer_small", SMALL, GATED,
                 "the PosNet paper's small setting (no table)"),
    Architecture("lightconv_apptek_gated_transformer_base", BASE, GATED, "PosNet Table 5 (+ GeLU gating)"),
    Architecture("lightconv_apptek_gated_transformer_big", BIG, GATED, "the PosNet paper's big setting (no table)"),
    Architecture("lightconv_apptek_global_transformer_tiny", TINY, GLOBAL, TESTS),
    Architecture("lightconv_apptek_global_transformer_small", SMALL, GLOBAL,
                 "the PosNet paper's small setting (no table)"),
    Architecture("lightconv_apptek_global_transformer_base", BASE, GLOBAL, "PosNet Table 5 (+ global context)"),
    Architecture("lightconv_apptek_global_transformer_big", BIG, GLOBAL, "the PosNet paper's big setting (no table)"),
)
