"""Presets of You, Sun & Iyyer (2020), "Hard-Coded Gaussian Attention for NMT".

Each model comes in three sizes: ``{name}`` (Transformer base, the paper's
WMT setting), ``{name}_iwslt`` (the paper's IWSLT setting: embedding 288, FFN
507, 4 heads, 5 layers, on top of fairseq's IWSLT preset) and ``{name}_tiny``
(tests and the quick start).

* ``hc_gaussian``          HC-SA: hard-coded self-attention, learned cross attention
* ``hc_gaussian_all``      HC-ALL: hard-coded cross attention as well
* ``hc_gaussian_shx``      SH-X: HC-SA with one learned cross head (dim D) in the last
                           decoder layer only (``--learned-cross-layers`` moves/adds it)
* ``transformer_nosa``     Transformer without self-attention sub-layers (-SA row)
* ``hc_gaussian_shx_nosa`` SH-X without self-attention sub-layers (-SA row)

The conv / index variants (Table 5) and -FF (Table 3) are flags:
``--hc-kernel conv|index`` and ``--no-encoder-ffn --no-decoder-ffn``.
"""
import copy

from fairseq.models import register_model_architecture

from ..sites import layer_indices
from .architectures import base, small, tiny


def iwslt(args):
    """The IWSLT size of You et al. (2020): 288 / 507 / 4 heads / 5 layers."""
    for side in ("encoder", "decoder"):
        setattr(args, f"{side}_embed_dim", getattr(args, f"{side}_embed_dim", 288))
        setattr(args, f"{side}_ffn_embed_dim", getattr(args, f"{side}_ffn_embed_dim", 507))
        setattr(args, f"{side}_attention_heads", getattr(args, f"{side}_attention_heads", 4))
        setattr(args, f"{side}_layers", getattr(args, f"{side}_layers", 5))
    small(args)


SIZES = {"": base, "_iwslt": iwslt, "_tiny": tiny}


def hard_coded_self(args, size_fn):
    args.encoder_self_mixer = getattr(args, "encoder_self_mixer", "hc_gaussian")
    args.decoder_self_mixer = getattr(args, "decoder_self_mixer", "hc_gaussian")


def hard_coded_all(args, size_fn):
    hard_coded_self(args, size_fn)
    args.cross_mixer = getattr(args, "cross_mixer", "hc_gaussian_cross")


def no_self_attention(args, size_fn):
    args.encoder_self_mixer = getattr(args, "encoder_self_mixer", "none")
    args.decoder_self_mixer = getattr(args, "decoder_self_mixer", "none")


def learned_cross_layers(args, size_fn):
    """The per-layer ``--cross-mixer`` spec of SH-X: ``learned_cross`` in the layers
    that ``--learned-cross-layers`` names (default: the last one), none elsewhere."""
    if getattr(args, "cross_mixer", None) is not None:
        return
    # The number of decoder layers is only known once the size preset has run;
    # run it on a copy so that this preset's own choices still come first.
    probe = copy.copy(args)
    size_fn(probe)
    layers, spec = probe.decoder_layers, probe.learned_cross_layers
    chosen = layer_indices("--learned-cross-layers", spec, layers)
    args.cross_mixer = ",".join("learned_cross" if i in chosen else "none" for i in range(layers))


def single_head_cross(args, size_fn):
    hard_coded_self(args, size_fn)
    learned_cross_layers(args, size_fn)


def single_head_cross_no_self_attention(args, size_fn):
    no_self_attention(args, size_fn)
    learned_cross_layers(args, size_fn)


PRESETS = {
    "hc_gaussian": hard_coded_self,
    "hc_gaussian_all": hard_coded_all,
    "hc_gaussian_shx": single_head_cross,
    "transformer_nosa": no_self_attention,
    "hc_gaussian_shx_nosa": single_head_cross_no_self_attention,
}

for _name, _mechanism in PRESETS.items():
    for _suffix, _size_fn in SIZES.items():
        def _arch(args, mechanism=_mechanism, size_fn=_size_fn):
            mechanism(args, size_fn)
            size_fn(args)

        register_model_architecture("posnet_transformer", f"{_name}{_suffix}")(_arch)
