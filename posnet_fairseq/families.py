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
  and pins the result against ``tests/architectures_resolved.json``),
* where each family deploys (``ctranslate2``: it converts to CTranslate2, or
  why not), which ``tests/test_ctranslate2_decoding.py`` checks by converting
  every family and ``docs/benchmarks.md`` lists (:func:`ctranslate2_table`),
* the README's architectures column (:func:`with_readme_architectures`) and
  the title of a page that lists its schemes (:data:`LISTING_TITLES`).

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

# Where a family deploys: CTranslate2's fairseq converter (benchmark/ctranslate2_decoding.py) takes its model
# (CONVERTS), or does not (a NotConverted). Flipping a family is one line of its declaration.
CONVERTS = "converts"


@dataclass(frozen=True)
class NotConverted:
    """Why CTranslate2's fairseq converter does not take a family's model: ``refusal`` is how the one-line
    refusal of ``ctranslate2_decoding.conversion_error`` starts, ``why`` says it in the docs' words."""

    refusal: str
    why: str


NO_POSITION_EMBEDDINGS = NotConverted(
    "Option --no-token-positional-embeddings is not supported",  # the converter's own check
    "the converter refuses a model without position embeddings (\"Option --no-token-positional-embeddings is "
    "not supported\")")
OWN_PARAMETERS = NotConverted(
    "fairseq's Transformer cannot load it: ",  # the stock model's strict loading
    "fairseq's Transformer cannot load the weights: attention parameters it needs are missing, or the "
    "mechanism's own have no place in it")


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
    # Its name in the title of a page of LISTING_TITLES, where it is declared apart from the page's mechanisms.
    title: Optional[str] = None
    ctranslate2: Any = field(kw_only=True)  # CONVERTS or a NotConverted

    def __post_init__(self):
        if self.ctranslate2 != CONVERTS and not isinstance(self.ctranslate2, NotConverted):
            raise ValueError(f"family {self.prefix}: ctranslate2 {self.ctranslate2!r} is neither CONVERTS nor a "
                             "NotConverted")
        if self.benchmark is not None and self.benchmark not in BENCHMARK_ROLES:
            raise ValueError(f"family {self.prefix}: benchmark {self.benchmark!r} is not one of {BENCHMARK_ROLES}")
        if (self.unsuffixed_base or self.bare_alias) and "base" not in self.sizes:
            raise ValueError(f"family {self.prefix}: a bare name needs the base size")
        if set(self.at_size) - set(self.sizes):
            raise ValueError(f"family {self.prefix}: at_size names sizes it does not come in: "
                             f"{sorted(set(self.at_size) - set(self.sizes))}")

    def settings_at(self, size: str) -> Mapping[str, Any]:
        return {**self.settings, **self.at_size.get(size, {})}

    def name(self, size: str) -> str:
        """The preset's name at ``size`` (the bare prefix for an unsuffixed base)."""
        return self.prefix if self.unsuffixed_base and size == "base" else f"{self.prefix}_{size}"

    def presets(self) -> Iterator["Preset"]:
        if self.bare_alias:
            yield Preset(self.prefix, "base", f"= {self.prefix}_base", self)
        for size, reproduces in self.sizes.items():
            yield Preset(self.name(size), size, reproduces, self)


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


def all_families() -> List[Family]:
    return [f for m in MECHANISMS for f in m.families]


def benchmark_families() -> List[Family]:
    chosen = [f for f in all_families() if f.benchmark is not None]
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


def between_markers(text: str, path: str, begin: str, end: str, body: str) -> str:
    """``text`` with what lies between its ``begin`` and ``end`` marker lines replaced by ``body``."""
    pattern = re.compile(re.escape(begin) + r"\n(?:.*?\n)?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path}: no generated table markers ({begin} ... {end})")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)


def with_table(text: str, page: str, path: str, mixers) -> str:
    """``text`` (a docs page) with its generated mixer and preset tables replaced by the current ones."""
    return between_markers(text, path, BEGIN, END, markdown_table(page, mixers))


# ----- where each family deploys, the README's architectures and the titles that list schemes -----

CTRANSLATE2_PAGE = "benchmarks"
CTRANSLATE2_BEGIN = ("<!-- ctranslate2:begin (generated by python -m posnet_fairseq.cli.docs_tables "
                     "--write-docs docs) -->")
CTRANSLATE2_END = "<!-- ctranslate2:end -->"
# {page: the start of its title}: the title goes on with the names of the schemes declared for the page.
LISTING_TITLES = {"position-schemes": "Position schemes on content attention"}


def ctranslate2_table() -> str:
    """docs/benchmarks.md's table of which families CTranslate2 converts: one row per outcome."""
    outcomes = [CONVERTS] + list(dict.fromkeys(f.ctranslate2 for f in all_families() if f.ctranslate2 != CONVERTS))
    lines = ["| family | converts? | why not |", "|---|---|---|"]
    for outcome in outcomes:
        names = ", ".join(f"`{f.prefix}`" for f in all_families() if f.ctranslate2 == outcome)
        lines.append(f"| {names} | yes | - |" if outcome == CONVERTS else f"| {names} | no | {outcome.why} |")
    return "\n".join(lines)


def with_ctranslate2_table(text: str, path: str) -> str:
    return between_markers(text, path, CTRANSLATE2_BEGIN, CTRANSLATE2_END, ctranslate2_table())


def with_title(text: str, page: str) -> str:
    """``text`` (docs/<page>.md, a page of LISTING_TITLES) with its title naming the schemes declared for it:
    its mechanisms' titles, then the ``title`` of each family declared there by another mechanism."""
    names = [m.title for m in MECHANISMS if m.page == page]
    for mechanism in MECHANISMS:
        for family in mechanism.families:
            if family.page == page and mechanism.page != page:
                if family.title is None:
                    raise ValueError(f"family {family.prefix}: its page {page} lists schemes in its title, "
                                     "so it needs a title")
                names.append(family.title)
    _, rest = text.split("\n", 1)
    return f"# {LISTING_TITLES[page]}: {', '.join(names)}\n{rest}"


def with_readme_architectures(text: str, mixers) -> str:
    """The README with the architectures cell of each table row that links a mechanism page listing the base
    presets declared for that page. Where several rows link one page, a family goes to the row that names
    (in backticks) a mixer of its mechanism; ``mixers`` is the mixer registry, passed in as for
    :func:`markdown_table`."""
    lines = text.split("\n")
    rows = {}  # page: [(line index, cells)]
    for i, line in enumerate(lines):
        cells = line.split(" | ")
        row = line.startswith("| ") and len(cells) == 4
        page = re.search(r"\]\(docs/([\w-]+)\.md\)", cells[-1]) if row else None
        if page and page.group(1) in pages():
            rows.setdefault(page.group(1), []).append((i, cells))
    for page, found in rows.items():
        names = {i: [] for i, _ in found}
        for mechanism in MECHANISMS:
            own = {f"`{e.name}`" for e in mixers.values() if e.module == mechanism.module}
            for family in (f for f in mechanism.families if (f.page or mechanism.page) == page):
                places = [i for i, cells in found if len(found) == 1 or any(m in cells[1] for m in own)]
                if len(places) != 1:
                    raise ValueError(f"README.md: family {family.prefix} of docs/{page}.md fits {len(places)} rows "
                                     "of the table (a row per page, or the one naming its mechanism's mixer)")
                names[places[0]].append(f"`{family.name('base')}`")
        for i, cells in found:
            lines[i] = " | ".join(cells[:2] + [", ".join(names[i])] + cells[3:])
    return "\n".join(lines)
