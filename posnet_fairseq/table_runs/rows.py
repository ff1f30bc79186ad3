"""A table's rows for its recipe: the shell statements ``recipes/lib/common.sh`` evaluates.

    python posnet_fairseq/table_runs/rows.py TABLE

Prints ``BASELINES`` (the rows the others are tested against), the table's additions to the --micro
flags, and per run (a row on a dataset) its settings (``GEN``, ``EVAL``, ``AVG``, ``TOKENS``) and
``row NAME DATASET FLAGS...``, every word quoted for the shell.

Run as a file, as the recipes do: importing the ``posnet_fairseq`` package loads fairseq, which a dry run
does not need; this folder is then imported as a package of its own, so that the declarations' relative
imports resolve (they import nothing from the rest of the package).
"""
import argparse
import importlib
import importlib.util
import os
import shlex
import sys


def _tables():
    if __package__:
        from .papers import TABLES
        return TABLES
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("table_runs", os.path.join(here, "__init__.py"),
                                                  submodule_search_locations=[here])
    package = importlib.util.module_from_spec(spec)
    sys.modules["table_runs"] = package
    spec.loader.exec_module(package)
    return importlib.import_module("table_runs.papers").TABLES


def _words(words):
    return " ".join(shlex.quote(w) for w in words)


def shell(table):
    """The statements that declare ``table``'s rows to ``recipes/lib/common.sh``."""
    lines = [f"BASELINES={shlex.quote(' '.join(table.baselines))}"]
    if table.micro_flags:
        lines.append(f"MICRO_FLAGS+=({_words(table.micro_flags)})")
    for r in table.runs:
        s = r.settings
        lines.append(f"GEN=({_words(s.gen)}); EVAL=({_words(s.eval)}); AVG={shlex.quote(s.avg)}; TOKENS={s.tokens}")
        lines.append(f"row {_words((r.row, r.dataset) + r.flags)}")
    return "\n".join(lines)


def main(argv=None):
    tables = _tables()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=sorted(tables))
    print(shell(tables[parser.parse_args(argv).table]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
