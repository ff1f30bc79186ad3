"""Architectures of the PosNet paper (Schmidt & Di Gangi) for ``mixers/posnet.py``: aPosNet and rPosNet.

As in the paper (Table 2, and its authors' configurations): PosNet in the
encoder and decoder self-attention, fairseq MultiheadAttention in
cross-attention, GeLU gating (Eq. 4) on, K = 16 (big: K = 8, paper section
5.2). rPosNet uses learned absolute position embeddings (its queries are that
table, LayerNorm'd); aPosNet keeps fairseq's sinusoids.

Gating follows the mixers: unless ``--encoder-self-gating`` /
``--decoder-self-gating`` / ``--cross-gating`` is given, a layer is gated
exactly when its mixer is a PosNet mixer. So the placement rows of Table 4
are one flag away, e.g. ``--arch rposnet_transformer_base --encoder-self-mixer
mha`` (ungated MHA encoder, gated rPosNet decoder) or ``--cross-mixer
rposnet`` (gated rPosNet cross-attention with gamma = the training-set length
ratio). ``--encoder-self-gating off --decoder-self-gating off`` gives the
ungated rows of Table 6.
"""
from ..mixers.posnet import PositionAttention
from ..sites import SITE_LIST, dest, spec_items
from .architectures import BASE, BIG, SMALL, TESTS, TINY, Architecture, register

POSNET_MIXERS = frozenset(cls.NAME for cls in PositionAttention.__subclasses__())


def _gating_follows_mixer(site):
    def gating(args):
        names = spec_items(getattr(args, dest(site.mixer_flag)))
        switches = ["on" if name in POSNET_MIXERS else "off" for name in names]
        # One value for a uniform site, so that the spec fits any layer count.
        return switches[0] if len(set(switches)) == 1 else ",".join(switches)

    return gating


GATING_FOLLOWS_MIXERS = {dest(site.gating_flag): _gating_follows_mixer(site) for site in SITE_LIST}
APOSNET = {"encoder_self_mixer": "aposnet", "decoder_self_mixer": "aposnet", **GATING_FOLLOWS_MIXERS}
RPOSNET = {"encoder_self_mixer": "rposnet", "decoder_self_mixer": "rposnet",
           "encoder_learned_pos": True, "decoder_learned_pos": True, **GATING_FOLLOWS_MIXERS}

register(
    Architecture("aposnet_transformer_tiny", TINY, {**APOSNET, "posnet_max_relative": 16}, TESTS),
    Architecture("aposnet_transformer_small", SMALL, {**APOSNET, "posnet_max_relative": 16},
                 "PosNet Table 3 (small De-En)"),
    Architecture("aposnet_transformer_base", BASE, {**APOSNET, "posnet_max_relative": 16},
                 "PosNet Tables 2 and 6"),
    Architecture("aposnet_transformer_big", BIG, {**APOSNET, "posnet_max_relative": 8},
                 "PosNet Table 3 (big En-De)"),
    Architecture("rposnet_transformer_tiny", TINY, {**RPOSNET, "posnet_max_relative": 16}, TESTS),
    Architecture("rposnet_transformer_small", SMALL, {**RPOSNET, "posnet_max_relative": 16},
                 "PosNet Table 3 (small De-En)"),
    Architecture("rposnet_transformer_base", BASE, {**RPOSNET, "posnet_max_relative": 16},
                 "PosNet Tables 2, 4, 5 and 6"),
    Architecture("rposnet_transformer_big", BIG, {**RPOSNET, "posnet_max_relative": 8},
                 "PosNet Table 3 (big En-De), K = 8 (section 5.2)"),
)
