"""Every module of the package is at most 400 lines and every function (method, nested function) at most 60.

Counted from the source (``ast``): a module's lines, a function's from its ``def`` to its last line,
docstring included. What is over today is in ``ALLOWED`` with its reason; an entry that now fits fails the
test, so the list only shrinks.
"""
import ast
import os

import pytest

PACKAGE = "posnet_fairseq"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PACKAGE)
MODULE_LINES, FUNCTION_LINES = 400, 60

# A module path (relative to the package), or "path::qualified.function", and why it is over: none today.
ALLOWED = {}


def functions(tree, prefix=""):
    """(qualified name, lines) of every function in ``tree``, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = prefix + node.name
            if not isinstance(node, ast.ClassDef):
                yield name, node.end_lineno - node.lineno + 1
            yield from functions(node, name + ".")
        else:
            yield from functions(node, prefix)


def sizes():
    """{module path or path::function: its lines} of every module and function of the package."""
    found = {}
    for folder, _, files in os.walk(ROOT):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                key = os.path.relpath(path, ROOT).replace(os.sep, "/")
                with open(path, encoding="utf-8") as f:
                    source = f.read()
                found[key] = len(source.splitlines())
                found.update((f"{key}::{function}", lines) for function, lines in functions(ast.parse(source)))
    return found


SIZES = sizes()


def limit(key):
    return FUNCTION_LINES if "::" in key else MODULE_LINES


@pytest.mark.parametrize("kind", ["module", "function"])
def test_every_module_and_function_is_within_its_limit(kind):
    over = {key: lines for key, lines in SIZES.items()
            if ("::" in key) == (kind == "function") and lines > limit(key) and key not in ALLOWED}
    assert over == {}, f"over {MODULE_LINES if kind == 'module' else FUNCTION_LINES} lines: split them"


def test_every_allowed_entry_is_still_over_and_says_why():
    """An entry that now fits (or is gone) fails: delete it."""
    stale = sorted(key for key in ALLOWED if SIZES.get(key, 0) <= limit(key))
    assert stale == []
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_count_sees_methods_and_nested_functions():
    source = "class A:\n    def f(self):\n        def g():\n            pass\n        return g\n\n\ndef h():\n    pass\n"
    assert dict(functions(ast.parse(source))) == {"A.f": 4, "A.f.g": 2, "h": 2}
