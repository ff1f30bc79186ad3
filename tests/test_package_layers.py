"""The package's layering: no import cycle, and no module imports one from a higher layer.

Read from the source (``ast``), every import a module holds: at its top level,
inside ``with``/``try`` blocks and inside functions. An import inside a
function runs later than one at the top, but it is a dependency all the same:
counting only the top level hid two circles and an arrow back up (issue 46).
The few that remain are listed in ``ALLOWED``, each with its reason; the test
fails on an entry that no longer holds, so the list only shrinks.
"""
import ast
import os

import pytest

PACKAGE = "posnet_fairseq"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PACKAGE)

# Lowest first. A module may import from its own layer and the layers below it.
# checkpoint_files reads a checkpoint's model settings by the architecture's flags (presets), and
# troubleshooting reads checkpoints through it: both sit with presets.
LAYERS = (
    ("sites", "tool_logging", "plugin", "compat", "fairseq_log", "process_pool", "launcher", "data",
     "atomic_files"),
    ("flags", "families", "position_augmentation"),
    ("mixers",),
    ("models", "tasks", "precompute", "translation_invariance", "checkpoint_averaging", "presets",
     "checkpoint_files", "troubleshooting"),
    ("table_runs", "benchmark"),
    ("evaluation",),
    ("compare",),
    ("cli", "__init__"),
)
LAYER = {area: i for i, areas in enumerate(LAYERS) for area in areas}

# (importer, imported) pairs that break the layering, and circles (the modules of one strongly connected
# component of the import graph), each with why it is still here: none today.
ALLOWED = {}


def _modules():
    found = {}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                module = os.path.relpath(path[:-3], os.path.dirname(ROOT)).replace(os.sep, ".")
                found[module[: -len(".__init__")] if module.endswith(".__init__") else module] = path
    return found


MODULES = _modules()


def _imports(module, path):
    """{package module that ``module`` imports, anywhere in its source: the line of the first such import}."""
    package = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
    targets = {}
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module or ""
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:  # `from .x import a_function`: the module is .x
                name = name.rpartition(".")[0]
            if name.startswith(PACKAGE) and name != module:
                targets[name] = min(node.lineno, targets.get(name, node.lineno))
    return targets


IMPORTS = {module: _imports(module, path) for module, path in MODULES.items()}


def _area(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward(module):
    """{imported module from a higher layer: its line} of ``module``."""
    return {other: line for other, line in IMPORTS[module].items() if LAYER[_area(other)] > LAYER[_area(module)]}


def circles(imports):
    """The strongly connected components of more than one module of the graph ``imports`` (Tarjan's)."""
    index, low, stack, found = {}, {}, [], []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(imports[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = {stack.pop()}
            while module not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(frozenset(component))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return found


def test_every_area_has_a_layer():
    assert {_area(m) for m in MODULES} == set(LAYER)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_from_a_higher_layer(module):
    higher = {f"{other} (line {line})" for other, line in upward(module).items() if (module, other) not in ALLOWED}
    assert not higher, f"{module} (layer {LAYER[_area(module)]}) imports {sorted(higher)} from a higher layer"


def test_no_import_cycle():
    assert [sorted(c) for c in circles(IMPORTS) if c not in ALLOWED] == []


def test_every_allowed_exception_still_holds_and_says_why():
    """An entry whose import or circle is gone fails: delete it."""
    found = set(circles(IMPORTS)) | {(module, other) for module in MODULES for other in upward(module)}
    assert sorted(map(str, set(ALLOWED) - found)) == []
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_check_sees_an_upward_import_at_every_depth(tmp_path):
    """The reader finds relative imports at the top level, in a ``with`` block and inside a function."""
    path = tmp_path / "flags.py"
    path.write_text("from . import sites\nwith open('x'):\n    from .mixers import registry\n\n\n"
                    "def main():\n    from .compare import run\n    import posnet_fairseq\n")
    assert _imports(f"{PACKAGE}.flags", str(path)) == {
        f"{PACKAGE}.sites": 1, f"{PACKAGE}.mixers.registry": 3, f"{PACKAGE}.compare.run": 7, PACKAGE: 8}


def test_the_check_sees_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [frozenset("abc")]
