"""Writes what the docs generate from the declarations: every flag table (``flags.py``), every mechanism's
mixer and preset tables and, from the family declarations (``families.py``), CTranslate2's table in
docs/benchmarks.md, the title of each page that lists its schemes and the README's architectures column
(the README beside the docs directory).

A command above the package's layers, since the mixer tables read the mixer registry (``mixers/``), which
sits above the declarations it renders (the layering: ``tests/test_package_layers.py``).
"""
import argparse
import os
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description="Write the generated flag tables, the mixer and preset tables of "
                                                 "the mechanisms (families.py), CTranslate2's table, the titles "
                                                 "listing schemes into docs/<page>.md, and the README's "
                                                 "architectures column into DIR/../README.md.")
    parser.add_argument("--write-docs", metavar="DIR", required=True, help="the docs directory")
    args = parser.parse_args(argv)
    from .. import families, flags
    from ..mixers.registry import MIXERS

    tables = [(page, flags.with_table) for page in flags.pages()]
    tables += [(page, lambda text, page, path: families.with_table(text, page, path, MIXERS))
               for page in families.pages()]
    tables.append((families.CTRANSLATE2_PAGE, lambda text, page, path: families.with_ctranslate2_table(text, path)))
    tables += [(page, lambda text, page, path: families.with_title(text, page)) for page in families.LISTING_TITLES]
    tables.append(("../README", lambda text, page, path: families.with_readme_architectures(text, MIXERS)))
    for page, write in tables:
        path = os.path.normpath(os.path.join(args.write_docs, f"{page}.md"))
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
