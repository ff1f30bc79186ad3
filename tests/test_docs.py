"""The docs stay true to the code: the flag tables in docs/ are the ones the
declarations generate, no hand-written table lists a declared flag again,
relative links and their anchors resolve, the mixer and preset tables are the
ones the mechanisms' declarations (families.py) generate and list every mixer,
every architecture or mixer the docs name is registered and every registered
architecture is documented, and the README stays short; tests/README.md maps
every test file."""
import fnmatch
import glob
import os
import re

import pytest
from fairseq.models import ARCH_MODEL_INV_REGISTRY, ARCH_MODEL_REGISTRY

from posnet_fairseq import families, flags
from posnet_fairseq.mixers.registry import MIXERS
from posnet_fairseq.models.architectures import SIZES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")
DOCS = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
PAGES = [README] + DOCS
README_MAX_LINES = 250
EXAMPLE_PAGE = os.path.join(REPO, "docs", "adding-a-mixer.md")  # adds the mixer window_mean
SIZE_SUFFIX = "_(?:" + "|".join(SIZES) + ")"


def read(path):
    with open(path) as f:
        return f.read()


def rel(path):
    return os.path.relpath(path, REPO)


def without_code_blocks(text):
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def without_generated_tables(text):
    for begin, end in ((flags.BEGIN, flags.END), (families.BEGIN, families.END)):
        text = re.sub(re.escape(begin) + r".*?" + re.escape(end), "", text, flags=re.S)
    return text


def github_anchors(text):
    """The anchors GitHub gives a page's headings: lowercase, punctuation dropped, spaces -> '-', '-N' for repeats."""
    anchors, seen = set(), {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", without_code_blocks(text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def table_columns(text, header_matches):
    """(page line, cell) for every body cell of a markdown table whose column header satisfies header_matches."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if not (line.startswith("|") and re.match(r"^\|(\s*:?-+:?\s*\|)+\s*$", lines[i + 1])):
            continue
        headers = [h.strip().lower() for h in line.strip().strip("|").split("|")]
        columns = [k for k, h in enumerate(headers) if header_matches(h)]
        j = i + 2
        while j < len(lines) and lines[j].startswith("|"):
            cells = lines[j].strip().strip("|").split("|")
            for k in columns:
                if k < len(cells):
                    yield j + 1, cells[k]
            j += 1


def test_readme_is_at_most_250_lines():
    lines = read(README).count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move reference text to docs/"


# The generated tables: what they list (a test id: no spaces), the module that declares it, and how it
# renders a page.
GENERATED = {
    "flag": (flags, lambda text, page, path: flags.with_table(text, page, path)),
    "mixer_and_preset": (families, lambda text, page, path: families.with_table(text, page, path, MIXERS)),
}


@pytest.mark.parametrize("kind,page", [(kind, page) for kind, (source, _) in GENERATED.items() for page in source.pages()])
def test_generated_tables_are_current(kind, page):
    path = os.path.join(REPO, "docs", f"{page}.md")
    what = kind.replace("_", " ")
    assert os.path.exists(path), f"{what} tables are declared for page {page!r} but docs/{page}.md does not exist"
    text = read(path)
    assert GENERATED[kind][1](text, page, path) == text, (
        f"docs/{page}.md: the {what} table is stale; run `python -m posnet_fairseq.cli.docs_tables --write-docs docs`")


@pytest.mark.parametrize("kind", GENERATED)
def test_generated_table_markers_only_on_declared_pages(kind):
    source = GENERATED[kind][0]
    for path in DOCS:
        page = os.path.splitext(os.path.basename(path))[0]
        if source.BEGIN in read(path):
            assert page in source.pages(), (
                f"{rel(path)} has {kind.replace('_', ' ')} table markers but nothing declares page {page!r}")


def test_every_mixer_and_preset_is_in_a_generated_table():
    """A mixer is listed on its mechanism's page, so its module must declare the mechanism."""
    declared = {m.module for m in families.MECHANISMS}
    undeclared = sorted(f"{e.name} ({e.module})" for e in MIXERS.values() if e.module not in declared)
    assert not undeclared, f"mixers whose module declares no mechanism (families.declare): {undeclared}"
    generated = "".join(families.markdown_table(page, MIXERS) for page in families.pages())
    missing = sorted(n for n in set(MIXERS) | set(ARCH_MODEL_INV_REGISTRY["posnet_transformer"])
                     if f"`{n}`" not in generated)
    assert not missing, f"mixers or presets in no generated docs table: {missing}"


def test_no_hand_written_table_lists_a_declared_flag():
    declared = {flag.name for group in flags.GROUPS for flag in group.flags}
    for path in PAGES:
        text = without_generated_tables(without_code_blocks(read(path)))
        for line in text.splitlines():
            if line.startswith("|"):
                first_cell = line.strip().strip("|").split("|")[0]
                listed = set(re.findall(r"--[a-z][a-z0-9-]*", first_cell)) & declared
                assert not listed, (f"{rel(path)}: a hand-written table lists {sorted(listed)}, which the generated "
                                    f"flag table already holds: `{line.strip()}`")


def test_relative_links_and_anchors_resolve():
    for path in PAGES:
        for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", without_code_blocks(read(path))):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            assert os.path.exists(linked), f"{rel(path)} links {target}: {rel(linked)} does not exist"
            if anchor and linked.endswith(".md"):
                assert anchor in github_anchors(read(linked)), f"{rel(path)} links {target}: no such heading"


def test_architecture_names_in_the_docs_are_registered():
    named = []
    for path in PAGES:
        if path == EXAMPLE_PAGE and "window_mean" not in MIXERS:
            # Its presets exist once the page is followed: test_adding_a_mixer.py runs this test then.
            continue
        text = read(path)
        spans = re.findall(r"`([^`\n]+)`", without_code_blocks(text))
        code = re.findall(r"^```.*?^```", text, flags=re.S | re.M)
        for chunk in spans + code:
            named += [(path, m) for m in re.findall(r"(?<![\w/.{-])([a-z][a-z0-9_]*" + SIZE_SUFFIX + r")(?![\w/.}-])",
                                                     chunk)]
        named += [(path, m) for m in re.findall(r"--arch[ =]([A-Za-z0-9_]+)", text)]
        # Architecture tables: the first word of each backticked entry in an architecture or size column.
        for _, cell in table_columns(text, lambda h: re.match(r"architectures?\b", h) or
                                     h in ("tiny", "small", "base", "big", "iwslt", "deep")):
            named += [(path, span.split()[0]) for span in re.findall(r"`([^`]+)`", cell)]
    assert named, "found no architecture names in README.md and docs/"
    unknown = sorted({f"{rel(path)}: {name}" for path, name in named if name not in ARCH_MODEL_REGISTRY})
    assert not unknown, f"architectures named in the docs but not registered: {unknown}"


def test_mixer_tables_name_registered_mixers():
    for path in PAGES:
        for line, cell in table_columns(read(path), lambda h: h == "mixer"):
            for name in re.findall(r"`([^`]+)`", cell):
                assert name in MIXERS, f"{rel(path)}:{line}: mixer `{name}` is not registered"


def test_every_registered_architecture_is_documented():
    documented = set()
    for path in DOCS:
        documented |= set(re.findall(r"`([^`\s]+)", read(path)))
    missing = sorted(set(ARCH_MODEL_INV_REGISTRY["posnet_transformer"]) - documented)
    assert not missing, f"registered architectures that no docs page names (in backticks): {missing}"


def test_tests_readme_maps_every_test_file_and_no_other():
    """tests/README.md names each test file (or a ``prefix_*.py`` pattern covering it) and only files that exist.

    A mechanism's own test, ``test_<mechanism>.py`` beside ``mixers/<mechanism>.py``, is mapped by the naming
    rule the README states, so a new mechanism needs no edit there."""
    text = read(os.path.join(REPO, "tests", "README.md"))
    assert "`test_<module>.py` for a mixer" in text, "tests/README.md no longer states the mixer test naming rule"
    named = set(re.findall(r"`(test_[\w*]+\.py)`", text))
    files = {os.path.basename(p) for p in glob.glob(os.path.join(REPO, "tests", "test_*.py"))}
    mixers = {f"test_{os.path.basename(p)}" for p in glob.glob(os.path.join(REPO, "posnet_fairseq", "mixers", "*.py"))}
    unmapped = {f for f in files - mixers if not any(fnmatch.fnmatch(f, name) for name in named)}
    stale = {name for name in named if not any(fnmatch.fnmatch(f, name) for f in files)}
    assert not unmapped, f"tests/README.md does not say what these test: {sorted(unmapped)}"
    assert not stale, f"tests/README.md names test files that do not exist: {sorted(stale)}"
