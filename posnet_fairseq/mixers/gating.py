"""The GeLU gating of the PosNet paper (Schmidt & Di Gangi, Eq. 4), a site wrapper for any mixer.

::

    v'  = LN(GELU(W_v x))                 over the full D, before the head split
    g   = GELU(W_g y)                     y = the query-side input of the sub-layer
    out = W_o( concat_h( (softmax(e_h) v'_h) * g_h ) )

It is applied by :func:`gate_site` (registered with
``register_site_wrapper``) to the mixer the model builds at every site and
layer whose gating flag is on, whatever the mixer: rposnet/aposnet/arposnet,
shaw/relattn and fairseq's MultiheadAttention (``mha``).

The interface a mixer offers to be gated (no gating code in the mixer):

* ``v_proj``: an ``nn.Linear`` that the mixer applies to its value input
  (T x B x C) before splitting heads, caching its output for incremental
  decoding; the wrapper replaces it by :class:`GatedValue` (so the cache holds
  the gated values v');
* ``out_proj``: an ``nn.Linear`` applied to the concatenated heads (T x B x D,
  head h in columns h*D_h..(h+1)*D_h-1, one row per query); the wrapper
  replaces it by :class:`GatedOutput`, which multiplies its input by the gate
  first;
* ``num_heads`` / ``head_dim`` / ``_get_input_buffer``, as every mixer has.

:class:`GatedMixer` computes the gate from ``query`` and hands it to the
``GatedOutput`` for the duration of one forward call. The gate has no
decoding state (it uses the current query only), so the wrapper has no
``reorder_incremental_state``: fairseq reorders the inner mixer directly.
fairseq's MultiheadAttention has a fused fast path that reads the projection
weights instead of calling the modules; gating switches it to its explicit
path (``_set_skip_embed_dim_check``), which calls ``v_proj`` and ``out_proj``.

The flags (``FLAGS`` below; docs/posnet.md lists them) give the Table 6
ablations: gating per site and per layer (layers whose mixer is ``none`` are
left alone), the value and gate activations (``glu`` makes W_v D -> 2D; a gate
activation ``none`` drops W_g, keeping only the value branch) and the two
LayerNorms. ``--gating-norm apptek`` gives both the authors' LayerNorm
(unbiased variance, eps 1e-8: ``base.AppTekLayerNorm``) instead of
nn.LayerNorm (docs/conventions.md).
"""
import math

from fairseq.modules import MultiheadAttention
from torch import nn

from .. import flags
from ..sites import SITE_LIST, dest, per_layer
from .norms import LAYER_NORMS, layer_norm
from .registry import register_site_wrapper
from .none import NoMixer

VALUE_ACTS = ("none", "gelu", "glu", "sigmoid")
GATE_ACTS = ("none", "gelu", "sigmoid")


FLAGS = flags.declare(
    "PosNet GeLU gating (Eq. 4)", "posnet",
    *(flags.Flag(site.gating_flag, "off", f"PosNet GeLU gating (Eq. 4) of the {site.name.replace('_', ' ')} "
                 "mixers: on, off, or one per layer comma-separated (the rposnet/aposnet presets: on where they "
                 "place PosNet)", metavar="SPEC") for site in SITE_LIST),
    flags.Flag("--gating-value-act", "gelu", "gating: activation of the gated values W_v x", choices=VALUE_ACTS),
    flags.Flag("--gating-gate-act", "gelu", "gating: activation of the gate W_g y; none = no gate",
               choices=GATE_ACTS),
    flags.Flag("--gating-no-value-norm", False, "gating: no LayerNorm on the gated values"),
    flags.Flag("--gating-gate-norm", False, "gating: LayerNorm on the gate"),
    flags.Flag("--gating-norm", "torch", "gating: the LayerNorm of the gated values (and of the gate): torch = "
               "nn.LayerNorm (biased variance, eps 1e-5); apptek = the authors' code (unbiased variance, eps 1e-8)",
               choices=LAYER_NORMS),
)


def layer_gating(ctx):
    """Whether the layer of ``ctx`` is gated at its site, from the site's on/off spec."""
    flag = ctx.site.gating_flag
    spec = getattr(ctx.options(FLAGS), dest(flag))
    return per_layer(flag, spec, ctx.num_layers, choices=("on", "off"))[ctx.layer_idx] == "on"


ACTIVATIONS = {"none": nn.Identity, "gelu": nn.GELU, "sigmoid": nn.Sigmoid, "glu": lambda: nn.GLU(dim=-1)}


class GatedValue(nn.Module):
    """v' = LN(act(W_v x)) over the full D (replaces a mixer's ``v_proj``)."""

    def __init__(self, proj, act, norm):
        super().__init__()
        self.proj, self.act, self.norm = proj, act, norm

    def forward(self, x):
        return self.norm(self.act(self.proj(x)))


class GatedOutput(nn.Module):
    """W_o(o * g) (replaces a mixer's ``out_proj``); ``gate`` is set by :class:`GatedMixer`."""

    def __init__(self, proj):
        super().__init__()
        self.proj = proj
        self.gate = None

    def forward(self, x):
        if self.gate is None:
            raise RuntimeError("GatedOutput called outside GatedMixer.forward: the gate is unknown")
        return self.proj(x * self.gate)


class GatedMixer(nn.Module):
    """A mixer whose per-head outputs are multiplied by g = act(W_g query) before W_o (Eq. 4)."""

    def __init__(self, mixer, gate_proj, gate_act, gate_norm):
        super().__init__()
        self.mixer = mixer
        self.gate_proj, self.gate_act, self.gate_norm = gate_proj, gate_act, gate_norm
        # What fairseq's decoder layer reads from its attention modules.
        self.num_heads, self.head_dim, self.embed_dim = mixer.num_heads, mixer.head_dim, mixer.embed_dim

    def forward(self, query, key, value, *args, **kwargs):
        output = self.mixer.out_proj
        output.gate = self.gate_norm(self.gate_act(self.gate_proj(query)))
        try:
            return self.mixer(query, key, value, *args, **kwargs)
        finally:
            output.gate = None

    def _get_input_buffer(self, incremental_state):
        return self.mixer._get_input_buffer(incremental_state)

    def _set_input_buffer(self, incremental_state, buffer):
        return self.mixer._set_input_buffer(incremental_state, buffer)


def gate_module(module, args, flag="gating"):
    """Gates ``module`` (a mixer with ``v_proj``/``out_proj`` Linear layers) with the gating flags in ``args``."""
    if not (isinstance(getattr(module, "v_proj", None), nn.Linear)
            and isinstance(getattr(module, "out_proj", None), nn.Linear)):
        raise ValueError(f"{flag} on: {type(module).__name__} has no v_proj/out_proj Linear layers to gate "
                         "(see posnet_fairseq/mixers/gating.py for the interface)")
    opts = FLAGS.options(args)
    value_act, gate_act, norm_kind = opts.gating_value_act, opts.gating_gate_act, opts.gating_norm
    dim = module.out_proj.in_features
    proj = module.v_proj
    if value_act == "glu":  # GLU halves its input: W_v maps to 2D
        proj = nn.Linear(proj.in_features, 2 * dim)
        nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
    norm = nn.Identity() if opts.gating_no_value_norm else layer_norm(norm_kind, dim)
    module.v_proj = GatedValue(proj, ACTIVATIONS[value_act](), norm)
    if isinstance(module, MultiheadAttention):
        # Its fused path reads v_proj/out_proj weights instead of calling them.
        module._set_skip_embed_dim_check()
    if gate_act == "none":
        return module
    module.out_proj = GatedOutput(module.out_proj)
    gate_proj = nn.Linear(dim, dim)
    nn.init.xavier_uniform_(gate_proj.weight)
    nn.init.constant_(gate_proj.bias, 0.0)
    gate_norm = layer_norm(norm_kind, dim) if opts.gating_gate_norm else nn.Identity()
    return GatedMixer(module, gate_proj, ACTIVATIONS[gate_act](), gate_norm)


@register_site_wrapper
def gate_site(module, ctx):
    """Site wrapper: gates the mixer of ``ctx.site``/``ctx.layer_idx`` when its gating flag says on."""
    if isinstance(module, NoMixer) or not layer_gating(ctx):
        return module
    return gate_module(module, ctx.args, ctx.site.gating_flag)
