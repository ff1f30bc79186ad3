"""The three attention sites of the Transformer and the one parser of per-layer specs.

Every flag that is given per site (the mixer, the PosNet gating, the
hard-coded Gaussian offsets) and every fact about a site (which side's layers
it has, which position table it sees) is derived from the :class:`Site`
record here, so a site is described once.

A *per-layer spec* is one value for all layers or a comma-separated list with
exactly one value per layer, e.g. ``--decoder-self-mixer mha,mha,rposnet``.
:func:`per_layer` parses every such spec, so every error about one reads the
same.
"""
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence


def _named(template: str) -> property:
    """A name that a :class:`Site` derives from its fields: ``template`` filled in with them."""
    return property(lambda site: template.format(**vars(site)), doc=f"``{template}`` of the site's fields")


@dataclass(frozen=True)
class Site:
    """One attention site: ``name`` is the key mixers register for."""

    name: str  # encoder_self | decoder_self | cross
    stem: str  # the site's part of flag names: --{stem}-mixer, --{stem}-gating
    short: str  # the hard-coded Gaussian flags' part: --hc-{short}-offsets
    side: str  # encoder | decoder: whose layers (and position table) the site has
    causal: bool  # a query sees only the keys up to its own position (decoder self-attention)
    cross: bool  # queries are target positions, keys the encoder's source positions

    mixer_flag = _named("--{stem}-mixer")
    gating_flag = _named("--{stem}-gating")
    hc_offsets_flag = _named("--hc-{short}-offsets")
    layers_attr = _named("{side}_layers")
    learned_pos_flag = _named("--{side}-learned-pos")

    @property
    def max_positions_flag(self) -> str:
        return "--max-source-positions" if self.side == "encoder" else "--max-target-positions"


SITE_LIST = (
    Site("encoder_self", "encoder-self", "encoder", "encoder", causal=False, cross=False),
    Site("decoder_self", "decoder-self", "decoder", "decoder", causal=True, cross=False),
    Site("cross", "cross", "cross", "decoder", causal=False, cross=True),
)
SITE: Dict[str, Site] = {site.name: site for site in SITE_LIST}
SITES = tuple(SITE)


def dest(flag: str) -> str:
    """The argparse attribute of ``flag`` (``--cross-mixer`` -> ``cross_mixer``)."""
    return flag[2:].replace("-", "_")


def spec_items(spec, sep: str = ",") -> List[str]:
    """The stripped items of a comma-separated spec, or of a spec already split (a list or tuple)."""
    items = spec if isinstance(spec, (list, tuple)) else str(spec).split(sep)
    return [str(item).strip() for item in items]


def per_layer(flag: str, spec, num_layers: int, parse: Optional[Callable[[str], object]] = None,
              choices: Optional[Sequence[str]] = None, sep: str = ",") -> list:
    """One value per layer from ``spec``: a single value for every layer, or exactly ``num_layers`` values.

    Each item is checked against ``choices`` and/or converted by ``parse``
    (which raises ValueError with the reason); any error names the flag and
    the spec.
    """
    items = spec_items(spec, sep)
    spec = sep.join(items) if isinstance(spec, (list, tuple)) else spec  # as the user wrote it, in errors
    if len(items) == 1:
        items = items * num_layers
    if len(items) != num_layers:
        raise ValueError(
            f"{flag} {spec}: gives {len(items)} per-layer values but the model has {num_layers} layers "
            f"(give one value for all layers or exactly one per layer, separated by '{sep}')"
        )
    values = []
    for item in items:
        if choices is not None and item not in choices:
            raise ValueError(f"{flag} {spec}: {item!r} is not one of {', '.join(choices)}")
        if parse is not None:
            try:
                item = parse(item)
            except ValueError as err:
                raise ValueError(f"{flag} {spec}: {err}") from None
        values.append(item)
    return values


def layer_indices(flag: str, spec, num_layers: int) -> List[int]:
    """0-based layer indices from a comma-separated list (negative counts from the end)."""
    chosen = set()
    for item in spec_items(spec):
        try:
            index = int(item)
        except ValueError:
            raise ValueError(f"{flag} {spec}: {item!r} is not a layer index") from None
        if not -num_layers <= index < num_layers:
            raise ValueError(f"{flag} {spec}: layer {index} does not exist in a decoder of "
                             f"{num_layers} layers (0..{num_layers - 1}, or negative from the end)")
        chosen.add(index % num_layers)
    return sorted(chosen)
