"""Every named architecture of ``posnet_transformer``, in one table: name -> size -> mechanism settings.

Each name is written out in full once, in an :class:`Architecture` row that
gives its :class:`Size`, the settings of its mechanism and the paper table it
reproduces, so ``grep -rn '"rposnet_transformer_base"' posnet_fairseq`` finds
its definition. The rows are grouped by paper; above them, the settings each
mechanism's rows share, with the mixers they configure.

Adding a family is one edit here: its settings (if no existing ones fit) and
its rows. ``tests/test_architectures.py`` pins the names and what each
resolves to, so a new name is added there deliberately (then ``python
tests/test_architectures.py --write-fixture``), and checks that a name's
suffix names its size.

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

from .. import flags
from ..mixers.posnet import PositionAttention
from ..sites import SITE_LIST, dest, layer_indices, spec_items


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
IWSLT = Size("iwslt", transformer_iwslt_de_en, {  # You et al. (2020), section 4.2: their IWSLT setting
    "encoder_embed_dim": 288, "encoder_ffn_embed_dim": 507, "encoder_attention_heads": 4, "encoder_layers": 5,
    "decoder_embed_dim": 288, "decoder_ffn_embed_dim": 507, "decoder_attention_heads": 4, "decoder_layers": 5,
    "dropout": 0.3,
})

TESTS = "no paper table: tests and the quick start"


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


# ----- PosNet paper (Schmidt & Di Gangi) -----

# aPosNet / rPosNet (mixers/posnet.py), as in the paper (Table 2, and its
# authors' configurations): PosNet in the encoder and decoder self-attention,
# MHA in cross-attention, GeLU gating (Eq. 4) on, K = 16 (big: K = 8, section
# 5.2). rPosNet uses learned absolute position embeddings (its queries are
# that table, LayerNorm'd); aPosNet keeps fairseq's sinusoids.
#
# Gating follows the mixers: unless --{site}-gating is given, a layer is gated
# exactly when its mixer is a PosNet mixer. So the placement rows of Table 4
# are one flag away (--arch rposnet_transformer_base --encoder-self-mixer mha:
# ungated MHA encoder, gated rPosNet decoder; --cross-mixer rposnet: gated
# rPosNet cross-attention), and --encoder-self-gating off --decoder-self-gating
# off gives the ungated rows of Table 6.
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

# Shaw et al. (2018) relative attention and "relative attention" (content
# queries x relative keys, no W_K) (mixers/shaw.py): K = 16 (big: K = 8),
# per-head relative-key slices, no value term, as the PosNet paper's baseline.
# No absolute position embeddings, as Shaw et al. and the PosNet baseline
# (use_pos_embed: False); to keep fairseq's sinusoids, use --arch
# posnet_transformer_<size> --encoder-self-mixer shaw --decoder-self-mixer shaw.
SHAW = {"encoder_self_mixer": "shaw", "decoder_self_mixer": "shaw", "no_token_positional_embeddings": True}
RELATTN = {"encoder_self_mixer": "relattn", "decoder_self_mixer": "relattn", "no_token_positional_embeddings": True}


# LinearNet (mixers/linearnet.py) in the encoder and decoder self-attention, a
# 128 x 128 table per head (the paper's maximum sentence length); gLinearNet
# adds the gating of Eq. 4. The presets carry their limit: --max-source- and
# --max-target-positions default to the table's length, so they train with
# fairseq's default flags; a larger explicit value is refused at model build.
def _linearnet_table_length(args):
    return args.linearnet_max_length


LINEARNET = {"encoder_self_mixer": "linearnet", "decoder_self_mixer": "linearnet", "linearnet_max_length": 128,
             "max_source_positions": _linearnet_table_length, "max_target_positions": _linearnet_table_length}
GLINEARNET = {**LINEARNET, "encoder_self_gating": "on", "decoder_self_gating": "on"}
# FourierNet (mixers/fouriernet.py) in the encoder self-attention only, as in the paper.
FOURIERNET = {"encoder_self_mixer": "fouriernet"}
# AppTek's light convolution (mixers/lightconv_apptek.py), Table 5 one step at
# a time: window +-16 at every size (AppTek's configurations), then + GeLU
# gating, then + global context. fairseq's sinusoids are kept (the notes do
# not say whether AppTek's LightConv models add them).
LIGHTCONV = {"encoder_self_mixer": "lightconv_apptek", "decoder_self_mixer": "lightconv_apptek",
             "lightconv_max_relative": 16}
LIGHTCONV_GATED = {**LIGHTCONV, "encoder_self_gating": "on", "decoder_self_gating": "on"}
LIGHTCONV_GLOBAL = {**LIGHTCONV_GATED, "lightconv_global_context": True}

# ----- AAN+ (Zhang et al.; the 2018 AAN, Zhang et al. 2018a) -----

# The aan mixer (mixers/aan.py) in every decoder self-attention. Pattern
# combinations (Table 6) and activations (Table 5) are flags: --aan-patterns
# ner,far, --aan-activation relu.
AAN_2018 = {"decoder_self_mixer": "aan", "aan_patterns": "avg", "aan_ffn": True}  # Eq. 2: average, FFN, gate
AAN_PLUS_AVG = {"decoder_self_mixer": "aan", "aan_patterns": "avg", "aan_ffn": False}  # cumulative average
AAN_PLUS_NER = {"decoder_self_mixer": "aan", "aan_patterns": "ner", "aan_ffn": False}  # exp(alpha k)
AAN_PLUS_FAR = {"decoder_self_mixer": "aan", "aan_patterns": "far", "aan_ffn": False}  # exp(-beta k)
AAN_PLUS_WET = {"decoder_self_mixer": "aan", "aan_patterns": "wet", "aan_ffn": False}  # exp(gamma U z_k)
SSRU = {"decoder_self_mixer": "ssru"}  # mixers/ssru.py: the AAN+ paper's SSRU baseline (Kim et al., 2019)
LINEAR_ATTENTION = {"decoder_self_mixer": "linear_attention"}  # mixers/linear_attention.py (Katharopoulos et al.)

# ----- Hard-coded Gaussian attention (You, Sun & Iyyer 2020) -----


def _learned_cross_layers(args):
    """SH-X's per-layer --cross-mixer: learned_cross in the layers that
    --learned-cross-layers names (default: the last one), no cross attention elsewhere."""
    chosen = layer_indices("--learned-cross-layers", args.learned_cross_layers, args.decoder_layers)
    return ",".join("learned_cross" if i in chosen else "none" for i in range(args.decoder_layers))


# mixers/hc_gaussian.py. HC-SA: hard-coded self-attention; HC-ALL: hard-coded
# cross attention as well; SH-X: HC-SA with one learned cross head (dim D) in
# the last decoder layer only; -SA: no self-attention sub-layers. The conv /
# index variants (Table 5) and -FF (Table 3) are flags: --hc-kernel conv|index,
# --no-encoder-ffn --no-decoder-ffn.
HC_SA = {"encoder_self_mixer": "hc_gaussian", "decoder_self_mixer": "hc_gaussian"}
HC_ALL = {**HC_SA, "cross_mixer": "hc_gaussian_cross"}
SH_X = {**HC_SA, "cross_mixer": _learned_cross_layers}
NO_SA = {"encoder_self_mixer": "none", "decoder_self_mixer": "none"}
SH_X_NO_SA = {**NO_SA, "cross_mixer": _learned_cross_layers}

# ----- TISA (Wennberg & Henter 2021) -----

# mixers/tisa.py in every self-attention: mode (a) beside the sinusoids; mode
# (b) instead of them (with --tisa-kernels 0: no position information at all
# but the decoder's causal mask). Cross attention stays MHA (no relative
# distance between a target and a source position). The paper evaluates on
# GLUE, not translation: the presets serve recipes/tisa/mt.sh.
TISA = {"encoder_self_mixer": "tisa", "decoder_self_mixer": "tisa"}
TISA_NOPE = {**TISA, "no_token_positional_embeddings": True}

# ----- Position schemes on content attention (docs/position-schemes.md) -----

# RoPE, ALiBi, T5's bias and KERPLE (mixers/rope.py, alibi.py, t5_bias.py,
# kerple.py) in every self-attention, each instead of the token position
# embeddings, as in their papers; cross attention stays MHA (no distance
# between a target and a source position; T5 uses no bias there). NoPE
# (Kazemnejad et al., NeurIPS 2023): MHA everywhere and no position
# information at all, so only the decoder's causal mask tells order (the
# encoder is a bag of words); the same model as tisa_nope_* --tisa-kernels 0.
ROPE = {"encoder_self_mixer": "rope", "decoder_self_mixer": "rope", "no_token_positional_embeddings": True}
ALIBI = {"encoder_self_mixer": "alibi", "decoder_self_mixer": "alibi", "no_token_positional_embeddings": True}
T5_BIAS = {"encoder_self_mixer": "t5_bias", "decoder_self_mixer": "t5_bias", "no_token_positional_embeddings": True}
KERPLE = {"encoder_self_mixer": "kerple", "decoder_self_mixer": "kerple", "no_token_positional_embeddings": True}
NOPE = {"no_token_positional_embeddings": True}
NO_TABLE = "no paper table: the position schemes beside the papers' mechanisms"

# ----- the table: name, size, settings, what it reproduces -----
ARCHITECTURES = (
    # The Transformer: every site mha.
    Architecture("posnet_transformer", BASE, {}, "= posnet_transformer_base"),
    Architecture("posnet_transformer_tiny", TINY, {}, TESTS),
    Architecture("posnet_transformer_small", SMALL, {}, "the Transformer row of PosNet Table 3 (small De-En)"),
    Architecture("posnet_transformer_base", BASE, {},
                 "the Transformer rows of PosNet Tables 2, 4, 6; AAN+ Tables 2, 6, 7; You et al. Table 2 (WMT)"),
    Architecture("posnet_transformer_big", BIG, {},
                 "the Transformer rows of PosNet Table 3 (big En-De) and AAN+ Table 4 (big)"),

    # PosNet paper
    Architecture("aposnet_transformer_tiny", TINY, {**APOSNET, "posnet_max_relative": 16}, TESTS),
    Architecture("aposnet_transformer_small", SMALL, {**APOSNET, "posnet_max_relative": 16},
                 "PosNet Table 3 (small De-En)"),
    Architecture("aposnet_transformer_base", BASE, {**APOSNET, "posnet_max_relative": 16}, "PosNet Tables 2 and 6"),
    Architecture("aposnet_transformer_big", BIG, {**APOSNET, "posnet_max_relative": 8}, "PosNet Table 3 (big En-De)"),
    Architecture("rposnet_transformer_tiny", TINY, {**RPOSNET, "posnet_max_relative": 16}, TESTS),
    Architecture("rposnet_transformer_small", SMALL, {**RPOSNET, "posnet_max_relative": 16},
                 "PosNet Table 3 (small De-En)"),
    Architecture("rposnet_transformer_base", BASE, {**RPOSNET, "posnet_max_relative": 16},
                 "PosNet Tables 2, 4, 5 and 6"),
    Architecture("rposnet_transformer_big", BIG, {**RPOSNET, "posnet_max_relative": 8},
                 "PosNet Table 3 (big En-De), K = 8 (section 5.2)"),
    Architecture("shaw_transformer_tiny", TINY, {**SHAW, "relative_max_distance": 16}, TESTS),
    Architecture("shaw_transformer_small", SMALL, {**SHAW, "relative_max_distance": 16},
                 "PosNet Table 3 (small De-En)"),
    Architecture("shaw_transformer_base", BASE, {**SHAW, "relative_max_distance": 16}, "PosNet Table 2"),
    Architecture("shaw_transformer_big", BIG, {**SHAW, "relative_max_distance": 8},
                 "PosNet Table 3 (big En-De), K = 8"),
    Architecture("relattn_transformer_tiny", TINY, {**RELATTN, "relative_max_distance": 16}, TESTS),
    Architecture("relattn_transformer_small", SMALL, {**RELATTN, "relative_max_distance": 16},
                 "PosNet Table 3 (small De-En)"),
    Architecture("relattn_transformer_base", BASE, {**RELATTN, "relative_max_distance": 16}, "PosNet Table 2"),
    Architecture("relattn_transformer_big", BIG, {**RELATTN, "relative_max_distance": 8},
                 "PosNet Table 3 (big En-De), K = 8"),
    Architecture("linearnet_transformer_tiny", TINY, LINEARNET, TESTS),
    Architecture("linearnet_transformer_small", SMALL, LINEARNET, "the PosNet paper's small size (in no table)"),
    Architecture("linearnet_transformer_base", BASE, LINEARNET, "PosNet Tables 2 and 6"),
    Architecture("linearnet_transformer_big", BIG, LINEARNET, "the PosNet paper's big size (in no table)"),
    Architecture("glinearnet_transformer_tiny", TINY, GLINEARNET, TESTS),
    Architecture("glinearnet_transformer_small", SMALL, GLINEARNET, "the PosNet paper's small size (in no table)"),
    Architecture("glinearnet_transformer_base", BASE, GLINEARNET, "PosNet Tables 2 and 6"),
    Architecture("glinearnet_transformer_big", BIG, GLINEARNET, "the PosNet paper's big size (in no table)"),
    Architecture("fouriernet_transformer_tiny", TINY, FOURIERNET, TESTS),
    Architecture("fouriernet_transformer_small", SMALL, FOURIERNET, "the PosNet paper's small size (in no table)"),
    Architecture("fouriernet_transformer_base", BASE, FOURIERNET, "PosNet Table 2"),
    Architecture("fouriernet_transformer_big", BIG, FOURIERNET, "the PosNet paper's big size (in no table)"),
    Architecture("lightconv_apptek_transformer_tiny", TINY, LIGHTCONV, TESTS),
    Architecture("lightconv_apptek_transformer_small", SMALL, LIGHTCONV,
                 "the PosNet paper's small size (in no table)"),
    Architecture("lightconv_apptek_transformer_base", BASE, LIGHTCONV, "PosNet Tables 2 and 5 (Light Convolution)"),
    Architecture("lightconv_apptek_transformer_big", BIG, LIGHTCONV, "the PosNet paper's big size (in no table)"),
    Architecture("lightconv_apptek_gated_transformer_tiny", TINY, LIGHTCONV_GATED, TESTS),
    Architecture("lightconv_apptek_gated_transformer_small", SMALL, LIGHTCONV_GATED,
                 "the PosNet paper's small size (in no table)"),
    Architecture("lightconv_apptek_gated_transformer_base", BASE, LIGHTCONV_GATED, "PosNet Table 5 (+ GeLU gating)"),
    Architecture("lightconv_apptek_gated_transformer_big", BIG, LIGHTCONV_GATED,
                 "the PosNet paper's big size (in no table)"),
    Architecture("lightconv_apptek_global_transformer_tiny", TINY, LIGHTCONV_GLOBAL, TESTS),
    Architecture("lightconv_apptek_global_transformer_small", SMALL, LIGHTCONV_GLOBAL,
                 "the PosNet paper's small size (in no table)"),
    Architecture("lightconv_apptek_global_transformer_base", BASE, LIGHTCONV_GLOBAL,
                 "PosNet Table 5 (+ global context)"),
    Architecture("lightconv_apptek_global_transformer_big", BIG, LIGHTCONV_GLOBAL,
                 "the PosNet paper's big size (in no table)"),

    # AAN+: the base size has no suffix.
    Architecture("aan_tiny", TINY, AAN_2018, TESTS),
    Architecture("aan", BASE, AAN_2018, "the 2018 AAN (AAN+ Eq. 2): in no AAN+ table; a reference row of recipes/aan"),
    Architecture("aan_deep", DEEP, AAN_2018, "the 2018 AAN at AAN+ Table 4's deep size"),
    Architecture("aan_big", BIG, AAN_2018, "the 2018 AAN at AAN+ Table 4's big size"),
    Architecture("aan_plus_avg_tiny", TINY, AAN_PLUS_AVG, TESTS),
    Architecture("aan_plus_avg", BASE, AAN_PLUS_AVG, "AAN+ Tables 2, 6 (and its combinations) and 7 (AVG)"),
    Architecture("aan_plus_avg_deep", DEEP, AAN_PLUS_AVG, "AAN+ Table 4 (deep, AVG)"),
    Architecture("aan_plus_avg_big", BIG, AAN_PLUS_AVG, "AAN+ Table 4 (big, AVG)"),
    Architecture("aan_plus_ner_tiny", TINY, AAN_PLUS_NER, TESTS),
    Architecture("aan_plus_ner", BASE, AAN_PLUS_NER, "AAN+ Tables 2, 6 and 7 (NER); Table 5 with --aan-activation"),
    Architecture("aan_plus_ner_deep", DEEP, AAN_PLUS_NER, "AAN+ Table 4 (deep, NER)"),
    Architecture("aan_plus_ner_big", BIG, AAN_PLUS_NER, "AAN+ Table 4 (big, NER)"),
    Architecture("aan_plus_far_tiny", TINY, AAN_PLUS_FAR, TESTS),
    Architecture("aan_plus_far", BASE, AAN_PLUS_FAR, "AAN+ Tables 2, 6 and 7 (FAR)"),
    Architecture("aan_plus_far_deep", DEEP, AAN_PLUS_FAR, "AAN+ Table 4 (deep, FAR)"),
    Architecture("aan_plus_far_big", BIG, AAN_PLUS_FAR, "AAN+ Table 4 (big, FAR)"),
    Architecture("aan_plus_wet_tiny", TINY, AAN_PLUS_WET, TESTS),
    Architecture("aan_plus_wet", BASE, AAN_PLUS_WET, "AAN+ Tables 2, 6 and 7 (WET); Table 5 with --aan-activation"),
    Architecture("aan_plus_wet_deep", DEEP, AAN_PLUS_WET, "AAN+ Table 4 (deep, WET)"),
    Architecture("aan_plus_wet_big", BIG, AAN_PLUS_WET, "AAN+ Table 4 (big, WET)"),
    Architecture("ssru_tiny", TINY, SSRU, TESTS),
    Architecture("ssru", BASE, SSRU, "AAN+ Tables 2 and 7 (SSRU)"),
    Architecture("ssru_deep", DEEP, SSRU, "AAN+ Table 4 (deep, SSRU)"),
    Architecture("ssru_big", BIG, SSRU, "AAN+ Table 4 (big, SSRU)"),
    Architecture("linear_attention_tiny", TINY, LINEAR_ATTENTION, TESTS),
    Architecture("linear_attention", BASE, LINEAR_ATTENTION, "AAN+ Tables 2 and 7 (linear attention)"),
    Architecture("linear_attention_deep", DEEP, LINEAR_ATTENTION, "AAN+ Table 4 (deep, linear attention)"),
    Architecture("linear_attention_big", BIG, LINEAR_ATTENTION, "AAN+ Table 4 (big, linear attention)"),

    # Hard-coded Gaussian attention: the base size (the paper's WMT setting) has no suffix.
    Architecture("hc_gaussian_tiny", TINY, HC_SA, TESTS),
    Architecture("hc_gaussian_iwslt", IWSLT, HC_SA, "You et al. Tables 2 (small datasets), 5 (En-De), 6 and 7 (HC-SA)"),
    Architecture("hc_gaussian", BASE, HC_SA, "You et al. Tables 2 (large datasets), 3 and 5 (En-Ro) (HC-SA)"),
    Architecture("hc_gaussian_all_tiny", TINY, HC_ALL, TESTS),
    Architecture("hc_gaussian_all_iwslt", IWSLT, HC_ALL, "You et al. Table 2 (small datasets, HC-ALL)"),
    Architecture("hc_gaussian_all", BASE, HC_ALL, "You et al. Table 2 (large datasets, HC-ALL)"),
    Architecture("hc_gaussian_shx_tiny", TINY, SH_X, TESTS),
    Architecture("hc_gaussian_shx_iwslt", IWSLT, SH_X, "You et al. Table 2 (small datasets) and Table 7 (SH-X)"),
    Architecture("hc_gaussian_shx", BASE, SH_X, "You et al. Table 2 (large datasets) and Table 3 (SH-X)"),
    Architecture("transformer_nosa_tiny", TINY, NO_SA, TESTS),
    Architecture("transformer_nosa_iwslt", IWSLT, NO_SA, "You et al. Table 7 (BASE/-SA)"),
    Architecture("transformer_nosa", BASE, NO_SA, "You et al. Table 3 (BASE/-SA)"),
    Architecture("hc_gaussian_shx_nosa_tiny", TINY, SH_X_NO_SA, TESTS),
    Architecture("hc_gaussian_shx_nosa_iwslt", IWSLT, SH_X_NO_SA, "You et al. Table 7 (SH-X/-SA)"),
    Architecture("hc_gaussian_shx_nosa", BASE, SH_X_NO_SA, "You et al. Table 3 (SH-X/-SA)"),

    # TISA
    Architecture("tisa_transformer_tiny", TINY, TISA, TESTS),
    Architecture("tisa_transformer_small", SMALL, TISA, "no paper table: recipes/tisa/mt.sh (small, mode a)"),
    Architecture("tisa_transformer_base", BASE, TISA, "no paper table: recipes/tisa/mt.sh (base, mode a)"),
    Architecture("tisa_transformer_big", BIG, TISA, "no paper table: the big size of mode a"),
    Architecture("tisa_nope_transformer_tiny", TINY, TISA_NOPE, TESTS),
    Architecture("tisa_nope_transformer_small", SMALL, TISA_NOPE,
                 "no paper table: recipes/tisa/mt.sh (small, mode b and S = 0)"),
    Architecture("tisa_nope_transformer_base", BASE, TISA_NOPE,
                 "no paper table: recipes/tisa/mt.sh (base, mode b and S = 0)"),
    Architecture("tisa_nope_transformer_big", BIG, TISA_NOPE, "no paper table: the big size of mode b"),

    # Position schemes on content attention
    Architecture("rope_transformer_tiny", TINY, ROPE, TESTS),
    Architecture("rope_transformer_small", SMALL, ROPE, NO_TABLE),
    Architecture("rope_transformer_base", BASE, ROPE, NO_TABLE),
    Architecture("rope_transformer_big", BIG, ROPE, NO_TABLE),
    Architecture("alibi_transformer_tiny", TINY, ALIBI, TESTS),
    Architecture("alibi_transformer_small", SMALL, ALIBI, NO_TABLE),
    Architecture("alibi_transformer_base", BASE, ALIBI, NO_TABLE),
    Architecture("alibi_transformer_big", BIG, ALIBI, NO_TABLE),
    Architecture("t5bias_transformer_tiny", TINY, T5_BIAS, TESTS),
    Architecture("t5bias_transformer_small", SMALL, T5_BIAS, NO_TABLE),
    Architecture("t5bias_transformer_base", BASE, T5_BIAS, NO_TABLE),
    Architecture("t5bias_transformer_big", BIG, T5_BIAS, NO_TABLE),
    Architecture("kerple_transformer_tiny", TINY, KERPLE, TESTS),
    Architecture("kerple_transformer_small", SMALL, KERPLE, NO_TABLE),
    Architecture("kerple_transformer_base", BASE, KERPLE, NO_TABLE),
    Architecture("kerple_transformer_big", BIG, KERPLE, NO_TABLE),
    Architecture("nope_transformer_tiny", TINY, NOPE, TESTS),
    Architecture("nope_transformer_small", SMALL, NOPE, NO_TABLE),
    Architecture("nope_transformer_base", BASE, NOPE, NO_TABLE),
    Architecture("nope_transformer_big", BIG, NOPE, NO_TABLE),
)

for _arch in ARCHITECTURES:  # fairseq's ARCH_CONFIG_REGISTRY[name] is then the row itself
    register_model_architecture("posnet_transformer", _arch.name)(_arch)
