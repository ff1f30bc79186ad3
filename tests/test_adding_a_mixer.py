"""docs/adding-a-mixer.md, followed in a copy of the repository: its files are written, its commands run,
exactly the files its table lists change, and there every test driven by the lists of names (families,
mixers, architectures, flags, modules) and the new mixer's own test pass. The page's example is a logit-bias
scheme without position embeddings, the common case. A missing or wrong step (a file, a declaration, a
regeneration) fails one of them; the package under test is never touched."""
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "adding-a-mixer.md")
COPIED = ("README.md", "docs", "posnet_fairseq", "recipes", "tests")
STEP = "# in the repository root"


def page():
    with open(DOC) as f:
        return f.read()


def blocks(language):
    return re.findall(rf"^```{language}\n(.*?)^```", page(), flags=re.S | re.M)


# The tests that read the lists of names, run on the copy (those of one item per name: its items only).
NAME_LIST_TESTS = ("tests/test_docs.py", "tests/test_scheme_declarations.py", "tests/test_architectures.py",
                   "tests/test_families.py", "tests/test_flags.py", "tests/test_package_layers.py",
                   "tests/test_module_size.py", "tests/test_train_speed.py::test_every_family_is_a_registered_preset")
PER_NAME_TESTS = ("tests/test_mixer_contract.py", "tests/test_growing_cache.py", "tests/test_ctranslate2_decoding.py",
                  "tests/test_architectures_e2e.py")
NEW = "window_bias"


def listed_files():
    """{file: its step} of the page's table under "## The files"."""
    section = page().split("## The files", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([^`]+)` \| (.*) \|$", section, flags=re.M))


def tree_digest(root):
    digests = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                digests[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return digests


def add_table_row(copy, block):
    """A ``<!-- PATH: a row at the end of the table under "HEADING" -->`` block: its rows go there."""
    header, *rows = block.strip("\n").split("\n")
    match = re.fullmatch(r'<!-- (\S+): a row at the end of the table under "(.+)" -->', header)
    assert match, f"docs/adding-a-mixer.md: a markdown block starts with {header!r}, not a row's place"
    path, heading = os.path.join(copy, match.group(1)), match.group(2)
    with open(path) as f:
        lines = f.read().split("\n")
    start = lines.index(heading)
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    end = next(i for i in range(first, len(lines)) if not lines[i].startswith("|"))
    lines[end:end] = rows
    with open(path, "w") as f:
        f.write("\n".join(lines))


def run(copy, command):
    env = dict(os.environ, PYTHONPATH=copy, OMP_NUM_THREADS="1")
    return subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def followed(tmp_path_factory):
    """The copy of the repository after every step of the page, and the files that changed."""
    copy = str(tmp_path_factory.mktemp("repository"))
    for name in COPIED:
        source, target = os.path.join(REPO, name), os.path.join(copy, name)
        if os.path.isdir(source):
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    before = tree_digest(copy)
    for block in blocks("python"):
        path = block.split("\n", 1)[0].removeprefix("# ")
        assert not os.path.exists(os.path.join(copy, path)), f"the page's {path} exists already"
        with open(os.path.join(copy, path), "w") as f:
            f.write(block)
    for block in blocks("markdown"):
        add_table_row(copy, block)
    for block in (b for b in blocks("bash") if b.startswith(STEP + "\n")):
        for line in block.splitlines()[1:]:
            command = shlex.split(line)
            assert command[0] == "python", f"docs/adding-a-mixer.md: a step runs {line!r}, not python"
            done = run(copy, [sys.executable, *command[1:]])
            assert done.returncode == 0, f"{line}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    after = tree_digest(copy)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    return copy, changed


def test_the_page_lists_exactly_the_files_its_steps_change(followed):
    _, changed = followed
    assert changed == sorted(listed_files())
    assert len([f for f, step in listed_files().items() if not step.startswith("generated")]) == 4


def test_the_snapshot_gains_the_new_presets_and_keeps_every_other(followed):
    import json

    copy, _ = followed
    with open(os.path.join(REPO, "tests", "architectures_resolved.json")) as f:
        old = json.load(f)
    with open(os.path.join(copy, "tests", "architectures_resolved.json")) as f:
        new = json.load(f)
    added = sorted(set(new["architectures"]) - set(old["architectures"]))
    assert added == [f"{NEW}_transformer_{size}" for size in ("base", "big", "small", "tiny")]
    tiny = new["architectures"][f"{NEW}_transformer_tiny"]
    assert tiny["encoder_self_mixer"] == NEW and tiny["no_token_positional_embeddings"] is True
    assert {k: new["architectures"][k] for k in old["architectures"]} == old["architectures"]
    assert {k: v for k, v in new.items() if k != "architectures"} == {k: v for k, v in old.items()
                                                                       if k != "architectures"}


def test_every_name_list_test_and_its_own_pass_on_the_result(followed):
    copy, _ = followed
    per_name = " or ".join(os.path.basename(t)[:-3] for t in PER_NAME_TESTS)
    done = run(copy, [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *NAME_LIST_TESTS,
                      *PER_NAME_TESTS, f"tests/test_{NEW}.py",
                      "-k", f"(not ({per_name}) or {NEW}) and not presets_train_with_default_flags"])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    passed = [line.split()[0] for line in done.stdout.splitlines() if line.endswith("PASSED") or " PASSED " in line]
    new = [node for node in passed if NEW in node]
    # The contract at both of its sites, with and without its variant; its presets pinned; its own tests.
    for case in ("encoder_self-default", "encoder_self-k0", "decoder_self-default", "decoder_self-k0"):
        assert sum(f"[{NEW}-{case}" in node for node in new) >= 5, (case, new)
    for size in ("tiny", "small", "base", "big"):
        assert f"tests/test_architectures.py::test_every_architecture_resolves_as_pinned[{NEW}_transformer_{size}]" \
            in new
    assert f"tests/test_ctranslate2_decoding.py::test_every_family_converts_or_says_why[{NEW}_transformer]" in new
    assert f"tests/test_growing_cache.py::test_decoding_equals_the_concatenating_cache[{NEW}]" in new
    assert f"tests/test_architectures_e2e.py::test_train_and_generate[{NEW}_transformer_tiny]" in new
    assert sum(node.startswith(f"tests/test_{NEW}.py::") for node in new) == 3
    assert any(node.startswith("tests/test_docs.py::test_generated_tables_are_current[mixer_and_preset-position")
               for node in passed)
    generated = "tests/test_scheme_declarations.py::test_the_lists_generated_from_the_declarations_are_current"
    assert all(f"{generated}[{what}]" in passed for what in ("ctranslate2", "titles", "readme"))
