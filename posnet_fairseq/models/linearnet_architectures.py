"""Architectures of the PosNet paper's LinearNet baselines (Tables 2 and 6) for ``mixers/linearnet.py``.

* ``linearnet_transformer_*``: LinearNet in the encoder and decoder
  self-attention, a 128 x 128 table per head (the paper's maximum sentence length)
* ``glinearnet_transformer_*``: the same with the GeLU gating of Eq. 4 (gLinearNet)

Cross-attention is fairseq's MultiheadAttention, as in the paper. The presets
carry their limit: ``--max-source-positions`` and ``--max-target-positions``
default to the table's length (``--linearnet-max-length``, 128), so they train
with fairseq's default flags; a larger explicit value is refused at model
build, naming the flag.
"""
from .architectures import BASE, BIG, SMALL, TESTS, TINY, Architecture, register


def _table_length(args):
    return args.linearnet_max_length


LINEARNET = {"encoder_self_mixer": "linearnet", "decoder_self_mixer": "linearnet", "linearnet_max_length": 128,
             "max_source_positions": _table_length, "max_target_positions": _table_length}
GLINEARNET = {**LINEARNET, "encoder_self_gating": "on", "decoder_self_gating": "on"}

register(
    Architecture("linearnet_transformer_tiny", TINY, LINEARNET, TESTS),
    Architecture("linearnet_transformer_small", SMALL, LINEARNET, "the PosNet paper's small setting (no table)"),
    Architecture("linearnet_transformer_base", BASE, LINEARNET, "PosNet Tables 2 and 6"),
    Architecture("linearnet_transformer_big", BIG, LINEARNET, "the PosNet paper's big setting (no table)"),
    Architecture("glinearnet_transformer_tiny", TINY, GLINEARNET, TESTS),
    Architecture("glinearnet_transformer_small", SMALL, GLINEARNET, "the PosNet paper's small setting (no table)"),
    Architecture("glinearnet_transformer_base", BASE, GLINEARNET, "PosNet Tables 2 and 6"),
    Architecture("glinearnet_transformer_big", BIG, GLINEARNET, "the PosNet paper's big setting (no table)"),
)
