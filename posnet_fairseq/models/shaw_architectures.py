"""Architectures of the PosNet paper's relative-position baselines for ``mixers/shaw.py``.

``shaw_transformer_*``: Shaw et al. (2018) relative attention in encoder and
decoder self-attention, fairseq MHA in cross attention. ``relattn_transformer_*``:
the same with "relative attention" (content queries x relative keys, no W_K).

K = 16 (big: K = 8), per-head relative-key slices and no value term, as in the
PosNet paper's baseline. Following Shaw et al. (2018), who replace the
absolute sinusoids by relative positions, and the PosNet baseline
(``use_pos_embed: False``), the presets have no absolute position embeddings
(``no_token_positional_embeddings``); to keep fairseq's sinusoids, use
``--arch posnet_transformer_<size> --encoder-self-mixer shaw
--decoder-self-mixer shaw`` instead.
"""
from .architectures import BASE, BIG, SMALL, TESTS, TINY, Architecture, register

SHAW = {"encoder_self_mixer": "shaw", "decoder_self_mixer": "shaw", "no_token_positional_embeddings": True}
RELATTN = {"encoder_self_mixer": "relattn", "decoder_self_mixer": "relattn", "no_token_positional_embeddings": True}

register(
    Architecture("shaw_transformer_tiny", TINY, {**SHAW, "relative_max_distance": 16}, TESTS),
    Architecture("shaw_transformer_small", SMALL, {**SHAW, "relative_max_distance": 16},
                 "PosNet Table 3 (small De-En)"),
    Architecture("shaw_transformer_base", BASE, {**SHAW, "relative_max_distance": 16}, "PosNet Table 2"),
    Architecture("shaw_transformer_big", BIG, {**SHAW, "relative_max_distance": 8},
                 "PosNet Table 3 (big En-De), K = 8"),
    Architecture("relattn_transformer_tiny", TINY, {**RELATTN, "relative_max_distance": 16}, TESTS),
    Architecture("relattn_transformer_small", SMALL, {**RELATTN, "relative_max_distance": 16},
                 "PosNet Table 3 (small De-En)"),
    Architecture("relattn_transformer_base", BASE, {**RELATTN, "relative_max_distance": 16}, "PosNet Table 2"),
    Architecture("relattn_transformer_big", BIG, {**RELATTN, "relative_max_distance": 8},
                 "PosNet Table 3 (big En-De), K = 8"),
)
