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
import dataclasses
import logging

from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model
from fairseq.models.transformer import (TransformerConfig, TransformerDecoderBase, TransformerEncoderBase,
                                        TransformerModel)
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
import torch
from torch import nn

from .. import flags, position_augmentation
from ..data.length_ratio import length_ratio_from_task
from ..mixers.attention import real_positions
from ..mixers.base import Mixer
from ..mixers.forward_context import ForwardContext
from ..mixers import rope_scaling
from ..mixers.registry import MIXERS, MixerContext, build_site_mixer, lookup_mixer
from ..sites import SITE, SITE_LIST, dest, per_layer
from . import augmented_position_embeddings, beam_shared, int8
from .ds_init import depth_scaled_init

logger = logging.getLogger(__name__)


FLAGS = flags.declare(
    "posnet_transformer: mixers per site", "model",
    # The help names no mixer: each mechanism's docs page lists its own (families.py), so a new
    # mechanism changes no page but its own; an unknown name's error lists the site's mixers.
    *(flags.Flag(site.mixer_flag, "mha", f"{site.name.replace('_', ' ')} mixer, one name or one per layer "
                 "(the mixers: docs/model.md#mixers)" + ("; 'none' removes the sub-layer" if site.cross else ""),
                 metavar="SPEC") for site in SITE_LIST),
    flags.Flag("--length-ratio", None, "length ratio gamma = mean source / mean target length for cross-attention "
               "mixers and a decoder's spread test positions (--randomized-test-positions)", type=float,
               metavar="GAMMA", check=flags.positive_number,
               default_doc="computed from the binarized training set and stored in the checkpoint"),
    flags.Flag("--no-encoder-ffn", False, "remove the encoder feed-forward sub-layers (-FF)"),
    flags.Flag("--no-decoder-ffn", False, "remove the decoder feed-forward sub-layers (-FF)"),
    int8.FLAG,
    int8.ENGINE_FLAG,
)


# The longest sentence a side takes (fairseq's flags): its learned position table has that many rows.
LENGTH_LIMIT_FLAGS = {"encoder": "--max-source-positions", "decoder": "--max-target-positions"}


def layer_mixer_names(opts, site, num_layers):
    """The mixer name of every layer at ``site`` (a sites.Site), validated against the registry."""
    flag = site.mixer_flag
    names = per_layer(flag, getattr(opts, dest(flag)), num_layers)
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


def _site_mixer(name, ctx, build_fairseq_attention):
    """Mixer ``name`` built from ``ctx``, completed with how fairseq builds its attention there."""
    return build_site_mixer(name, dataclasses.replace(ctx, build_fairseq_attention=build_fairseq_attention))


class PosNetEncoderLayer(_NoFFN, TransformerEncoderLayerBase):
    def __init__(self, cfg, contexts, mixer_names, remove_ffn, return_fc=False):
        self.contexts, self.self_mixer_name = contexts, mixer_names["encoder_self"]
        self.remove_ffn = remove_ffn
        super().__init__(cfg, return_fc=return_fc)
        self._drop_removed_norms()

    def build_self_attention(self, embed_dim, cfg):
        return _site_mixer(self.self_mixer_name, self.contexts["encoder_self"],
                           lambda: super(PosNetEncoderLayer, self).build_self_attention(embed_dim, cfg))


class PosNetDecoderLayer(_NoFFN, TransformerDecoderLayerBase):
    def __init__(self, cfg, contexts, mixer_names, remove_ffn, add_bias_kv=False, add_zero_attn=False):
        self.contexts, self.mixer_names = contexts, mixer_names
        self.self_mixer_name = mixer_names["decoder_self"]
        self.remove_ffn = remove_ffn
        super().__init__(
            cfg,
            no_encoder_attn=mixer_names["cross"] == "none",
            add_bias_kv=add_bias_kv,
            add_zero_attn=add_zero_attn,
        )
        self._drop_removed_norms()

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        return _site_mixer(self.self_mixer_name, self.contexts["decoder_self"],
                           lambda: super(PosNetDecoderLayer, self).build_self_attention(
                               embed_dim, cfg, add_bias_kv=add_bias_kv, add_zero_attn=add_zero_attn))

    def build_encoder_attention(self, embed_dim, cfg):
        return _site_mixer(self.mixer_names["cross"], self.contexts["cross"],
                           lambda: super(PosNetDecoderLayer, self).build_encoder_attention(embed_dim, cfg))


class _MixerHost:
    """Shared by encoder and decoder: the sites of its layers, their mixer names per layer, contexts,
    the ``mixer_shared`` ModuleDict for modules all layers of one side share, and the side's
    ``forward_context`` with its training position augmentation."""

    def _init_sites(self, cfg, sites, num_layers):
        self.mixer_sites, self.mixer_layers = sites, num_layers
        # Read once for the whole side; every context shares what it reads.
        self.options_read = {}
        self.model_options = FLAGS.options(cfg)
        self.mixer_names = {site.name: layer_mixer_names(self.model_options, site, num_layers) for site in sites}
        self._layers_built = 0  # build_*_layer gets no index from fairseq
        self.side = sites[0].side
        self.forward_context = ForwardContext()
        self.position_augmentation = position_augmentation.for_side(cfg, self.side)
        if self.side == "decoder" and self.position_augmentation and self.position_augmentation.spreads_at_test:
            self.forward_context.needs_source_lengths = True  # the decoder spreads its positions for them

    def _augment_positions(self, cfg):
        """Hooks the token position embeddings to the training augmentation; refuses one nothing reads."""
        augmentation = self.position_augmentation
        if augmentation is None:
            return
        flag, limit_flag = f"--{self.side}-position-augmentation", LENGTH_LIMIT_FLAGS[self.side]
        if cfg.checkpoint_activations:
            raise ValueError(f"{flag} {augmentation.method}: not with --checkpoint-activations (a layer recomputed "
                             "in the backward pass would not see the positions its forward pass drew)")
        if self.embed_positions is not None:
            augmented_position_embeddings.augment(self.embed_positions, self.forward_context, augmentation, flag,
                                                  limit_flag)
        if not self.forward_context.position_readers:
            raise ValueError(f"{flag} {augmentation.method}: the {self.side} has neither token position embeddings "
                             "nor a rotary mixer (rope, xpos): nothing would read the augmented positions")

    def _drawn_positions(self, tokens, incremental_state, source_lengths=None):
        """(positions, bound): the augmented B x T positions of a teacher-forced training pass, the test-time
        positions of a randomized side that spreads them (B x 1 in an incremental decoding step: the step's
        own), with one more than the largest of them; else (None, None): exact positions. A sentence's positions
        are spread for its own length, a decoder's for the length its source's (``source_lengths``, B) leads to
        expect."""
        augmentation = self.position_augmentation
        training = self.training and incremental_state is None
        if augmentation is None or not (training or augmentation.spreads_at_test):
            return None, None
        width = tokens.size(1)
        if incremental_state is not None:
            # fairseq's own convention for a decoding step: the step's position is the prefix length - 1.
            positions, pad = torch.full((tokens.size(0), 1), width - 1, device=tokens.device), None
        else:
            pad = tokens.eq(self.padding_idx)
            positions = real_positions(pad, *tokens.shape, tokens.device)
        if training:
            return augmentation.positions(positions, pad), augmentation.bound(width)
        if source_lengths is None:  # the encoder: each sentence's own length, at most the batch's width
            return augmentation.spread(positions, pad, (~pad).sum(1)), augmentation.spread_bound(width, width)
        # (n - 1) / gamma + 1 for a source of n tokens, EOS included (gamma: mean source / mean target length)
        expected = ((source_lengths - 1) / self.model_options.length_ratio).round().long() + 1
        return (augmentation.spread(positions, pad, expected),
                augmentation.spread_bound(width, self._shortest_expected(expected, incremental_state)))

    def _shortest_expected(self, expected, incremental_state):
        """The shortest of the B ``expected`` target lengths, read from the device once per teacher-forced call
        and once per decoding of a batch (its first step): beam search only reorders and drops rows, so later
        steps' shortest is no shorter."""
        if incremental_state is None:
            return int(expected.min())
        state = self.get_incremental_state(incremental_state, "spread_positions")
        if state is None:
            state = {"shortest": int(expected.min())}
            self.set_incremental_state(incremental_state, "spread_positions", state)
        return state["shortest"]

    def _next_layer(self, cfg):
        """The index of the layer being built, its contexts and its mixer names per site."""
        idx, self._layers_built = self._layers_built, self._layers_built + 1
        if not hasattr(self, "mixer_shared"):
            self.mixer_shared = nn.ModuleDict()
        contexts = {}
        for site in self.mixer_sites:
            side = getattr(cfg, site.side)  # cfg.encoder / cfg.decoder
            contexts[site.name] = MixerContext(
                site=site,
                embed_dim=side.embed_dim,
                num_heads=side.attention_heads,
                kdim=cfg.encoder.embed_dim if site.cross else side.embed_dim,
                layer_idx=idx,
                num_layers=self.mixer_layers,
                args=cfg,
                padding_idx=self.padding_idx,
                embed_positions=self.embed_positions,
                shared=self.mixer_shared,
                length_ratio=self.model_options.length_ratio,
                forward_context=self.forward_context,
                options_read=self.options_read,
            )
        return contexts, {site: names[idx] for site, names in self.mixer_names.items()}


class PosNetEncoder(_MixerHost, TransformerEncoderBase):
    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        self._init_sites(cfg, [SITE["encoder_self"]], cfg.encoder.layers)
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self._augment_positions(cfg)

    def forward(self, src_tokens, *args, **kwargs):
        lengths = src_tokens.ne(self.padding_idx).sum(1) if self.forward_context.needs_source_lengths else None
        if self.beam_sharing is not None:
            self.beam_sharing.reset()
        with self.forward_context.call(*self._drawn_positions(src_tokens, None), lengths):
            return super().forward(src_tokens, *args, **kwargs)

    # The model's BeamSharing (beam_shared.py), set once the decoder is built.
    beam_sharing = None

    def reorder_encoder_out(self, encoder_out, new_order):
        if self.beam_sharing is None:
            return super().reorder_encoder_out(encoder_out, new_order)
        return self.beam_sharing.reorder(encoder_out, new_order, super().reorder_encoder_out)

    def build_encoder_layer(self, cfg):
        contexts, names = self._next_layer(cfg)
        layer = PosNetEncoderLayer(cfg, contexts, names, self.model_options.no_encoder_ffn, return_fc=self.return_fc)
        return _wrap_layer(layer, cfg)


class PosNetDecoder(_MixerHost, TransformerDecoderBase):
    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        self._init_sites(cfg, [SITE["decoder_self"], SITE["cross"]], cfg.decoder.layers)
        if no_encoder_attn:
            self.mixer_names["cross"] = ["none"] * cfg.decoder.layers
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn, output_projection)
        self._augment_positions(cfg)

    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        if incremental_state is not None and not incremental_state:  # a search's first step: nothing cached yet
            self._reordering = None
        source_lengths = self._source_lengths(encoder_out)
        with self.forward_context.call(*self._drawn_positions(prev_output_tokens, incremental_state, source_lengths),
                                       source_lengths):
            return super().extract_features(prev_output_tokens, encoder_out, incremental_state, **kwargs)

    # The modules that reorder decoding state, listed once per search (reorder_incremental_state_scripting).
    _reordering = None

    def reorder_incremental_state_scripting(self, incremental_state, new_order):
        """fairseq's reorder of every module's decoding state after a beam search step, with the modules that have
        one listed once per search rather than found at every step: fairseq walks the decoder's ~160 modules and
        asks each for the method, about 0.3 ms of host time per step for a base model (issue 48: a launch-bound
        GPU step pays it in full). A search's first step (an empty ``incremental_state``) lists them anew."""
        if self._reordering is None:
            self._reordering = [m for m in self.modules() if hasattr(m, "reorder_incremental_state")]
        for module in self._reordering:
            result = module.reorder_incremental_state(incremental_state, new_order)
            if result is not None:
                incremental_state = result

    def _source_lengths(self, encoder_out):
        """The B source lengths the encoder output holds (its rows follow beam search), when a mixer needs them."""
        if not self.forward_context.needs_source_lengths or encoder_out is None:
            return None
        states, pads = encoder_out["encoder_out"][0], encoder_out["encoder_padding_mask"]
        if pads and pads[0] is not None:
            return pads[0].logical_not().sum(1)
        return torch.full((states.size(1),), states.size(0), device=states.device)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        contexts, names = self._next_layer(cfg)
        return _wrap_layer(PosNetDecoderLayer(cfg, contexts, names, self.model_options.no_decoder_ffn), cfg)


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
        opts = FLAGS.options(args)
        names = {site.name: layer_mixer_names(opts, site, getattr(args, site.layers_attr)) for site in SITE_LIST}
        rope_scaling.refuse_without_rope(rope_scaling.FLAGS.options(args), [n for ns in names.values() for n in ns])
        if getattr(args, "cross_self_attention", False) and set(names["decoder_self"]) != {"mha"}:
            raise ValueError(
                f"--cross-self-attention needs --decoder-self-mixer mha (got {args.decoder_self_mixer}): "
                "it prepends the encoder output to the decoder's self-attention keys"
            )
        # gamma maps target to source positions: cross-attention mixers use it, and a decoder that spreads its
        # test positions for the target length it expects. Stored in args, hence in the checkpoint: computed once,
        # when the model is built for training.
        decoder_positions = position_augmentation.for_side(args, "decoder")
        needed = any(MIXERS[n].uses_length_ratio for n in names["cross"]) or (
            decoder_positions is not None and decoder_positions.spreads_at_test)
        # Spreading is a generation-time choice: a randomized decoder's checkpoint keeps gamma for it, so that
        # generation needs no training split; built without its training data (a test, an inspection), such a
        # model does not spread now and leaves gamma unset.
        wanted = needed or (decoder_positions is not None and decoder_positions.may_spread_at_test)
        if opts.length_ratio is None and wanted:
            try:
                args.length_ratio = length_ratio_from_task(task)
                logger.info(f"length ratio gamma = {args.length_ratio:.4f} (mean source / mean target length)")
            except (FileNotFoundError, ValueError):
                if needed:
                    raise
        model = super().build_model(args, task)
        model.encoder.beam_sharing = beam_shared.BeamSharing(model.decoder)
        depth_scaled_init(model, args)
        cls._check_max_positions(model, args)
        return int8.quantize_(model, opts.int8_linear, opts.int8_engine)

    def make_generation_fast_(self, **kwargs):
        super().make_generation_fast_(**kwargs)
        # fairseq-generate --no-beamable-mm passes None: no state shared by a sentence's hypotheses
        if "beamable_mm_beam_size" in kwargs and kwargs["beamable_mm_beam_size"] is None:
            self.encoder.beam_sharing.disable()
        else:
            self.encoder.beam_sharing.adopt_step()

    def upgrade_state_dict_named(self, state_dict, name):
        super().upgrade_state_dict_named(state_dict, name)
        int8.drop_tied_output(self, state_dict)

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
