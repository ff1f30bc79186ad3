"""Architectures of the PosNet paper's FourierNet baseline (Table 2) for ``mixers/fouriernet.py``.

FourierNet in the encoder self-attention, fairseq MultiheadAttention in the
decoder self-attention and the cross attention, as in the paper.
"""
from .architectures import BASE, BIG, SMALL, TESTS, TINY, Architecture, register

FOURIERNET = {"encoder_self_mixer": "fouriernet"}

register(
    Architecture("fouriernet_transformer_tiny", TINY, FOURIERNET, TESTS),
    Architecture("fouriernet_transformer_small", SMALL, FOURIERNET, "the PosNet paper's small setting (no table)"),
    Architecture("fouriernet_transformer_base", BASE, FOURIERNET, "PosNet Table 2"),
    Architecture("fouriernet_transformer_big", BIG, FOURIERNET, "the PosNet paper's big setting (no table)"),
)
