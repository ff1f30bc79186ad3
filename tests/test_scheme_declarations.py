"""A scheme is declared once (families.py, the ``families.declare`` call of its mixer module): what the docs list
of it is generated from that declaration and current (docs/benchmarks.md's CTranslate2 table, the title of a
page that lists its schemes, the README's architectures column), and which paper tables its presets reproduce
agrees with the tables the recipes train (table_runs/<paper>.py)."""
import os
import re

import pytest

from posnet_fairseq import families
from posnet_fairseq.mixers.registry import MIXERS
from posnet_fairseq.table_runs.papers import TABLES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRITE = "python -m posnet_fairseq.cli.docs_tables --write-docs docs"
# How a preset's "reproduces" text names a paper, and that paper's tables in table_runs (<paper>-table<N>).
PAPERS = {"PosNet": "posnet", "AAN+": "aan", "You et al.": "gaussian"}


def read(*path):
    with open(os.path.join(REPO, *path), encoding="utf-8") as f:
        return f.read()


def named_tables(text):
    """The paper tables a "reproduces" text names: "<paper> Table(s) N[, N][ and N]", where a later bare
    "Table(s) N" belongs to the paper named last. Text in parentheses, and "Table N's" (a table's size, not
    its row), name none."""
    text = re.sub(r"\([^()]*\)", "", text)
    found, paper = set(), None
    for match in re.finditer(r"(?:(PosNet|AAN\+|You et al\.) )?Tables? ((?:\d+(?!'s)\s*(?:,|and)?\s*)+)", text):
        paper = PAPERS[match.group(1)] if match.group(1) else paper
        if paper is not None:
            found |= {f"{paper}-table{n}" for n in re.findall(r"\d+", match.group(2))}
    return found


def test_the_reader_of_reproduces_texts():
    assert named_tables("the Transformer rows of PosNet Tables 2, 4, 6; AAN+ Tables 2, 4, 5, 6, 7") == {
        "posnet-table2", "posnet-table4", "posnet-table6", "aan-table2", "aan-table4", "aan-table5", "aan-table6",
        "aan-table7"}
    assert named_tables("You et al. Table 2 (large datasets) and Table 3 (SH-X)") == {"gaussian-table2",
                                                                                     "gaussian-table3"}
    assert named_tables("AAN+ Tables 2 and 7 (NER; Table 6 trains its row as aan_plus_avg); Table 5 with --x") == {
        "aan-table2", "aan-table7", "aan-table5"}
    assert named_tables("the 2018 AAN at AAN+ Table 4's deep size") == set()
    assert named_tables(families.TESTS) == set()


def test_what_each_preset_reproduces_is_what_the_recipes_train():
    """Every (preset, paper table) a declaration names is a row the table's recipe trains with ``--arch`` that
    preset, and every such row is named by its preset's declaration."""
    declared = {(p.name, table) for p in families.presets() if not p.reproduces.startswith("= ")
                for table in named_tables(p.reproduces)}
    trained = {(run.flags[run.flags.index("--arch") + 1], name) for name, table in TABLES.items()
               if "-table" in name for run in table.runs if "--arch" in run.flags}
    assert sorted(declared - trained) == [], "named in a family declaration, but no recipe row trains it"
    assert sorted(trained - declared) == [], "trained by a recipe row, but its family declaration does not say so"


@pytest.mark.parametrize("what", ["ctranslate2", "titles", "readme"])
def test_the_lists_generated_from_the_declarations_are_current(what):
    if what == "ctranslate2":
        text = read("docs", f"{families.CTRANSLATE2_PAGE}.md")
        current = families.with_ctranslate2_table(text, f"docs/{families.CTRANSLATE2_PAGE}.md")
    elif what == "titles":
        text = "".join(read("docs", f"{page}.md") for page in families.LISTING_TITLES)
        current = "".join(families.with_title(read("docs", f"{page}.md"), page) for page in families.LISTING_TITLES)
    else:
        text = read("README.md")
        current = families.with_readme_architectures(text, MIXERS)
    assert current == text, f"stale: run `{WRITE}`"


def test_every_family_is_in_the_readme_and_the_ctranslate2_table():
    readme, table = read("README.md"), families.ctranslate2_table()
    for family in families.all_families():
        assert f"`{family.name('base')}`" in readme, family.prefix
        assert f"`{family.prefix}`" in table, family.prefix


def test_a_family_must_say_where_it_deploys():
    """``ctranslate2=`` has no default, and takes CONVERTS or a NotConverted only."""
    args = ("x_transformer", "an example", {}, {"tiny": families.TESTS})
    with pytest.raises(TypeError, match="ctranslate2"):
        families.Family(*args)
    with pytest.raises(ValueError, match="family x_transformer: ctranslate2 'yes' is neither CONVERTS nor a"):
        families.Family(*args, ctranslate2="yes")
    assert families.Family(*args, ctranslate2=families.OWN_PARAMETERS).ctranslate2.why
