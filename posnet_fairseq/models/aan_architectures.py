"""Architectures of the average attention network for ``mixers/aan.py`` (Zhang et al. 2018; AAN+, Zhang et al.).

The decoder self-attention of every layer is the ``aan`` mixer; the encoder
and the cross attention stay fairseq's. The base size has no suffix
(``aan_plus_ner``), ``_deep`` is the base with 12 encoder and 12 decoder
layers and ``_big`` the Transformer big (both AAN+ Table 4).

Patterns, their combinations (Table 6) and activations (Table 5) are flags
(``--aan-patterns ner,far``, ``--aan-activation relu``); an explicit flag wins
over the preset.
"""
from .architectures import BASE, BIG, DEEP, TESTS, TINY, Architecture, register

AAN_2018 = {"decoder_self_mixer": "aan", "aan_patterns": "avg", "aan_ffn": True}  # average, FFN on it, gate
AAN_PLUS_AVG = {"decoder_self_mixer": "aan", "aan_patterns": "avg", "aan_ffn": False}  # cumulative average
AAN_PLUS_NER = {"decoder_self_mixer": "aan", "aan_patterns": "ner", "aan_ffn": False}  # exp(alpha k)
AAN_PLUS_FAR = {"decoder_self_mixer": "aan", "aan_patterns": "far", "aan_ffn": False}  # exp(-beta k)
AAN_PLUS_WET = {"decoder_self_mixer": "aan", "aan_patterns": "wet", "aan_ffn": False}  # exp(gamma U z_k)

register(
    Architecture("aan_tiny", TINY, AAN_2018, TESTS),
    Architecture("aan", BASE, AAN_2018, "the 2018 AAN (AAN+ Eq. 2): in no AAN+ table; a reference row of recipes/aan"),
    Architecture("aan_deep", DEEP, AAN_2018, "the 2018 AAN at AAN+ Table 4's deep size"),
    Architecture("aan_big", BIG, AAN_2018, "the 2018 AAN at AAN+ Table 4's big size"),
    Architecture("aan_plus_avg_tiny", TINY, AAN_PLUS_AVG, TESTS),
    Architecture("aan_plus_avg", BASE, AAN_PLUS_AVG, "AAN+ Tables 2, 6 (and its combinations) and 7 (AVG)"),
    Architecture("aan_plus_avg_deep", DEEP, AAN_PLUS_AVG, "AAN+ Table 4 (deep, AVG)"),
    Architecture("aan_plus_avg_big", BIG, AAN_PLUS_AVG, "AAN+ Table 4 (big, AVG)"),
    Architecture("aan_plus_ner_tiny", TINY, AAN_PLUS_NER, TESTS),
    Architecture("aan_plus_ner", BASE, AAN_PLUS_NER, "AAN+ Tables 2, 6 and 7 (NER); Table 5 with --aan-activation"),
    Architecture("aan_plus_ner_deep", DEEP, AAN_PLUS_NER, "AAN+ Table 4 (deep, NER)"),
    Architecture("aan_plus_ner_big", BIG, AAN_PLUS_NER, "AAN+ Table 4 (big, NER)"),
    Architecture("aan_plus_far_tiny", TINY, AAN_PLUS_FAR, TESTS),
    Architecture("aan_plus_far", BASE, AAN_PLUS_FAR, "AAN+ Tables 2, 6 and 7 (FAR)"),
    Architecture("aan_plus_far_deep", DEEP, AAN_PLUS_FAR, "AAN+ Table 4 (deep, FAR)"),
    Architecture("aan_plus_far_big", BIG, AAN_PLUS_FAR, "AAN+ Table 4 (big, FAR)"),
    Architecture("aan_plus_wet_tiny", TINY, AAN_PLUS_WET, TESTS),
    Architecture("aan_plus_wet", BASE, AAN_PLUS_WET, "AAN+ Tables 2, 6 and 7 (WET); Table 5 with --aan-activation"),
    Architecture("aan_plus_wet_deep", DEEP, AAN_PLUS_WET, "AAN+ Table 4 (deep, WET)"),
    Architecture("aan_plus_wet_big", BIG, AAN_PLUS_WET, "AAN+ Table 4 (big, WET)"),
)
