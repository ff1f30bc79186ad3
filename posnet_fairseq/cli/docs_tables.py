"""Writes the docs' generated tables: every flag table (``flags.py``) and every mechanism's mixer and preset
tables (``families.py``), into ``docs/<page>.md`` between their markers.

A command above the package's layers, since the mixer tables read the mixer registry (``mixers/``), which
sits above the declarations it renders (the layering: ``tests/test_package_layers.py``).
"""
import argparse
import os
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description="Write the generated flag tables, and the mixer and preset tables "
                                                 "of the mechanisms (families.py), into docs/<page>.md.")
    parser.add_argument("--write-docs", metavar="DIR", required=True, help="the docs directory")
    args = parser.parse_args(argv)
    from .. import families, flags
    from ..mixers.registry import MIXERS

    tables = [(page, flags.with_table) for page in flags.pages()]
    tables += [(page, lambda text, page, path: families.with_table(text, page, path, MIXERS))
               for page in families.pages()]
    for page, write in tables:
        path = os.path.join(args.write_docs, f"{page}.md")
        with open(path) as f:
            text = f.read()
        new = write(text, page, path)
        if new != text:
            with open(path, "w") as f:
                f.write(new)
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
