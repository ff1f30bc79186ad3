"""Every mechanism's named presets, declared once, in the mechanism's own module.

A mechanism module (``mixers/<mechanism>.py``) registers its mixers
(``register_mixer``), its flags (``flags.declare``) and, in one
:func:`declare` call at its end, its *families*: a family is a name prefix,
the settings its presets give (mixers and flag values), the sizes it comes in
and what each size reproduces (a paper table, or none). From these
declarations come

* the architecture names registered with fairseq (``models/architectures.py``
  turns each (family, size) into a row with its ``Size``),
* the benchmark's families (``benchmark.FAMILIES``, ``benchmark.ALIASES``),
* the docs' mixer and preset tables, one generated block per mechanism page
  (:func:`markdown_table`, written by ``python -m
  posnet_fairseq.cli.docs_tables --write-docs docs`` with the flag tables),
* the tests' name lists (``tests/test_architectures.py`` reads the registry,
  and pins the result against ``tests/architectures_resolved.json``).

Where a family lives: in the module of the mechanism it exists to show, the
mixer its settings add (``glinearnet`` in ``linearnet.py``,
``lightconv_apptek_gated`` in ``lightconv_apptek.py``, ``hc_gaussian_shx_nosa``
in ``hc_gaussian.py``, ``tisa_nope`` in ``tisa.py``). A family that adds no
mixer of its own lives with fairseq's own attention (``mha.py``: the
Transformer and NoPE); one that only removes sub-layers lives in ``none.py``
(``transformer_nosa``).

This module is a low layer (it imports only ``sites``), so mixers may declare
families without knowing the model.
"""
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, List, Mapping, NamedTuple, Optional

from .sites import SITES

TESTS = "no paper table: tests and the quick start"
NO_TABLE = "no paper table: the position schemes beside the papers' mechanisms"

# How a family enters the benchmark's default list (benchmark.FAMILIES), in
# this order: the baseline the ratios are against, the ceiling a mechanism
# cannot beat (the Transformer without self-attention), then one family per
# mechanism, in declaration order.
BENCHMARK_ROLES = ("baseline", "ceiling", "mechanism")


@dataclass(frozen=True)
class Family:
    """Presets ``<prefix>_<size>`` that share their settings.

    ``settings`` maps an attribute of fairseq's args to a value, or to a
    function of the resolved arguments (``flags.Resolved``) for a value that
    depends on another flag or on the size. ``sizes`` maps a size name (see
    ``models/architectures.py``) to what that preset reproduces, in the order
    the docs list them. AAN+ and You et al. name their base size by the bare
    prefix (``unsuffixed_base``); the Transformer answers to both, as
    fairseq's ``transformer`` does (``bare_alias``).
    """

    prefix: str
    what: str  # one line for the docs: what the presets build
    settings: Mapping[str, Any]
    sizes: Mapping[str, str]
    # Settings that differ at one size, e.g. {"big": {"posnet_max_relative": 8}} (PosNet section 5.2).
    at_size: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    unsuffixed_base: bool = False
    bare_alias: bool = False
    benchmark: Optional[str] = None  # one of BENCHMARK_ROLES, or None: not in the default benchmark list
    short: Optional[str] = None  # the benchmark's shorter name for the prefix (``transformer``)
    page: Optional[str] = None  # the docs page of its presets, where not its mechanism's page

    def __post_init__(self):
        if self.benchmark is not None and self.benchmark not in BENCHMARK_ROLES:
            raise ValueError(f"family {self.prefix}: benchmark {self.benchmark!r} is not one of {BENCHMARK_ROLES}")
        if (self.unsuffixed_base or self.bare_alias) and "base" not in self.sizes:
            raise ValueError(f"family {self.prefix}: a bare name needs the base size")
        if set(self.at_size) - set(self.sizes):
            raise ValueError(f"family {self.prefix}: at_size names sizes it does not come in: "
                             f"{sorted(set(self.at_size) - set(self.sizes))}")

    def settings_at(self, size: str) -> Mapping[str, Any]:
        return {**self.settings, **self.at_size.get(size, {})}

    def presets(self) -> Iterator["Preset"]:
        if self.bare_alias:
            yield Preset(self.prefix, "base", f"= {self.prefix}_base", self)
        for size, reproduces in self.sizes.items():
            bare = self.unsuffixed_base and size == "base"
            yield Preset(self.prefix if bare else f"{self.prefix}_{size}", size, reproduces, self)


class Preset(NamedTuple):
    name: str
    size: str
    reproduces: str
    family: Family


@dataclass(frozen=True)
class Mechanism:
    """One mechanism module's declaration: its docs page and its families."""

    module: str  # the module whose mixers this is (``__name__``)
    title: str
    page: str  # docs/<page>.md: its mixers and presets are listed there
    families: tuple = field(default=())


MECHANISMS: List[Mechanism] = []


def declare(module: str, title: str, page: str, *families: Family) -> Mechanism:
    """Registers a mechanism module's families; ``module`` is the caller's ``__name__``."""
    if any(m.module == module for m in MECHANISMS):
        raise ValueError(f"{module} declares its mechanism twice")
    known = {p.name for p in presets()}
    for family in families:
        for preset in family.presets():
            if preset.name in known:
                raise ValueError(f"{module}: preset {preset.name} is declared twice")
            known.add(preset.name)
    mechanism = Mechanism(module, title, page, tuple(families))
    MECHANISMS.append(mechanism)
    return mechanism


def presets() -> Iterator[Preset]:
    for mechanism in MECHANISMS:
        for family in mechanism.families:
            yield from family.presets()


def benchmark_families() -> List[Family]:
    chosen = [f for m in MECHANISMS for f in m.families if f.benchmark is not None]
    return sorted(chosen, key=lambda f: BENCHMARK_ROLES.index(f.benchmark))


# ----- the docs' mixer and preset tables -----

BEGIN = "<!-- presets:begin (generated by python -m posnet_fairseq.cli.docs_tables --write-docs docs) -->"
END = "<!-- presets:end -->"


def markdown_table(page: str, mixers) -> str:
    """The mixers and presets declared for ``docs/<page>.md``, one part per mechanism.

    ``mixers`` is the mixer registry (``mixers.registry.MIXERS``), passed in
    because this layer sits below it."""
    parts = []
    for mechanism in MECHANISMS:
        own = [e for e in mixers.values() if e.module == mechanism.module] if mechanism.page == page else []
        listed = [f for f in mechanism.families if (f.page or mechanism.page) == page]
        if not own and not listed:
            continue
        lines = [f"**{mechanism.title}**", ""]
        if own:
            lines += ["| mixer | sites | what |", "|---|---|---|"]
            lines += [f"| `{e.name}` | {', '.join(s for s in SITES if s in e.sites)} | {e.doc.replace('|', '/')} |" for e in own]
            lines.append("")
        for family in listed:
            lines += [f"`{family.prefix}`: {family.what}.", "", "| architecture | size | reproduces |",
                      "|---|---|---|"]
            lines += [f"| `{p.name}` | {p.size} | {p.reproduces} |" for p in family.presets()]
            lines.append("")
        parts.append("\n".join(lines).rstrip("\n"))
    return "\n\n".join(parts)


def pages() -> List[str]:
    return sorted({m.page for m in MECHANISMS} | {f.page for m in MECHANISMS for f in m.families if f.page})


def with_table(text: str, page: str, path: str, mixers) -> str:
    """``text`` (a docs page) with its generated mixer and preset tables replaced by the current ones."""
    pattern = re.compile(re.escape(BEGIN) + r"\n(?:.*?\n)?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path}: no preset table markers ({BEGIN} ... {END})")
    return pattern.sub(lambda _: f"{BEGIN}\n{markdown_table(page, mixers)}\n{END}", text)
