"""Every named architecture of ``posnet_transformer``: the families the mechanisms declare, with their sizes.

A mechanism's module declares its families (``posnet_fairseq/families.py``:
name prefix, settings, the sizes it comes in and what each reproduces); this
module turns each (family, size) into an :class:`Architecture` row with its
:class:`Size` and registers it with fairseq under its full name. The names are
listed, each with what it resolves to, in ``tests/architectures_resolved.json``
(``grep -n '"rposnet_transformer_base"' tests/architectures_resolved.json``)
and, with what they reproduce, in the generated preset tables of the docs.

A setting is a default: a flag given on the command line (or stored in a
checkpoint) always wins. Its value is a constant, or a function of the
resolved arguments for a choice that depends on another flag or on the size
(PosNet's gating follows the mixers; SH-X's per-layer cross spec follows the
decoder depth; LinearNet's position limit follows its table). fairseq applies
an architecture after parsing the command line and again when it loads a
checkpoint; flags of the model (all of this plugin's, and fairseq's model
flags such as ``--max-source-positions``) are parsed without argparse
defaults, so "not given" is "absent from args".
"""
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from fairseq.models import register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_vaswani_wmt_en_de_big,
)

from .. import families, flags
from .. import mixers  # noqa: F401  (the mechanisms declare their families)


@dataclass(frozen=True)
class Size:
    """A model size: fairseq fields set unless given, then one of fairseq's presets for the rest."""

    name: str  # the suffix of the names that use it; base: no suffix or _base
    fairseq_preset: Callable
    fields: Mapping[str, Any]

    def apply(self, args):
        for name, value in self.fields.items():
            if not hasattr(args, name):
                setattr(args, name, value)
        self.fairseq_preset(args)


# The sizes, by the suffix-free name the docs use for them.
TINY = Size("tiny", base_architecture, {  # tests and the quick start
    "encoder_embed_dim": 128, "encoder_ffn_embed_dim": 512, "encoder_attention_heads": 4, "encoder_layers": 3,
    "decoder_embed_dim": 128, "decoder_ffn_embed_dim": 512, "decoder_attention_heads": 4, "decoder_layers": 3,
    "share_decoder_input_output_embed": True,
})
# The PosNet paper's Small (section 5.2): Base with FFN 1024 and dropout 0.3, 8 heads (its
# Table 3 counts need 8; fairseq's IWSLT preset, which gives the rest, has 4).
SMALL = Size("small", transformer_iwslt_de_en, {"dropout": 0.3, "encoder_attention_heads": 8,
                                                "decoder_attention_heads": 8})
BASE = Size("base", base_architecture, {})  # Vaswani et al. (2017) base = fairseq's transformer
BIG = Size("big", transformer_vaswani_wmt_en_de_big, {})  # Vaswani et al. big
DEEP = Size("deep", base_architecture, {"encoder_layers": 12, "decoder_layers": 12})  # AAN+ Table 4 "Deep"
# You et al. (2020), section 4.2: their IWSLT setting; dropout 0.1 as their code (stupidNMT args.py's default,
# which the README's IWSLT commands keep), not fairseq's IWSLT preset's 0.3.
IWSLT = Size("iwslt", transformer_iwslt_de_en, {
    "encoder_embed_dim": 288, "encoder_ffn_embed_dim": 507, "encoder_attention_heads": 4, "encoder_layers": 5,
    "decoder_embed_dim": 288, "decoder_ffn_embed_dim": 507, "decoder_attention_heads": 4, "decoder_layers": 5,
    "dropout": 0.1,
})

# The sizes, by the name a family's declaration gives them.
SIZES = {size.name: size for size in (TINY, SMALL, BASE, BIG, DEEP, IWSLT)}


@dataclass(frozen=True)
class Architecture:
    """One named architecture; fairseq calls it with the parsed ``args``."""

    name: str
    size: Size
    settings: Mapping[str, Any]  # attribute -> value, or -> function(flags.Resolved args) -> value
    reproduces: str  # the paper table(s) the preset is for

    def __call__(self, args):
        for name, value in self.settings.items():
            if not callable(value) and not hasattr(args, name):
                setattr(args, name, value)
        self.size.apply(args)
        resolved = flags.Resolved(args)  # what the functions below read; they set no flag another reads
        for name, value in self.settings.items():
            if callable(value) and not hasattr(args, name):
                setattr(args, name, value(resolved))
        flags.set_defaults(args)


def _architecture(preset: families.Preset) -> Architecture:
    if preset.size not in SIZES:
        raise ValueError(f"family {preset.family.prefix}: no size {preset.size!r}; sizes are {', '.join(SIZES)}")
    return Architecture(preset.name, SIZES[preset.size], preset.family.settings_at(preset.size), preset.reproduces)


ARCHITECTURES = tuple(_architecture(preset) for preset in families.presets())

for _arch in ARCHITECTURES:  # fairseq's ARCH_CONFIG_REGISTRY[name] is then the row itself
    register_model_architecture("posnet_transformer", _arch.name)(_arch)
