"""TISA presets (Wennberg & Henter, 2021): TISA in every encoder and decoder self-attention.

* ``tisa_transformer_{tiny,small,base,big}`` -- mode (a): TISA's positional
  scores beside the sinusoidal position embeddings;
* ``tisa_nope_transformer_{tiny,small,base,big}`` -- mode (b): TISA instead of
  position embeddings (``--no-token-positional-embeddings``). With
  ``--tisa-kernels 0`` this is the bag-of-words baseline: the model has no
  position information at all, apart from the decoder's causal mask.

Cross attention stays fairseq's MultiheadAttention (TISA has no relative
distance between a target and a source position).
"""
from .architectures import register_sizes


def tisa(args, size):
    args.encoder_self_mixer = getattr(args, "encoder_self_mixer", "tisa")
    args.decoder_self_mixer = getattr(args, "decoder_self_mixer", "tisa")


def tisa_nope(args, size):
    tisa(args, size)
    args.no_token_positional_embeddings = getattr(args, "no_token_positional_embeddings", True)


register_sizes("tisa_transformer", tisa)
register_sizes("tisa_nope_transformer", tisa_nope)
