"""Presets of the PosNet paper (Schmidt & Di Gangi): ``rposnet_transformer_*`` and ``aposnet_transformer_*``.

As in the paper (Table 2, and its authors' configurations): PosNet in the
encoder and decoder self-attention, fairseq MultiheadAttention in
cross-attention, GeLU gating (Eq. 4) on, K = 16 (``_big``: K = 8, paper
section 5.2). rPosNet uses learned absolute position embeddings (its queries
are that table, LayerNorm'd); aPosNet keeps fairseq's sinusoids.

Gating follows the mixers: unless ``--encoder-self-gating`` /
``--decoder-self-gating`` / ``--cross-gating`` is given, a layer is gated
exactly when its mixer is a PosNet mixer. So the placement rows of Table 4
are one flag away, e.g. ``--arch rposnet_transformer_base --encoder-self-mixer
mha`` (ungated MHA encoder, gated rPosNet decoder) or ``--cross-mixer
rposnet`` (gated rPosNet cross-attention with gamma = the training-set length
ratio). ``--encoder-self-gating off --decoder-self-gating off`` gives the
ungated rows of Table 6.
"""
from ..sites import SITE_LIST, dest, spec_items
from .architectures import register_sizes

POSNET_MIXERS = ("rposnet", "aposnet", "arposnet")


def _gating_follows_mixers(args):
    for site in SITE_LIST:
        if getattr(args, dest(site.gating_flag), None) is not None:
            continue
        names = spec_items(getattr(args, dest(site.mixer_flag), "mha"))
        switches = ["on" if n in POSNET_MIXERS else "off" for n in names]
        # One value for a uniform site, so that the spec fits any layer count.
        setattr(args, dest(site.gating_flag), switches[0] if len(set(switches)) == 1 else ",".join(switches))


def _posnet_mechanism(mixer, max_relative, learned_positions):
    def mechanism(args, size):
        args.encoder_self_mixer = getattr(args, "encoder_self_mixer", mixer)
        args.decoder_self_mixer = getattr(args, "decoder_self_mixer", mixer)
        args.posnet_max_relative = getattr(args, "posnet_max_relative", max_relative)
        if learned_positions:
            args.encoder_learned_pos = getattr(args, "encoder_learned_pos", True)
            args.decoder_learned_pos = getattr(args, "decoder_learned_pos", True)
        _gating_follows_mixers(args)

    return mechanism


for _prefix, _mixer, _learned in (("rposnet_transformer", "rposnet", True),
                                  ("aposnet_transformer", "aposnet", False)):
    register_sizes(_prefix, _posnet_mechanism(_mixer, 16, _learned), sizes=("tiny", "small", "base"))
    register_sizes(_prefix, _posnet_mechanism(_mixer, 8, _learned), sizes=("big",))
