"""The named architectures of ``posnet_transformer``: one :class:`Architecture` row per name.

Every name is written out in full once, in a row that gives its
:class:`Size`, its mechanism settings and the paper table it reproduces, so
``grep -rn '"rposnet_transformer_base"' posnet_fairseq`` finds its definition.
The rows of a mechanism live beside it: ``<mixer>_architectures.py`` holds the
presets of ``mixers/<mixer>.py`` (``posnet_architectures.py`` for
``mixers/posnet.py``, ...); this module holds the sizes, the plain Transformer
rows and the machinery.

Adding a family is one edit: its rows, with the settings they share, in the
module of its mixer (a new ``models/<mixer>_architectures.py`` is imported by
``models/__init__.py`` without further registration). ``tests/test_architectures.py``
pins the names and what each resolves to, so a new name is added there
deliberately (then ``python tests/test_architectures.py --write-fixture``).

A setting is a default: a flag given on the command line (or stored in a
checkpoint) always wins. Its value is a constant, or a function of the
resolved arguments for a choice that depends on another flag or on the size
(PosNet's gating follows the mixers; SH-X's per-layer cross spec follows the
decoder depth). fairseq applies an architecture after parsing the command line
and again when it loads a checkpoint; flags of the model (all of this
plugin's, and fairseq's model flags such as ``--max-source-positions``) are
parsed without argparse defaults, so "not given" is "absent from args".
"""
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from fairseq.models import register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_vaswani_wmt_en_de_big,
)

from .. import flags


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
# fairseq's IWSLT preset leaves dropout at 0.1; the IWSLT recipes (and the PosNet
# paper's small models) use 0.3.
SMALL = Size("small", transformer_iwslt_de_en, {"dropout": 0.3})
BASE = Size("base", base_architecture, {})  # Vaswani et al. (2017) base = fairseq's transformer
BIG = Size("big", transformer_vaswani_wmt_en_de_big, {})  # Vaswani et al. big
DEEP = Size("deep", base_architecture, {"encoder_layers": 12, "decoder_layers": 12})  # AAN+ Table 4 "Deep"
IWSLT = Size("iwslt", transformer_iwslt_de_en, {  # You et al. (2020), section 4.2: their IWSLT setting
    "encoder_embed_dim": 288, "encoder_ffn_embed_dim": 507, "encoder_attention_heads": 4, "encoder_layers": 5,
    "decoder_embed_dim": 288, "decoder_ffn_embed_dim": 507, "decoder_attention_heads": 4, "decoder_layers": 5,
    "dropout": 0.3,
})

TESTS = "no paper table: tests and the quick start"


class _Resolved:
    """``args`` as they will be once every flag has its value: what a setting function reads."""

    def __init__(self, args):
        self._args = args

    def __getattr__(self, name):
        if hasattr(self._args, name):
            return getattr(self._args, name)
        defaults = {f.dest: f.default for group in flags.GROUPS for f in group.flags}
        if name not in defaults:
            raise AttributeError(name)
        return defaults[name]


@dataclass(frozen=True)
class Architecture:
    """One named architecture; fairseq calls it with the parsed ``args``."""

    name: str
    size: Size
    settings: Mapping[str, Any]  # attribute -> value, or -> function(resolved args) -> value
    reproduces: str  # the paper table(s) the preset is for

    def __call__(self, args):
        for name, value in self.settings.items():
            if not callable(value) and not hasattr(args, name):
                setattr(args, name, value)
        self.size.apply(args)
        for name, value in self.settings.items():
            if callable(value) and not hasattr(args, name):
                setattr(args, name, value(_Resolved(args)))
        flags.set_defaults(args)


def register(*architectures: Architecture):
    """Registers each row with fairseq (``ARCH_CONFIG_REGISTRY[name]`` is then the row itself)."""
    for arch in architectures:
        register_model_architecture("posnet_transformer", arch.name)(arch)


register(
    Architecture("posnet_transformer", BASE, {}, "= posnet_transformer_base (every site mha)"),
    Architecture("posnet_transformer_tiny", TINY, {}, TESTS),
    Architecture("posnet_transformer_small", SMALL, {}, "the Transformer row of PosNet Table 3 (small De-En)"),
    Architecture("posnet_transformer_base", BASE, {},
                 "the Transformer rows of PosNet Tables 2, 4, 6; AAN+ Tables 2, 6, 7; You et al. Table 2 (WMT)"),
    Architecture("posnet_transformer_big", BIG, {},
                 "the Transformer rows of PosNet Table 3 (big En-De) and AAN+ Table 4 (big)"),
)
