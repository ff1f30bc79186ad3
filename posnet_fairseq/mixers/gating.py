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
  decoding (so the cache holds the gated values v');
* ``out_proj``: an ``nn.Linear`` applied to the concatenated heads (T x B x D,
  head h in columns h*D_h..(h+1)*D_h-1, one row per query);
* ``num_heads`` / ``head_dim`` / ``_get_input_buffer``, as every mixer has.

:func:`gate_module` takes both Linear layers out of the mixer when it builds
the wrapper: the mixer's ``out_proj`` becomes the identity, so the mixer
returns the concatenated heads, and :class:`GatedMixer` applies
``W_o(heads * g)`` itself. The values: where the value input is the query
(self-attention) and the mixer projects its ``value`` argument (every
``base.Mixer``), W_v and W_g are one Linear layer, ``value_gate_proj``
(issue 22: one matrix product instead of two per step), whose output the
wrapper splits into the pre-activation values, passed to the mixer as its
``value`` (its ``v_proj`` becomes :class:`ValueActivation`, LN(act(.)); LN(.)
alone where the values' activation is the gate's, which the wrapper then
applies to both halves in one operator), and the gate. Elsewhere
(cross-attention, where the values are the encoder's; fairseq's
MultiheadAttention, which projects ``query``/``key`` for its values) the mixer's ``v_proj`` becomes :class:`GatedValue`, LN(act(W_v .)),
and the wrapper holds W_g as ``gate_proj``. Checkpoints written before the
fusion (W_o inside the mixer as ``out_proj.proj``, W_v and W_g apart) load
unchanged: :meth:`GatedMixer._load_from_state_dict` builds the new layout
from them.

The gate has no decoding state (it uses the current query only), so the
wrapper has no ``reorder_incremental_state``: fairseq reorders the inner
mixer directly. fairseq's MultiheadAttention has a fused fast path that reads
the projection weights instead of calling the modules; gating switches it to
its explicit path (``_set_skip_embed_dim_check``), which calls ``v_proj`` and
``out_proj``.

The flags (``FLAGS`` below; docs/posnet.md lists them) give the Table 6
ablations: gating per site and per layer (layers whose mixer is ``none`` are
left alone), the value and gate activations (``glu`` makes W_v D -> 2D; a gate
activation ``none`` drops W_g, keeping only the value branch) and the two
LayerNorms. ``--gating-norm apptek`` gives both the authors' LayerNorm
(unbiased variance, eps 1e-8: ``norms.AppTekLayerNorm``) instead of
nn.LayerNorm (docs/conventions.md).
"""
import functools
import math

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import nn

from .. import flags
from ..sites import SITE_LIST, dest, per_layer, spec_items
from .base import Mixer
from .functional_calls import linear, normalize
from .norms import LAYER_NORMS, layer_norm
from .registry import MIXERS, register_site_wrapper
from .none import NoMixer

VALUE_ACTS = ("none", "gelu", "glu", "sigmoid")
GATE_ACTS = ("none", "gelu", "sigmoid")


def on_off_spec(spec):
    """The switches of a per-layer gating spec (its flag type): on or off, one for all layers or one each."""
    switches = tuple(spec_items(spec))
    bad = next((s for s in switches if s not in ("on", "off")), None)
    if bad is not None:
        raise ValueError(f"{bad!r} is not one of on, off")
    return switches


FLAGS = flags.declare(
    "PosNet GeLU gating (Eq. 4)", "posnet",
    *(flags.Flag(site.gating_flag, "off", f"PosNet GeLU gating (Eq. 4) of the {site.name.replace('_', ' ')} "
                 "mixers: on, off, or one per layer comma-separated (the rposnet/aposnet presets: on where they "
                 "place PosNet)", type=on_off_spec, metavar="SPEC") for site in SITE_LIST),
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
    """Whether the layer of ``ctx`` is gated at its site, from the site's on/off spec (parsed once)."""
    flag = ctx.site.gating_flag
    switches = getattr(ctx.options(FLAGS), dest(flag))
    return per_layer(flag, switches, ctx.num_layers)[ctx.layer_idx] == "on"


# Functions, not modules: they hold no parameters, and a module would cost a call and a place in fairseq's walk
# over the decoder's modules at every decoding step (issue 48). None: the identity.
ACTIVATIONS = {"none": None, "gelu": F.gelu, "sigmoid": torch.sigmoid, "glu": functools.partial(F.glu, dim=-1)}
# Their in-place forms (the same kernels), for an output that nothing else reads, without gradients: one tensor
# fewer allocated per layer and step (issue 48). torch's functional GeLU has no in-place flag; its operator has:
# the registered operator ``aten.gelu_`` is public, and torch's private binding of it a few microseconds faster.
IN_PLACE = {F.gelu: getattr(torch._C._nn, "gelu_", torch.ops.aten.gelu_), torch.sigmoid: torch.sigmoid_}


class ValueActivation(nn.Module):
    """v' = LN(act(u)) of projected values u (a mixer's ``v_proj`` when the wrapper projects them); ``act``
    (:data:`ACTIVATIONS`) None: the identity, or the wrapper applied it."""

    def __init__(self, act, norm):
        super().__init__()
        self.act, self.norm = act, norm

    def forward(self, u):
        return normalize(self.norm, u if self.act is None else self.act(u))


class GatedValue(ValueActivation):
    """v' = LN(act(W_v x)) over the full D (a mixer's ``v_proj`` when the wrapper cannot project its values)."""

    def __init__(self, proj, act, norm):
        super().__init__(act, norm)
        self.proj = proj

    def forward(self, x):
        return super().forward(linear(self.proj, x))


class GatedMixer(nn.Module):
    """``W_o(mixer heads * g)``, g = act(W_g query) (Eq. 4), around a mixer whose ``out_proj`` is the identity.

    With ``value_gate_proj`` (W_v and W_g stacked) the values and the gate come from one product with
    the query, the values passed on as the mixer's ``value``; with ``gate_proj`` the mixer projects
    its own values (its ``v_proj`` is a :class:`GatedValue`). ``act_both``: the values' activation is
    the gate's, applied here to the stacked product at once (one operator instead of two, issue 48),
    and the mixer's ``v_proj`` only normalises.
    """

    def __init__(self, mixer, out_proj, gate_act, gate_norm, gate_proj=None, value_gate_proj=None, act_both=False):
        super().__init__()
        self.mixer, self.out_proj = mixer, out_proj
        self.gate_proj, self.value_gate_proj = gate_proj, value_gate_proj
        self.gate_act, self.gate_norm, self.act_both = gate_act, gate_norm, act_both  # gate_norm None: none
        # The columns of the values and of the gate in value_gate_proj's output (read per step: sizes, not modules).
        dim = out_proj.in_features
        self.value_gate_split = None if value_gate_proj is None else [value_gate_proj.out_features - dim, dim]
        # What fairseq's decoder layer reads from its attention modules.
        self.num_heads, self.head_dim, self.embed_dim = mixer.num_heads, mixer.head_dim, mixer.embed_dim

    def forward(self, query, key, value, *args, **kwargs):
        if self.value_gate_split is not None:  # self-attention: value is query
            both = linear(self.value_gate_proj, query)
            if self.act_both:  # (the product is this call's own: applied in place where no gradient needs it)
                act = self.gate_act if torch.is_grad_enabled() else IN_PLACE.get(self.gate_act, self.gate_act)
                both = act(both)
            value, gate = both.split_with_sizes(self.value_gate_split, -1)
        else:
            gate = linear(self.gate_proj, query)
        heads, weights = self.mixer(query, key, value, *args, **kwargs)
        gate = gate if self.act_both else self.gate_act(gate)
        return linear(self.out_proj, heads * (gate if self.gate_norm is None else normalize(self.gate_norm, gate))), \
            weights

    def _get_input_buffer(self, incremental_state):
        return self.mixer._get_input_buffer(incremental_state)

    def _set_input_buffer(self, incremental_state, buffer):
        return self.mixer._set_input_buffer(incremental_state, buffer)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints from before the fusion: W_o inside the mixer, W_v and W_g apart.
        for name in ("weight", "bias"):
            old_out = f"{prefix}mixer.out_proj.proj.{name}"
            if old_out in state_dict:
                state_dict[f"{prefix}out_proj.{name}"] = state_dict.pop(old_out)
            old_value, old_gate = f"{prefix}mixer.v_proj.proj.{name}", f"{prefix}gate_proj.{name}"
            if self.value_gate_proj is not None and old_value in state_dict and old_gate in state_dict:
                state_dict[f"{prefix}value_gate_proj.{name}"] = torch.cat(
                    [state_dict.pop(old_value), state_dict.pop(old_gate)], dim=0)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def gate_module(module, args, flag="gating", fuse=False):
    """Gates ``module`` (a mixer with ``v_proj``/``out_proj`` Linear layers) with the gating flags in ``args``.

    ``fuse``: the module's value input is its query and it projects its ``value`` argument, so W_v and
    W_g become one Linear layer (see the module docstring).
    """
    if not (isinstance(getattr(module, "v_proj", None), nn.Linear)
            and isinstance(getattr(module, "out_proj", None), nn.Linear)):
        raise ValueError(f"{flag} on: {type(module).__name__} has no v_proj/out_proj Linear layers to gate "
                         "(see posnet_fairseq/mixers/gating.py for the interface)")
    opts = FLAGS.options(args)
    dim = module.out_proj.in_features
    value_proj = module.v_proj
    if opts.gating_value_act == "glu":  # GLU halves its input: W_v maps to 2D
        value_proj = nn.Linear(value_proj.in_features, 2 * dim)
        nn.init.xavier_uniform_(value_proj.weight, gain=1 / math.sqrt(2))
    value_act = ACTIVATIONS[opts.gating_value_act]
    value_norm = nn.Identity() if opts.gating_no_value_norm else layer_norm(opts.gating_norm, dim)
    if isinstance(module, MultiheadAttention):
        # Its fused path reads v_proj/out_proj weights instead of calling them.
        module._set_skip_embed_dim_check()
    if opts.gating_gate_act == "none":  # no gate: only the value branch
        module.v_proj = GatedValue(value_proj, value_act, value_norm)
        return module
    gate_proj = nn.Linear(dim, dim)
    nn.init.xavier_uniform_(gate_proj.weight)
    nn.init.constant_(gate_proj.bias, 0.0)
    gate_norm = layer_norm(opts.gating_norm, dim) if opts.gating_gate_norm else None
    out_proj, module.out_proj = module.out_proj, nn.Identity()
    if not fuse or value_proj.bias is None:  # (a bias-free W_v beside W_g's bias: kept apart)
        module.v_proj = GatedValue(value_proj, value_act, value_norm)
        return GatedMixer(module, out_proj, ACTIVATIONS[opts.gating_gate_act], gate_norm, gate_proj=gate_proj)
    # One activation function for both: applied by the wrapper to the stacked product (no parameters move).
    act_both = opts.gating_value_act == opts.gating_gate_act
    module.v_proj = ValueActivation(None if act_both else value_act, value_norm)
    fused = nn.Linear(value_proj.in_features, value_proj.out_features + dim)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([value_proj.weight, gate_proj.weight]))
        fused.bias.copy_(torch.cat([value_proj.bias, gate_proj.bias]))
    return GatedMixer(module, out_proj, ACTIVATIONS[opts.gating_gate_act], gate_norm, value_gate_proj=fused,
                      act_both=act_both)


@register_site_wrapper
def gate_site(module, ctx):
    """Site wrapper: gates the mixer of ``ctx.site``/``ctx.layer_idx`` when its gating flag says on."""
    if isinstance(module, NoMixer) or not layer_gating(ctx):
        return module
    # A plugin mixer projects its value argument; at a self-attention site that is the query.
    fuse = isinstance(module, Mixer) and not ctx.site.cross
    return gate_module(module, ctx.args, ctx.site.gating_flag, fuse=fuse)


def gated_where_mixer_of(module):
    """Preset settings (families.py): unless ``--{site}-gating`` is given, a layer is gated exactly when
    its mixer is one that ``module`` registers (PosNet's presets: the gating follows the mixers, so a
    changed mixer flag changes its gating with it)."""

    def follows(site):
        def gating(args):
            gated = {entry.name for entry in MIXERS.values() if entry.module == module}
            switches = ["on" if name in gated else "off" for name in spec_items(getattr(args, dest(site.mixer_flag)))]
            # One value for a uniform site, so that the spec fits any layer count.
            return switches[0] if len(set(switches)) == 1 else ",".join(switches)

        return gating

    return {dest(site.gating_flag): follows(site) for site in SITE_LIST}
