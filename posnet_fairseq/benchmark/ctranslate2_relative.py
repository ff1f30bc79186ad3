"""Relative schemes deployed: Shaw et al.'s relative positions and T5's relative bias converted to CTranslate2.

CTranslate2's fairseq converter takes fairseq's own Transformer only, and that
one needs position embeddings; the plugin's relative mixers (``shaw``,
``relattn``: ``mixers/shaw.py``; ``t5_bias``: ``mixers/t5_bias.py``) have none.
CTranslate2's Transformer spec has both schemes in its self-attention
(``MultiHeadAttentionSpec``'s ``relative_position`` and
``relative_attention_bias``), so :class:`RelativeConverter` builds that spec
from the plugin's model itself, with CTranslate2's fairseq setters for every
sub-layer fairseq owns (embeddings, feed-forward, LayerNorms, cross attention)
and the mappings below for the self-attention sites:

* **Shaw et al. (2018), Eq. 3-5**, ``e_ij = q_i . (k_j + w^K[clip(j - i, -K,
  K)]) / sqrt(d_h)``: CTranslate2 computes the same logits
  (``relative_position_keys``, the same clipping of j - i, the query scale
  applied to both terms) with one (2K+1) x d_h table shared by all heads, the
  table of ``--relative-embeddings shared``, which maps as it is (the values'
  table too, ``relative_position_values``; without ``--relative-values`` it
  is left out). ``relattn`` has no W_K: its keys are a zero projection.
  The default ``per-head`` layout (one d_h slice of a (2K+1) x D table per
  head) has no such table: each head's query is widened by its 2K+1 slot
  logits ``u_h = w^K_h q_h`` (rows ``w^K_h W^Q_h`` appended to W^Q), the keys
  and values by 2K+1 zeros, and the shared key table is [0 | I], so head h
  adds ``u_h[clip(j - i)] = q_h . w^K_h[clip(j - i)]``, Eq. 5's term exactly.
  With ``--relative-values``, the value table [0 | I] puts Eq. 3's weight per
  slot into those 2K+1 output columns, and the output projection maps them
  through ``W^O_h w^V_h``. The price is a head of d_h + 2K + 1 dimensions
  (K = 16, d_h = 64: 97), the query scale kept at 1/sqrt(d_h).
* **T5 (Raffel et al. 2020, section 2.1)**: one scalar per head and distance
  bucket added to the scaled logits, the table shared by the layers of a
  side: ``relative_attention_bias`` (buckets x heads, the plugin's layout) in
  every layer, bidirectional in the encoder and causal in the decoder as in
  the plugin. CTranslate2 buckets a distance with float32 arithmetic of its
  own (``get_relative_position_bucket``: it adds the exact range before
  truncating); :func:`ctranslate2_buckets` follows it step by step, and a
  model whose (buckets, max distance) put any distance up to the max distance
  in another bucket than the plugin's ``t5_buckets`` does is refused with the
  first such distance (e.g. 48 buckets, 81: distance -54 in the decoder).

Refused, with the reason: absolute position embeddings beside the relative
scheme (CTranslate2 leaves them out of a model whose self-attention is
relative), a side whose self-attention is not relative in every layer,
relative mixers with a logit-bias hook (TISA), any other plugin flag, and
what CTranslate2's fairseq converter refuses (activation, pre-norm on one
side only, different head counts).

It imports ctranslate2 (``requirements/ctranslate2.txt``): :mod:`.ctranslate2_decoding` imports it
only where that is installed.
"""
import numpy as np
import torch
from ctranslate2.converters import fairseq as stock
from ctranslate2.converters import utils
from ctranslate2.converters.converter import Converter
from ctranslate2.specs import attention_spec, transformer_spec

from .. import flags
from ..mixers import shaw, t5_bias
from ..models import ds_init
from ..sites import spec_items

RELATIVE_MIXERS = ("shaw", "relattn", "t5_bias")  # the self-attention mixers this converter maps
SELF_MIXER_FLAGS = ("--encoder-self-mixer", "--decoder-self-mixer")


# The plugin flags whose effect the converted model carries: the self mixers (checked on the built modules),
# the relative mixers' own flags and depth-scaled initialisation (weights only).
CARRIED_FLAGS = set(SELF_MIXER_FLAGS) | {f.name for group in (shaw.FLAGS, t5_bias.FLAGS, ds_init.FLAGS)
                                         for f in group.flags}


def handles(settings):
    """Whether the model with plugin flag ``settings`` ({flag: value}, as ``flags.changed`` reads them)
    has a relative mixer at a self-attention site: this converter's models."""
    return any(name in RELATIVE_MIXERS for flag in SELF_MIXER_FLAGS for name in spec_items(settings.get(flag, "")))


def ctranslate2_buckets(distances, bidirectional, num_buckets, max_distance):
    """The bucket CTranslate2 gives each key-query distance j - i (int array), its float32 steps in order."""
    half = num_buckets // 2 if bidirectional else num_buckets
    exact = half // 2
    log_range = np.log(np.float32(max_distance) / np.float32(exact))
    distances = np.asarray(distances, dtype=np.int64)
    offset = np.where(distances > 0, half, 0) if bidirectional else 0  # keys after the query: the upper half
    n = np.abs(distances) if bidirectional else -np.minimum(distances, 0)
    ratio = np.maximum(n, 1).astype(np.float32) / np.float32(exact)
    spread = (np.float32(exact) + np.log(ratio) / log_range * np.float32(half - exact)).astype(np.int32)
    return offset + np.where(n < exact, n, np.minimum(spread, half - 1))


def _check_buckets(bias, side):
    """Raises ValueError where CTranslate2 buckets a distance up to the max distance otherwise than ``bias``."""
    distances = torch.arange(-bias.max_distance, bias.max_distance + 1)
    ours = t5_bias.t5_buckets(distances, bias.bidirectional, bias.num_buckets, bias.max_distance).numpy()
    theirs = ctranslate2_buckets(distances.numpy(), bias.bidirectional, bias.num_buckets, bias.max_distance)
    differ = np.flatnonzero(ours != theirs)
    if differ.size:
        d = int(distances[differ[0]])
        raise ValueError(f"--t5-bias-buckets {bias.num_buckets} --t5-bias-max-distance {bias.max_distance}: "
                         f"CTranslate2 puts the {side}'s distance {d} in bucket {theirs[differ[0]]}, the plugin in "
                         f"{ours[differ[0]]} (float32 rounding at a bucket boundary): choose other values")


def _array(tensor):
    return tensor.detach().double().numpy()


def _set_self_linears(spec, q, k, v, out):
    """The fused Q, K, V projection and the output projection: (weight, bias) float64 pairs; K None (relattn):
    zero keys, of the queries' width."""
    if k is None:
        k = (np.zeros_like(q[0]), np.zeros_like(q[1]))
    spec.linear[0].weight = np.concatenate([q[0], k[0], v[0]]).astype(np.float32)
    spec.linear[0].bias = np.concatenate([q[1], k[1], v[1]]).astype(np.float32)
    spec.linear[1].weight, spec.linear[1].bias = out[0].astype(np.float32), out[1].astype(np.float32)


def _projections(module):
    """(weight, bias) of q_proj, k_proj (None for relattn), v_proj and out_proj, as float64 arrays."""
    linears = (module.q_proj, module.k_proj, module.v_proj, module.out_proj)
    return [None if lin is None else (_array(lin.weight), _array(lin.bias)) for lin in linears]


def _shaw_shared(module):
    """Shaw et al. with one (2K+1) x d_h table for all heads: CTranslate2's own layout."""
    spec = attention_spec.MultiHeadAttentionSpec(self_attention=True, relative_position=True)
    _set_self_linears(spec, *_projections(module))
    spec.relative_position_keys = _array(module.relative_keys).astype(np.float32)
    if module.relative_values is None:
        del spec.relative_position_values  # Eq. 3's value term is off: CTranslate2 skips it when absent
    else:
        spec.relative_position_values = _array(module.relative_values).astype(np.float32)
    return spec


def _widened(weight, bias, extra_weight, extra_bias, heads):
    """Per head, the head's d_h rows of (``weight``, ``bias``) followed by its rows of the extras (H x R x D)."""
    d_model = weight.shape[1]
    rows = np.concatenate([weight.reshape(heads, -1, d_model), extra_weight], axis=1)
    return rows.reshape(-1, d_model), np.concatenate([bias.reshape(heads, -1), extra_bias], axis=1).reshape(-1)


def _shaw_per_head(module):
    """Shaw et al. with one d_h slice per head: each head widened by its 2K+1 slot logits (module docstring)."""
    (wq, bq), k, (wv, bv), (wo, bo) = _projections(module)
    heads, d_head, d_model = module.num_heads, module.head_dim, module.embed_dim
    slots = 2 * module.max_distance + 1
    spec = attention_spec.MultiHeadAttentionSpec(self_attention=True, relative_position=True,
                                                 head_dim=d_head + slots)
    keys = _array(module.relative_keys).reshape(slots, heads, d_head).transpose(1, 0, 2)  # H x slots x d_h
    zeros_w, zeros_b = np.zeros((heads, slots, d_model)), np.zeros((heads, slots))
    q = _widened(wq, bq, keys @ wq.reshape(heads, d_head, d_model), (keys @ bq.reshape(heads, d_head, 1))[..., 0],
                 heads)
    k = None if k is None else _widened(*k, zeros_w, zeros_b, heads)
    v = _widened(wv, bv, zeros_w, zeros_b, heads)
    per_head_out = wo.reshape(d_model, heads, d_head)
    if module.relative_values is None:
        extra_out = np.zeros((d_model, heads, slots))
    else:
        values = _array(module.relative_values).reshape(slots, heads, d_head)
        extra_out = np.einsum("ohd,rhd->ohr", per_head_out, values)  # W^O_h w^V_h
    out = np.concatenate([per_head_out, extra_out], axis=2).reshape(d_model, -1), bo
    _set_self_linears(spec, q, k, v, out)
    slot_table = np.concatenate([np.zeros((slots, d_head)), np.eye(slots)], axis=1).astype(np.float32)
    spec.relative_position_keys = slot_table
    if module.relative_values is None:
        del spec.relative_position_values
    else:
        spec.relative_position_values = slot_table
    spec.queries_scale = np.float32(d_head ** -0.5)  # not the widened head's
    return spec


def _t5(module, side):
    """T5's bucketed bias: the side's shared table in this layer (CTranslate2 computes it in the first)."""
    bias = module.position_bias
    _check_buckets(bias, side)
    spec = attention_spec.MultiHeadAttentionSpec(self_attention=True, relative_attention_bias=True)
    _set_self_linears(spec, *_projections(module))
    spec.relative_attention_bias = _array(bias.table.weight).astype(np.float32)  # buckets x heads
    spec.relative_attention_max_distance = np.int32(bias.max_distance)
    return spec


def _self_attention(module, side):
    """The CTranslate2 spec of one self-attention mixer, or ValueError naming why it has none."""
    if isinstance(module, shaw.ShawRelativeAttention) and module.logit_bias is None:
        return _shaw_shared(module) if module.embeddings == "shared" else _shaw_per_head(module)
    # CTranslate2's bias is bidirectional in the encoder and causal in the decoder, as the plugin's
    bias = getattr(module, "position_bias", None)
    if (type(module) is t5_bias.T5BiasAttention and module.transform is None and type(bias) is t5_bias.T5Bias
            and bias.bidirectional == (side == "encoder")):
        return _t5(module, side)
    raise ValueError(f"the {side}'s self-attention {type(module).__name__} has no CTranslate2 counterpart here "
                     f"(--{side}-self-mixer: {', '.join(RELATIVE_MIXERS)} in every layer)")


def _set_side(spec, module, side):
    """Fills the encoder's or decoder's spec: fairseq's sub-layers with CTranslate2's fairseq setters."""
    stock.set_embeddings(spec.embeddings[0] if side == "encoder" else spec.embeddings, module.embed_tokens)
    spec.scale_embeddings = module.embed_scale
    for layer_spec, layer in zip(spec.layer, module.layers):
        layer_spec.self_attention = _self_attention(layer.self_attn, side)
        stock.set_layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_layer_norm)
        stock.set_ffn(layer_spec.ffn, layer)
        if side == "decoder":
            stock.set_multi_head_attention(layer_spec.attention, layer.encoder_attn)
            stock.set_layer_norm(layer_spec.attention.layer_norm, layer.encoder_attn_layer_norm)
    if module.layer_norm is not None:
        stock.set_layer_norm(spec.layer_norm, module.layer_norm)
    if module.layernorm_embedding is not None:
        stock.set_layer_norm(spec.layernorm_embedding, module.layernorm_embedding)
    if side == "decoder":
        stock.set_linear(spec.projection, module.output_projection)


def _model_spec(args, model):
    """CTranslate2's Transformer spec for ``model`` (its self-attention specs are set per layer later), or
    ValueError with CTranslate2's list of reasons, as its fairseq converter words them."""
    activation = getattr(args, "activation_fn", "relu")
    check = utils.ConfigurationChecker()
    check(activation in stock._SUPPORTED_ACTIVATIONS, f"Option --activation-fn {activation} is not supported")
    check(args.encoder_normalize_before == args.decoder_normalize_before,
          "Options --encoder-normalize-before and --decoder-normalize-before must have the same value")
    check(args.encoder_attention_heads == args.decoder_attention_heads,
          "Options --encoder-attention-heads and --decoder-attention-heads must have the same value")
    check(model.decoder.project_in_dim is None and model.decoder.project_out_dim is None,
          "Options --decoder-input-dim and --decoder-output-dim must equal --decoder-embed-dim")
    check(model.encoder.embed_positions is None and model.decoder.embed_positions is None,
          "Option --no-token-positional-embeddings is needed: CTranslate2 adds no absolute positions to a "
          "model whose self-attention is relative")
    check.validate()
    common = dict(pre_norm=args.encoder_normalize_before, activation=stock._SUPPORTED_ACTIVATIONS[activation],
                  layernorm_embedding=getattr(args, "layernorm_embedding", False), relative_position=True)
    encoder = transformer_spec.TransformerEncoderSpec(args.encoder_layers, args.encoder_attention_heads, **common)
    decoder = transformer_spec.TransformerDecoderSpec(args.decoder_layers, args.decoder_attention_heads,
                                                      alignment_layer=getattr(args, "alignment_layer", -1),
                                                      alignment_heads=getattr(args, "alignment_heads", 0), **common)
    return transformer_spec.TransformerSpec(encoder, decoder)


def _load_model(checkpoint, data_bin, source_lang, target_lang):
    """(fairseq's model arguments, task, model in eval mode) of a plugin checkpoint, dictionaries from
    ``data_bin``."""
    from fairseq import checkpoint_utils, tasks
    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    cfg = state["cfg"]
    cfg.task.data, cfg.task.source_lang, cfg.task.target_lang = data_bin, source_lang, target_lang
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return cfg.model, task, model.eval()


class RelativeConverter(Converter):
    """A plugin checkpoint with relative self-attention (module docstring) into CTranslate2's Transformer."""

    def __init__(self, checkpoint, data_bin, source_lang="src", target_lang="tgt"):
        self.where = checkpoint, data_bin, source_lang, target_lang

    def _load(self):
        args, task, model = _load_model(*self.where)
        ignored = {flag: value for flag, value in flags.changed(args).items() if flag not in CARRIED_FLAGS}
        if ignored:
            raise ValueError("CTranslate2's Transformer has no counterpart of "
                             + ", ".join(f"{flag} {value}" for flag, value in ignored.items()))
        spec = _model_spec(args, model)
        with torch.no_grad():
            _set_side(spec.encoder, model.encoder, "encoder")
            _set_side(spec.decoder, model.decoder, "decoder")
        spec.register_source_vocabulary(stock._get_vocab(task.source_dictionary))
        spec.register_target_vocabulary(stock._get_vocab(task.target_dictionary))
        # fairseq's conventions, as CTranslate2's fairseq converter sets them
        spec.config.decoder_start_token = spec.config.eos_token
        spec.config.add_source_eos = True
        return spec


def convert(checkpoint, data_bin, output_dir, source_lang="src", target_lang="tgt"):
    """Converts ``checkpoint`` into a CTranslate2 model at ``output_dir`` (fp32 weights; int8 is chosen when
    loading); raises ValueError naming why a model is refused."""
    return RelativeConverter(checkpoint, data_bin, source_lang, target_lang).convert(output_dir, force=True)
