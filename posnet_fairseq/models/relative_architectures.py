"""Presets for the relative-position baselines of the PosNet paper (Tables 2, 3, 6).

``shaw_transformer_{tiny,small,base,big}``: Shaw et al. (2018) relative
attention in encoder and decoder self-attention, fairseq MHA in cross
attention. ``relattn_transformer_{...}``: the same with "relative attention"
(content queries x relative keys, no W_K).

K = 16 (``_big``: K = 8), per-head relative-key slices and no value term, as
in the PosNet paper's baseline. Following Shaw et al. (2018), who replace the
absolute sinusoids by relative positions, and the PosNet baseline
(``use_pos_embed: False``), the presets have no absolute position embeddings
(``no_token_positional_embeddings``); to keep fairseq's sinusoids, use
``--arch posnet_transformer_<size> --encoder-self-mixer shaw
--decoder-self-mixer shaw`` instead.
"""
from .architectures import register_sizes


def _relative_mechanism(mixer, max_distance):
    def mechanism(args, size):
        args.encoder_self_mixer = getattr(args, "encoder_self_mixer", mixer)
        args.decoder_self_mixer = getattr(args, "decoder_self_mixer", mixer)
        args.relative_max_distance = getattr(args, "relative_max_distance", max_distance)
        args.no_token_positional_embeddings = getattr(args, "no_token_positional_embeddings", True)

    return mechanism


for _prefix, _mixer in (("shaw_transformer", "shaw"), ("relattn_transformer", "relattn")):
    register_sizes(_prefix, _relative_mechanism(_mixer, 16), sizes=("tiny", "small", "base"))
    register_sizes(_prefix, _relative_mechanism(_mixer, 8), sizes=("big",))
