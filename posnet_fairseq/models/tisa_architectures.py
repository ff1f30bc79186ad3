"""Architectures of TISA (Wennberg & Henter, 2021) for ``mixers/tisa.py``: TISA in every self-attention.

* ``tisa_transformer_*``: mode (a), TISA's positional scores beside the
  sinusoidal position embeddings;
* ``tisa_nope_transformer_*``: mode (b), TISA instead of position embeddings
  (``--no-token-positional-embeddings``). With ``--tisa-kernels 0`` this is
  the bag-of-words baseline: the model has no position information at all,
  apart from the decoder's causal mask.

Cross attention stays fairseq's MultiheadAttention (TISA has no relative
distance between a target and a source position). The paper evaluates TISA on
GLUE, not on translation: these presets serve the project's own experiment
(``recipes/tisa/mt.sh``), at the PosNet paper's small and base settings.
"""
from .architectures import BASE, BIG, SMALL, TESTS, TINY, Architecture, register

TISA = {"encoder_self_mixer": "tisa", "decoder_self_mixer": "tisa"}
TISA_NOPE = {**TISA, "no_token_positional_embeddings": True}

register(
    Architecture("tisa_transformer_tiny", TINY, TISA, TESTS),
    Architecture("tisa_transformer_small", SMALL, TISA, "no paper table: recipes/tisa/mt.sh (small, mode a)"),
    Architecture("tisa_transformer_base", BASE, TISA, "no paper table: recipes/tisa/mt.sh (base, mode a)"),
    Architecture("tisa_transformer_big", BIG, TISA, "no paper table: the big size of mode a"),
    Architecture("tisa_nope_transformer_tiny", TINY, TISA_NOPE, TESTS),
    Architecture("tisa_nope_transformer_small", SMALL, TISA_NOPE,
                 "no paper table: recipes/tisa/mt.sh (small, mode b and S = 0)"),
    Architecture("tisa_nope_transformer_base", BASE, TISA_NOPE,
                 "no paper table: recipes/tisa/mt.sh (base, mode b and S = 0)"),
    Architecture("tisa_nope_transformer_big", BIG, TISA_NOPE, "no paper table: the big size of mode b"),
)
