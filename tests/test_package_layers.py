"""The package's layering: no import cycle, and no module imports one from a higher layer.

Read from the source (``ast``), the imports a module runs when it is imported
(its top level). An import inside a function runs later, when the package is
whole; the one kind the package has is the registration of every mixer and
architecture (``import posnet_fairseq``) by tools that need them.
"""
import ast
import os

import pytest

PACKAGE = "posnet_fairseq"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PACKAGE)

# Lowest first. A module may import from its own layer and the layers below it.
LAYERS = (
    ("sites", "tool_logging", "plugin", "compat", "troubleshooting", "fairseq_log", "process_pool", "launcher",
     "data", "atomic_files", "checkpoint_files"),
    ("flags", "families", "position_augmentation"),
    ("mixers",),
    ("models", "tasks", "precompute", "translation_invariance", "checkpoint_averaging", "presets"),
    ("table_runs", "benchmark"),
    ("evaluation",),
    ("compare",),
    ("cli", "__init__"),
)
LAYER = {area: i for i, areas in enumerate(LAYERS) for area in areas}


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


def _top_level_imports(module, path):
    """The package modules that ``module`` imports at its top level."""
    package = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
    targets = set()
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
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
                targets.add(name)
    return targets


IMPORTS = {module: _top_level_imports(module, path) for module, path in MODULES.items()}


def _area(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_area_has_a_layer():
    assert {_area(m) for m in MODULES} == set(LAYER)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_from_a_higher_layer(module):
    higher = {other for other in IMPORTS[module] if LAYER[_area(other)] > LAYER[_area(module)]}
    assert not higher, f"{module} (layer {LAYER[_area(module)]}) imports {sorted(higher)} from a higher layer"


def test_no_import_cycle():
    state, cycles = {}, []

    def visit(module, path):
        state[module] = "open"
        for other in sorted(IMPORTS[module]):
            if state.get(other) == "open":
                cycles.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other, path + [other])
        state[module] = "done"

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [module])
    assert not cycles


def test_the_check_sees_an_upward_import(tmp_path):
    """The reader finds a relative import of a higher layer (what the layering test relies on)."""
    path = tmp_path / "flags.py"
    path.write_text("from .compare import run\nfrom . import sites\n")
    assert _top_level_imports(f"{PACKAGE}.flags", str(path)) == {f"{PACKAGE}.compare.run", f"{PACKAGE}.sites"}
