"""Every model flag of the plugin, each declared once: name, default, help, type and checks in one :class:`Flag`.

A mechanism declares its flags with :func:`declare` next to its code; from
those declarations come the argparse arguments (:func:`add_args`), the
defaults (:func:`set_defaults`), the typed, validated options a mixer reads
(:meth:`FlagGroup.options`: one frozen record per group, defaults filled,
every value converted and checked, an error naming the flag, the value and
what is allowed) and the flag tables of the docs (:func:`markdown_table`,
written into ``docs/<page>.md`` by ``python -m posnet_fairseq.cli.docs_tables
--write-docs docs``, which writes the mechanisms' mixer and preset tables
(``families.py``) as well; a test fails when a table is stale).

fairseq parses model flags with ``argument_default=SUPPRESS`` and applies the
architecture function afterwards (also when a checkpoint is loaded), so the
arguments carry no argparse default: :func:`set_defaults` fills in whatever
neither the command line nor a preset set. That is also why presets use
``getattr(args, name, value)``.
"""
import argparse
import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

from .sites import dest


@dataclass(frozen=True)
class Flag:
    """One command-line flag. A flag whose default is False is a switch (``store_true``).

    ``type`` converts a value (int, float, str; None: str, or bool for a
    switch), ``choices`` lists the allowed values, ``check(value)`` returns
    the reason a converted value is refused (e.g. "must be an integer >= 0")
    or None. ``aliases`` are older names of the flag, still accepted on the
    command line and in stored checkpoint arguments. ``internal`` flags are
    written by the plugin's tools into checkpoints, not given by users: they
    are parsed, but left out of ``--help`` and the docs.
    """

    name: str
    default: Any
    help: str
    type: Optional[Callable[[Any], Any]] = None
    metavar: Optional[str] = None
    choices: Optional[Sequence[str]] = None
    # How the default reads in the help and the docs when the value alone
    # does not say it (e.g. None meaning "the site's --max-source-positions").
    default_doc: Optional[str] = None
    check: Optional[Callable[[Any], Optional[str]]] = None
    aliases: Sequence[str] = ()
    internal: bool = False

    @property
    def dest(self) -> str:
        return dest(self.name)

    @property
    def is_switch(self) -> bool:
        return self.default is False

    def read(self, args) -> Any:
        """This flag's value in ``args`` (or under an alias), converted and checked; the default when absent."""
        for name in (self.name, *self.aliases):
            if hasattr(args, dest(name)):
                return self.convert(getattr(args, dest(name)))
        return self.default

    def convert(self, value) -> Any:
        """``value`` as this flag's type, or ValueError naming the flag, the value and what is allowed."""
        if value is None and self.default is None:  # "not set": the mechanism derives it
            return None
        kind = bool if self.is_switch else (self.type or str)
        try:
            converted = _CONVERTERS.get(kind, kind)(value)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{self.name} {value}: {err}") from None
        if self.choices is not None and converted not in self.choices:
            raise ValueError(f"{self.name} {value}: choose from {', '.join(map(str, self.choices))}")
        reason = self.check(converted) if self.check is not None else None
        if reason:
            raise ValueError(f"{self.name} {value}: {reason}")
        return converted

    @property
    def default_text(self) -> str:
        if self.default_doc is not None:
            return self.default_doc
        if self.is_switch:
            return "off"
        return str(self.default)


def _integer(value) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError("must be an integer")
    try:
        return int(value)
    except ValueError:
        raise ValueError("must be an integer") from None


def _number(value) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError("must be a number") from None


def _switch(value) -> bool:
    if value not in (True, False, 0, 1):
        raise ValueError("a switch is on or off")
    return bool(value)


_CONVERTERS = {int: _integer, float: _number, bool: _switch, str: str}


# Checks shared by many flags (``Flag(..., check=...)``).
def non_negative_integer(value) -> Optional[str]:
    return None if value >= 0 else "must be an integer >= 0"


def positive_integer(value) -> Optional[str]:
    return None if value >= 1 else "must be a positive integer"


def positive_number(value) -> Optional[str]:
    return None if math.isfinite(value) and value > 0 else "must be a positive number"


def probability(value) -> Optional[str]:
    return None if 0.0 <= value < 1.0 else "a dropout probability in [0, 1)"


@dataclass(frozen=True)
class FlagGroup:
    title: str  # the mechanism, as argparse's --help and the docs show it
    page: str  # the docs page that lists these flags: docs/<page>.md
    flags: Sequence[Flag]
    # The frozen record :meth:`options` returns: one typed field per flag dest.
    record: type = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        name = "".join(part.capitalize() for part in re.split(r"\W+", self.title) if part) + "Options"
        fields = [(f.dest, Any) for f in self.flags]
        object.__setattr__(self, "record", dataclasses.make_dataclass(name, fields, frozen=True))

    def __getitem__(self, name: str) -> Flag:
        return next(f for f in self.flags if f.name == name)

    def options(self, args):
        """The group's flags in ``args`` as a frozen record (``opts.posnet_max_relative``): every value
        converted by its type and checked against its choices and check, the default where ``args``
        lacks it. A bad value raises ValueError naming the flag, the value and what is allowed."""
        return self.record(**{f.dest: f.read(args) for f in self.flags})


GROUPS: List[FlagGroup] = []


def declare(title: str, page: str, *flags: Flag) -> FlagGroup:
    """Registers a mechanism's flags; returns them as a group (``group["--flag"].default``)."""
    known = {f.name for g in GROUPS for f in g.flags}
    for flag in flags:
        if flag.name in known:
            raise ValueError(f"flag {flag.name} is declared twice")
        known.add(flag.name)
    group = FlagGroup(title, page, tuple(flags))
    GROUPS.append(group)
    return group


def add_args(parser):
    """Adds every declared flag to fairseq's model argument parser (no argparse defaults)."""
    # fairseq hands models an argument group already, and argparse groups do not nest.
    for group in GROUPS:
        for flag in group.flags:
            kwargs = {"dest": flag.dest, "help": argparse.SUPPRESS if flag.internal else
                      f"{flag.help} (default: {flag.default_text})"}
            if flag.is_switch:
                kwargs["action"] = "store_true"
            else:
                # argparse converts scalars (and reports their errors as usage
                # errors); the rest is checked by options() at model build.
                kwargs.update(type=flag.type if flag.type in (int, float) else str, metavar=flag.metavar,
                              choices=flag.choices)
            parser.add_argument(flag.name, *flag.aliases, **kwargs)


def set_defaults(args):
    """Gives every declared flag that ``args`` lacks its default, or the value stored under an alias."""
    for group in GROUPS:
        for flag in group.flags:
            if not hasattr(args, flag.dest):
                setattr(args, flag.dest, flag.read(args))


def changed(args) -> dict:
    """{flag name: value} of the declared flags that ``args`` (a Namespace or a dict, as a checkpoint stores
    them) sets to other than their default."""
    args = args if isinstance(args, argparse.Namespace) else argparse.Namespace(**args)
    return {f.name: getattr(args, f.dest) for group in GROUPS for f in group.flags
            if hasattr(args, f.dest) and f.read(args) != f.convert(f.default)}


class Resolved:
    """A read-only view of ``args`` (a Namespace, or the DictConfig fairseq hands an architecture when it
    loads a checkpoint) as they will be once every declared flag has its value: a declared flag is read,
    converted and checked on first use (its default where ``args`` lacks it), any other attribute comes
    from ``args``."""

    def __init__(self, args):
        self._args = args
        self._flags = {f.dest: f for group in GROUPS for f in group.flags}
        self._values = {}

    def __getattr__(self, name):
        if name not in self._flags:
            return getattr(self._args, name)
        if name not in self._values:
            self._values[name] = self._flags[name].read(self._args)
        return self._values[name]


# ----- the docs' flag tables -----

BEGIN = "<!-- flags:begin (generated by python -m posnet_fairseq.cli.docs_tables --write-docs docs) -->"
END = "<!-- flags:end -->"


def markdown_table(page: str) -> str:
    """The flag tables of ``docs/<page>.md``: one table per group declared for that page."""
    tables = []
    for group in (g for g in GROUPS if g.page == page):
        rows = [f"**{group.title}**", "", "| flag | default | what it does |", "|---|---|---|"]
        for flag in (f for f in group.flags if not f.internal):
            value = "" if flag.is_switch else f" {flag.metavar or flag.dest.upper()}"
            if flag.choices:
                value = " {" + ",".join(flag.choices) + "}"
            rows.append(f"| `{flag.name}{value}` | {flag.default_text} | {flag.help.replace('|', '/')} |")
        tables.append("\n".join(rows))
    return "\n\n".join(tables)


def pages() -> List[str]:
    return sorted({g.page for g in GROUPS})


def with_table(text: str, page: str, path: str) -> str:
    """``text`` (a docs page) with its generated flag table replaced by the current one."""
    pattern = re.compile(re.escape(BEGIN) + r"\n(?:.*?\n)?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path}: no flag table markers ({BEGIN} ... {END})")
    return pattern.sub(lambda _: f"{BEGIN}\n{markdown_table(page)}\n{END}", text)
