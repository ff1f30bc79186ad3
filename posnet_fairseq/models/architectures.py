"""Named presets of ``posnet_transformer`` (all sites ``mha`` unless a preset says otherwise).

Sizes follow fairseq's presets: ``_small`` = ``transformer_iwslt_de_en``
(IWSLT: FFN 1024, 4 heads, dropout 0.3), ``_base`` = ``transformer`` (Vaswani
et al. base), ``_big`` = ``transformer_vaswani_wmt_en_de_big``; ``_tiny`` is
for tests and the quick start. Mechanism presets live next to this file, one
module per paper, and build on :func:`tiny`, :func:`small`, :func:`base` and
:func:`big`.
"""
from fairseq.models import register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_vaswani_wmt_en_de_big,
)

from .. import flags


def base(args):
    flags.set_defaults(args)
    base_architecture(args)


def small(args):
    # fairseq's IWSLT preset leaves dropout at 0.1; the IWSLT recipes (and the
    # PosNet paper's small models) use 0.3.
    args.dropout = getattr(args, "dropout", 0.3)
    flags.set_defaults(args)
    transformer_iwslt_de_en(args)


def big(args):
    flags.set_defaults(args)
    transformer_vaswani_wmt_en_de_big(args)


def tiny(args):
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 128)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 512)
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", 4)
    args.encoder_layers = getattr(args, "encoder_layers", 3)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 128)
    args.decoder_ffn_embed_dim = getattr(args, "decoder_ffn_embed_dim", 512)
    args.decoder_attention_heads = getattr(args, "decoder_attention_heads", 4)
    args.decoder_layers = getattr(args, "decoder_layers", 3)
    args.share_decoder_input_output_embed = getattr(args, "share_decoder_input_output_embed", True)
    base(args)


def register_sizes(prefix, mechanism=None, sizes=("tiny", "small", "base", "big")):
    """Registers ``{prefix}_{size}`` for each size; ``mechanism(args)`` sets the mixers first."""
    size_fns = {"tiny": tiny, "small": small, "base": base, "big": big}

    for size in sizes:
        def arch(args, size_fn=size_fns[size], size=size):
            if mechanism is not None:
                mechanism(args, size)
            size_fn(args)

        register_model_architecture("posnet_transformer", f"{prefix}_{size}")(arch)


register_model_architecture("posnet_transformer", "posnet_transformer")(base)
register_sizes("posnet_transformer")
