"""What an architecture preset sets: its model flags resolved, shown in ``--help`` and compared.

fairseq's parser prints ``--help`` before it adds the model's arguments, so
``fairseq-train --arch rposnet_transformer_base --help`` lists none of the
plugin's flags. The wrappers (``posnet-train`` & co.,
:mod:`posnet_fairseq.cli.fairseq_wrappers`) call :func:`add_model_help` to
add them, each with the value the architecture gives it, and
``posnet-train --arch X --show-preset [Y]`` prints :func:`difference`.

A value is what fairseq would hand the model: the command line's model flags
first, then the architecture function (presets and fairseq's size presets),
then the declared defaults (:mod:`posnet_fairseq.flags`). With
``posnet-generate`` and the other tools that load a checkpoint, the values
are the checkpoint's own (``--path``), which ``--model-overrides`` changes.
"""
import argparse
from typing import Dict, List, Optional, Sequence, Tuple

# The model of every preset, and its defaults: the row "posnet_transformer" (fairseq's transformer base
# plus every plugin flag at its declared default).
MODEL = "posnet_transformer"
UNSET = "(unset)"


def _model_parser(arch: str) -> argparse.ArgumentParser:
    from fairseq.models import ARCH_MODEL_REGISTRY

    from . import models  # noqa: F401  (registers the architectures)

    if arch not in ARCH_MODEL_REGISTRY:
        raise ValueError(f"--arch {arch}: not a registered architecture{suggest(arch, ARCH_MODEL_REGISTRY)}")
    parser = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS, allow_abbrev=False)
    ARCH_MODEL_REGISTRY[arch].add_args(parser)
    return parser


def suggest(name: str, known, n: int = 3) -> str:
    """'; did you mean a, b?' with the closest of ``known`` (difflib), or ''."""
    import difflib

    close = difflib.get_close_matches(name, sorted(known), n=n, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


def resolve(arch: str, argv: Sequence[str] = ()) -> Dict[str, object]:
    """{attribute: value} of the model flags of ``arch`` with the model flags found in ``argv``."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    args, _ = _model_parser(arch).parse_known_args(list(argv))
    ARCH_CONFIG_REGISTRY[arch](args)
    return vars(args)


def checkpoint_values(path: str) -> Tuple[str, Dict[str, object]]:
    """(architecture, {attribute: value}) stored in a checkpoint (the first of a colon-separated list)."""
    from fairseq import checkpoint_utils

    from .compat import allow_fairseq_checkpoint_classes

    allow_fairseq_checkpoint_classes()
    state = checkpoint_utils.load_checkpoint_to_cpu(path.split(":")[0])
    model = state["cfg"]["model"] if state.get("cfg") is not None else state["args"]
    values = dict(model) if isinstance(model, dict) else vars(model) if hasattr(model, "__dict__") else dict(model)
    return str(values.get("arch") or values.get("_name")), values


def show(value) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    return UNSET if value is None else str(value)


def option_names(arch: str) -> Dict[str, str]:
    """{attribute: its longest option string} of the model's flags."""
    return {a.dest: max(a.option_strings, key=len) for a in _model_parser(arch)._actions if a.option_strings}


def add_model_help(parser: argparse.ArgumentParser, arch: str, values: Optional[Dict[str, object]], source: str,
                   note: Optional[str] = None):
    """Adds the model flags of ``arch`` to ``parser`` (for its ``--help``), each help ending with
    ``[SOURCE: value]`` where ``values`` gives one (``values`` None: the flags alone); ``note`` heads them."""
    group = parser.add_argument_group(
        f"Model flags of {arch}" + (f" (values in [brackets]: {source})" if values is not None else ""),
        description=note, argument_default=argparse.SUPPRESS)
    existing = {s for a in parser._actions for s in a.option_strings}
    for action in _model_parser(arch)._actions:
        if not action.option_strings or set(action.option_strings) & existing:
            continue
        kwargs = {"dest": action.dest, "help": action.help or ""}
        if action.nargs == 0:
            kwargs["action"] = "store_true"
        else:
            kwargs.update(metavar=action.metavar, choices=action.choices, nargs=action.nargs)
        if values is not None and action.dest in values:
            kwargs["help"] += f" [{source}: {show(values[action.dest])}]".replace("%", "%%")
        group.add_argument(*action.option_strings, **kwargs)


def difference(arch: str, other: str = MODEL, argv: Sequence[str] = ()) -> List[Tuple[str, str, str]]:
    """[(flag, value under ``arch``, value under ``other``)] for every model flag on which they differ;
    the model flags in ``argv`` apply to both."""
    mine, theirs = resolve(arch, argv), resolve(other, argv)
    names = {**option_names(other), **option_names(arch)}
    rows = []
    for key in sorted(set(mine) | set(theirs), key=lambda k: names.get(k, "--" + k).lstrip("-")):
        if key in ("arch", "_name"):
            continue
        a, b = mine.get(key), theirs.get(key)
        if a != b:
            rows.append((names.get(key, key), show(a), show(b)))
    return rows


def difference_text(arch: str, other: str = MODEL, argv: Sequence[str] = ()) -> str:
    rows = difference(arch, other, argv)
    flags = set(option_names(arch).values())
    head = f"{arch} vs {other}" + (" (both with the model flags given)" if any(
        a.split("=")[0] in flags for a in argv) else "")
    if other == MODEL:
        head += f"; {MODEL}: fairseq's transformer base with every plugin flag at its default"
    if not rows:
        return head + "\nno model flag differs"
    table = [("flag", arch, other)] + rows
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    lines = [head, ""] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    lines.insert(3, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
