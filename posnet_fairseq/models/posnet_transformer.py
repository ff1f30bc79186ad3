"""``posnet_transformer``: fairseq's Transformer with a mixer spec per attention site.

The model only overrides how attention modules are built
(``build_self_attention`` / ``build_encoder_attention``); fairseq's layer code
runs unchanged. Each site takes a mixer name for all layers or a
comma-separated list with one name per layer::

    --encoder-self-mixer rposnet
    --decoder-self-mixer mha,mha,mha,rposnet,rposnet,rposnet
    --cross-mixer none,none,none,none,none,mha     # cross attention in the last layer only

``none`` removes the sub-layer (the -SA ablation at a self site; no
cross-attention sub-layer at the cross site). ``--no-encoder-ffn`` /
``--no-decoder-ffn`` remove the feed-forward sub-layers (the -FF ablation).
"""
import logging

from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
)
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from torch import nn

from .. import flags
from ..data.length_ratio import length_ratio_from_task
from ..mixers.base import MIXERS, Mixer, MixerContext, build_site_mixer, lookup_mixer, mixers_for_site
from ..sites import SITE, SITE_LIST, dest, per_layer, spec_items
from .ds_init import depth_scaled_init

logger = logging.getLogger(__name__)


FLAGS = flags.declare(
    "posnet_transformer: mixers per site", "model",
    *(flags.Flag(site.mixer_flag, "mha", f"{site.name.replace('_', ' ')} mixer, one name or one per layer "
                 f"({', '.join(mixers_for_site(site.name))})" + ("; 'none' removes the sub-layer"
                                                                  if site.name == "cross" else ""),
                 metavar="SPEC") for site in SITE_LIST),
    flags.Flag("--length-ratio", None, "length ratio gamma = mean source / mean target length for cross-attention "
               "mixers", type=float, metavar="GAMMA",
               default_doc="computed from the binarized training set and stored in the checkpoint"),
    flags.Flag("--no-encoder-ffn", False, "remove the encoder feed-forward sub-layers (-FF)"),
    flags.Flag("--no-decoder-ffn", False, "remove the decoder feed-forward sub-layers (-FF)"),
)


def layer_mixer_names(cfg, site, num_layers):
    """The mixer name of every layer at ``site``, validated against the registry."""
    flag = SITE[site].mixer_flag
    names = per_layer(flag, getattr(cfg, dest(flag)), num_layers)
    for name in names:
        lookup_mixer(name, site)
    return names


def _wrap_layer(layer, cfg):
    """Activation checkpointing and FSDP wrapping, as fairseq applies them to its own layers."""
    if cfg.checkpoint_activations:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    return fsdp_wrap(layer, min_num_params=cfg.min_params_to_wrap if not cfg.checkpoint_activations else 0)


class _NoFFN:
    """Removes the feed-forward sub-layer (-FF): fc1 maps to zero features and
    fc2 (no bias) maps them back to an all-zero output, so the residual passes
    x through; the final LayerNorm then goes too."""

    def build_fc1(self, input_dim, output_dim, q_noise, qn_block_size):
        if self.remove_ffn:
            return nn.Linear(input_dim, 0)
        return super().build_fc1(input_dim, output_dim, q_noise, qn_block_size)

    def build_fc2(self, input_dim, output_dim, q_noise, qn_block_size):
        if self.remove_ffn:
            return nn.Linear(0, output_dim, bias=False)
        return super().build_fc2(input_dim, output_dim, q_noise, qn_block_size)

    def _drop_removed_norms(self):
        # A removed sub-layer outputs zeros; its LayerNorm must go as well so
        # that the layer is exactly "without" that sub-layer.
        if self.remove_ffn:
            self.final_layer_norm = nn.Identity()
        if self.self_mixer_name == "none":
            self.self_attn_layer_norm = nn.Identity()


class PosNetEncoderLayer(_NoFFN, TransformerEncoderLayerBase):
    def __init__(self, cfg, contexts, mixer_names, return_fc=False):
        self.contexts, self.self_mixer_name = contexts, mixer_names["encoder_self"]
        self.remove_ffn = bool(getattr(cfg, "no_encoder_ffn", False))
        super().__init__(cfg, return_fc=return_fc)
        self._drop_removed_norms()

    def build_self_attention(self, embed_dim, cfg):
        ctx = self.contexts["encoder_self"]
        ctx.build_fairseq_attention = lambda: super(PosNetEncoderLayer, self).build_self_attention(embed_dim, cfg)
        return build_site_mixer(self.self_mixer_name, ctx)


class PosNetDecoderLayer(_NoFFN, TransformerDecoderLayerBase):
    def __init__(self, cfg, contexts, mixer_names, add_bias_kv=False, add_zero_attn=False):
        self.contexts, self.mixer_names = contexts, mixer_names
        self.self_mixer_name = mixer_names["decoder_self"]
        self.remove_ffn = bool(getattr(cfg, "no_decoder_ffn", False))
        super().__init__(
            cfg,
            no_encoder_attn=mixer_names["cross"] == "none",
            add_bias_kv=add_bias_kv,
            add_zero_attn=add_zero_attn,
        )
        self._drop_removed_norms()

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        ctx = self.contexts["decoder_self"]
        ctx.build_fairseq_attention = lambda: super(PosNetDecoderLayer, self).build_self_attention(
            embed_dim, cfg, add_bias_kv=add_bias_kv, add_zero_attn=add_zero_attn
        )
        return build_site_mixer(self.self_mixer_name, ctx)

    def build_encoder_attention(self, embed_dim, cfg):
        ctx = self.contexts["cross"]
        ctx.build_fairseq_attention = lambda: super(PosNetDecoderLayer, self).build_encoder_attention(embed_dim, cfg)
        return build_site_mixer(self.mixer_names["cross"], ctx)


class _MixerHost:
    """Shared by encoder and decoder: per-layer mixer names, contexts and the
    ``mixer_shared`` ModuleDict for modules all layers of one side share."""

    def _contexts(self, cfg, sites, layer_idx, num_layers):
        if not hasattr(self, "mixer_shared"):
            self.mixer_shared = nn.ModuleDict()
        contexts = {}
        for site in sites:
            kdim = cfg.encoder.embed_dim if site == "cross" else cfg.decoder.embed_dim
            embed_dim = cfg.encoder.embed_dim if site == "encoder_self" else cfg.decoder.embed_dim
            heads = cfg.encoder.attention_heads if site == "encoder_self" else cfg.decoder.attention_heads
            contexts[site] = MixerContext(
                site=site,
                embed_dim=embed_dim,
                num_heads=heads,
                kdim=kdim,
                layer_idx=layer_idx,
                num_layers=num_layers,
                args=cfg,
                padding_idx=self.padding_idx,
                embed_positions=self.embed_positions,
                shared=self.mixer_shared,
            )
        return contexts


class PosNetEncoder(_MixerHost, TransformerEncoderBase):
    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        self.mixer_names = {"encoder_self": layer_mixer_names(cfg, "encoder_self", cfg.encoder.layers)}
        self._layers_built = 0  # build_encoder_layer gets no index from fairseq
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)

    def build_encoder_layer(self, cfg):
        idx, self._layers_built = self._layers_built, self._layers_built + 1
        contexts = self._contexts(cfg, ["encoder_self"], idx, cfg.encoder.layers)
        names = {site: names[idx] for site, names in self.mixer_names.items()}
        return _wrap_layer(PosNetEncoderLayer(cfg, contexts, names, return_fc=self.return_fc), cfg)


class PosNetDecoder(_MixerHost, TransformerDecoderBase):
    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        self.mixer_names = {
            site: layer_mixer_names(cfg, site, cfg.decoder.layers) for site in ("decoder_self", "cross")
        }
        if no_encoder_attn:
            self.mixer_names["cross"] = ["none"] * cfg.decoder.layers
        self._layers_built = 0
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn, output_projection)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        idx, self._layers_built = self._layers_built, self._layers_built + 1
        contexts = self._contexts(cfg, ["decoder_self", "cross"], idx, cfg.decoder.layers)
        names = {site: names[idx] for site, names in self.mixer_names.items()}
        return _wrap_layer(PosNetDecoderLayer(cfg, contexts, names), cfg)


@register_model("posnet_transformer")
class PosNetTransformerModel(TransformerModel):
    """fairseq's TransformerModel whose attention sites are built from mixer specs."""

    @classmethod
    def hub_models(cls):
        return {}

    @staticmethod
    def add_args(parser):
        TransformerModel.add_args(parser)
        flags.add_args(parser)

    @classmethod
    def build_model(cls, args, task):
        flags.set_defaults(args)
        mixers = set(spec_items(args.decoder_self_mixer))
        if getattr(args, "cross_self_attention", False) and mixers != {"mha"}:
            raise ValueError(
                f"--cross-self-attention needs --decoder-self-mixer mha (got {args.decoder_self_mixer}): "
                "it prepends the encoder output to the decoder's self-attention keys"
            )
        cfg = TransformerConfig.from_namespace(args)
        for site, layers in (("encoder_self", cfg.encoder.layers), ("decoder_self", cfg.decoder.layers)):
            layer_mixer_names(cfg, site, layers)  # fail early, naming the flag
        # gamma maps target to source positions: only cross-attention uses it.
        cross = layer_mixer_names(cfg, "cross", cfg.decoder.layers)
        if getattr(args, "length_ratio", None) is None and any(MIXERS[n].uses_length_ratio for n in cross):
            # Stored in args, hence in the checkpoint: computed once, at training time.
            args.length_ratio = length_ratio_from_task(task)
            logger.info(f"length ratio gamma = {args.length_ratio:.4f} (mean source / mean target length)")
        model = super().build_model(args, task)
        depth_scaled_init(model, args)
        cls._check_max_positions(model, args)
        return model

    @staticmethod
    def _check_max_positions(model, args):
        limits = (
            ("--max-source-positions", args.max_source_positions, model.encoder),
            ("--max-target-positions", args.max_target_positions, model.decoder),
        )
        for flag, wanted, module in limits:
            for name, sub in module.named_modules():
                limit = sub.max_positions() if isinstance(sub, Mixer) else None
                if limit is not None and limit < wanted:
                    raise ValueError(
                        f"{flag} {wanted} exceeds the {limit} positions that {type(sub).__name__} "
                        f"({name}) supports: pass {flag} {limit} or less"
                    )

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return PosNetEncoder(TransformerConfig.from_namespace(args), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return PosNetDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)
