"""Presets of the PosNet paper's baselines (Schmidt & Di Gangi, Tables 2 and 6), sizes tiny/small/base/big.

* ``linearnet_transformer_*``   LinearNet (``linearnet.py``) in the encoder and decoder self-attention,
                                a 128 x 128 table per head, ``--max-source/target-positions 128``
* ``glinearnet_transformer_*``  the same with the GeLU gating of Eq. 4 (gLinearNet)
* ``fouriernet_transformer_*``  FourierNet (``fouriernet.py``) in the encoder self-attention, MHA elsewhere

Cross-attention is fairseq's MultiheadAttention in all of them, as in the paper.
"""
from .architectures import register_sizes

# The paper's maximum sentence length: LinearNet's table covers positions 0..127.
MAX_LENGTH = 128


def _linearnet(gated):
    def mechanism(args, size):
        args.encoder_self_mixer = getattr(args, "encoder_self_mixer", "linearnet")
        args.decoder_self_mixer = getattr(args, "decoder_self_mixer", "linearnet")
        args.linearnet_max_length = getattr(args, "linearnet_max_length", MAX_LENGTH)
        args.max_source_positions = getattr(args, "max_source_positions", args.linearnet_max_length)
        args.max_target_positions = getattr(args, "max_target_positions", args.linearnet_max_length)
        if gated:
            args.encoder_self_gating = getattr(args, "encoder_self_gating", "on")
            args.decoder_self_gating = getattr(args, "decoder_self_gating", "on")

    return mechanism


def _fouriernet(args, size):
    args.encoder_self_mixer = getattr(args, "encoder_self_mixer", "fouriernet")


register_sizes("linearnet_transformer", _linearnet(gated=False))
register_sizes("glinearnet_transformer", _linearnet(gated=True))
register_sizes("fouriernet_transformer", _fouriernet)
