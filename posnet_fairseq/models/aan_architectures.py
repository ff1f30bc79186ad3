"""Presets of the average attention network (Zhang et al. 2018; AAN+, Zhang et al.).

The decoder self-attention of every layer is the ``aan`` mixer (or a baseline's mixer); the encoder
and the cross attention stay fairseq's. Sizes: ``{name}`` is the Transformer
base, ``{name}_big`` the Transformer big, ``{name}_deep`` the base with 12
encoder and 12 decoder layers (AAN+ Table 4), ``{name}_tiny`` for tests and
the quick start.

* ``aan_plus_avg``  AAN+ with the AVG pattern (plain cumulative average, no FFN)
* ``aan_plus_ner``  AAN+ with the NER pattern exp(alpha k)
* ``aan_plus_far``  AAN+ with the FAR pattern exp(-beta k)
* ``aan_plus_wet``  AAN+ with the WET pattern exp(gamma U z_k)
* ``aan``           the 2018 AAN: cumulative average, FFN on it, then the gate
* ``ssru``              baseline: Kim et al.'s SSRU (``ssru`` mixer)
* ``linear_attention``  baseline: Katharopoulos et al.'s linear attention (``linear_attention`` mixer)

Patterns, their combinations and activations are flags (``--aan-patterns
ner,far``, ``--aan-activation relu``); an explicit flag wins over the preset.
"""
from fairseq.models import register_model_architecture

from .architectures import base, big, tiny


def deep(args):
    """Transformer base with 12 encoder and 12 decoder layers."""
    args.encoder_layers = getattr(args, "encoder_layers", 12)
    args.decoder_layers = getattr(args, "decoder_layers", 12)
    base(args)


SIZES = {"": base, "_big": big, "_deep": deep, "_tiny": tiny}


def _average_attention(patterns, ffn=False):
    def mechanism(args):
        args.decoder_self_mixer = getattr(args, "decoder_self_mixer", "aan")
        args.aan_patterns = getattr(args, "aan_patterns", patterns)
        args.aan_ffn = getattr(args, "aan_ffn", ffn)

    return mechanism


def _decoder_self(mixer):
    def mechanism(args):
        args.decoder_self_mixer = getattr(args, "decoder_self_mixer", mixer)

    return mechanism


PRESETS = {
    "aan_plus_avg": _average_attention("avg"),
    "aan_plus_ner": _average_attention("ner"),
    "aan_plus_far": _average_attention("far"),
    "aan_plus_wet": _average_attention("wet"),
    "aan": _average_attention("avg", ffn=True),
    # The AAN+ paper's baselines (Tables 2, 4, 7) in the decoder self-attention.
    "ssru": _decoder_self("ssru"),
    "linear_attention": _decoder_self("linear_attention"),
}

for _name, _mechanism in PRESETS.items():
    for _suffix, _size in SIZES.items():
        def _arch(args, mechanism=_mechanism, size=_size):
            mechanism(args)
            size(args)

        register_model_architecture("posnet_transformer", f"{_name}{_suffix}")(_arch)
