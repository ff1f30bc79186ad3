"""The mixer registry and the context a mixer is built from.

A mixer is registered under a name with the sites it can serve, by decorating
either a class with a ``build(ctx)`` classmethod or a plain function
``build(ctx) -> nn.Module`` (a mixer that returns a module of another kind,
e.g. fairseq's own MultiheadAttention, is a function). The model builds the
module of every site and layer from a :class:`MixerContext` and applies the
site wrappers (the PosNet gating) to it.
"""
import inspect
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from torch import nn

from ..sites import SITES, Site
from .forward_context import ForwardContext


@dataclass
class MixerContext:
    """Everything a mixer may know about where it sits.

    ``site`` is the :class:`~posnet_fairseq.sites.Site` record (``.name``,
    ``.side``, ``.causal``). ``args`` is the model configuration (fairseq's
    TransformerConfig, or a Namespace); a mixer reads its flags through
    :meth:`options`, never from ``args`` directly. ``shared`` holds modules
    shared by all layers of one encoder/decoder (e.g. the position-query
    LayerNorm of rPosNet), registered once on that encoder/decoder.
    ``build_fairseq_attention`` builds exactly the MultiheadAttention fairseq
    would build at this site (given by the layer that creates the context).
    ``length_ratio`` is gamma, mean source / mean target length (> 0), for
    the cross-attention mixers that map target to source positions; None
    where the model has none (it computes it for every mixer registered with
    ``uses_length_ratio``). ``forward_context`` is the side's :class:`~.forward_context.ForwardContext`:
    what the encoder/decoder tells its mixers during a call (augmented training positions, source lengths).
    """

    site: Site
    embed_dim: int
    num_heads: int
    kdim: int
    layer_idx: int
    num_layers: int
    args: object
    padding_idx: int
    embed_positions: Optional[nn.Module] = None
    shared: Optional[nn.ModuleDict] = None
    build_fairseq_attention: Optional[Callable[[], nn.Module]] = None
    length_ratio: Optional[float] = None
    forward_context: Optional[ForwardContext] = None
    # Options records already read, by flag group; the model hands one dict to
    # all contexts it builds, so each group is read once per model.
    options_read: Dict[int, object] = field(default_factory=dict, repr=False, compare=False)

    @property
    def dropout(self) -> float:
        """The attention dropout (fairseq's --attention-dropout)."""
        return getattr(self.args, "attention_dropout", 0.0)

    @property
    def model_dropout(self) -> float:
        """The model dropout (fairseq's --dropout)."""
        return getattr(self.args, "dropout", 0.0)

    @property
    def causal(self) -> bool:
        return self.site.causal

    def options(self, group):
        """``group.options(self.args)``: the typed, checked, defaulted options of a flag group."""
        key = id(group)
        if key not in self.options_read:
            self.options_read[key] = group.options(self.args)
        return self.options_read[key]

    def shared_module(self, key: str, factory: Callable[[], nn.Module]) -> nn.Module:
        """One module per encoder/decoder, created by the first layer asking for it."""
        if key not in self.shared:
            self.shared[key] = factory()
        return self.shared[key]


@dataclass
class MixerEntry:
    name: str
    build: Callable[[MixerContext], Optional[nn.Module]]
    sites: frozenset  # site names
    # Named option sets the contract tests run in addition to the defaults,
    # e.g. {"far": {"aan_patterns": "far"}}: a new pattern is covered by adding
    # it here, next to the mixer.
    variants: Dict[str, dict] = field(default_factory=dict)
    uses_length_ratio: bool = False
    doc: str = ""
    # The module that registers it: its mechanism (families.Mechanism.module), whose docs page lists it.
    module: str = ""


MIXERS: Dict[str, MixerEntry] = {}

# Site-level wrappers applied to every mixer the model builds, in registration
# order: ``wrapper(module, ctx) -> module`` returns the module unchanged when
# its flags are off for ``ctx.site`` (e.g. the PosNet GeLU gating).
SITE_WRAPPERS: List[Callable[[nn.Module, MixerContext], nn.Module]] = []


def register_mixer(name, sites, variants=None, uses_length_ratio=False):
    """Decorator: registers a class (its ``build(ctx)`` classmethod) or a function ``build(ctx)``.

    ``sites`` are site names (``sites.SITES`` for all three).
    """
    bad = set(sites) - set(SITES)
    if bad:
        raise ValueError(f"mixer {name!r}: unknown sites {sorted(bad)}; sites are {SITES}")

    def decorate(obj):
        if name in MIXERS:
            raise ValueError(f"mixer {name!r} is registered twice")
        build = obj.build if inspect.isclass(obj) else obj
        doc = (obj.__doc__ or "").strip().splitlines()
        MIXERS[name] = MixerEntry(name, build, frozenset(sites), dict(variants or {}), uses_length_ratio,
                                  doc[0] if doc else "", obj.__module__)
        return obj

    return decorate


def register_site_wrapper(wrapper):
    SITE_WRAPPERS.append(wrapper)
    return wrapper


def build_site_mixer(name: str, ctx: MixerContext) -> nn.Module:
    """Builds mixer ``name`` for ``ctx.site`` and applies the site wrappers."""
    module = MIXERS[name].build(ctx)
    for wrapper in SITE_WRAPPERS:
        module = wrapper(module, ctx)
    return module


def mixers_for_site(site_name: str):
    return sorted(n for n, e in MIXERS.items() if site_name in e.sites)


def lookup_mixer(name: str, site: Site) -> MixerEntry:
    flag = site.mixer_flag
    if name not in MIXERS:
        raise ValueError(f"{flag} {name}: unknown mixer; choose from {', '.join(mixers_for_site(site.name))}")
    entry = MIXERS[name]
    if site.name not in entry.sites:
        raise ValueError(
            f"{flag} {name}: mixer {name!r} cannot serve the {site.name} site (it serves "
            f"{', '.join(sorted(entry.sites))}); choose from {', '.join(mixers_for_site(site.name))}"
        )
    return entry
