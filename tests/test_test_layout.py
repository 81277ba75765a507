"""Where test code lives: helpers in ``tests/helpers/``, fixtures in ``conftest.py`` files.

No module under ``tests/`` imports from a ``conftest`` or from a test module (``test_*``), and a
``conftest.py`` holds fixtures (and pytest hooks) only, no helper functions or classes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
MODULES = sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _imported(tree: ast.Module) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
            names += ["." * node.level + (node.module or "") + "." + a.name for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_import_from_a_conftest_or_a_test_module(path: Path) -> None:
    tree = ast.parse(path.read_text("utf-8"))
    bad = [
        name
        for name in _imported(tree)
        if any(part == "conftest" or part.startswith("test_") for part in name.split("."))
    ]
    assert bad == [], f"{path.name} imports {bad}: move what it needs to tests/helpers/"


@pytest.mark.parametrize(
    "path", [p for p in MODULES if p.name == "conftest.py"], ids=lambda p: str(p.relative_to(TESTS))
)
def test_conftest_files_hold_fixtures_only(path: Path) -> None:
    tree = ast.parse(path.read_text("utf-8"))

    def is_fixture(node: ast.AST) -> bool:
        for dec in getattr(node, "decorator_list", []):
            target = dec.func if isinstance(dec, ast.Call) else dec
            if ast.unparse(target) in ("pytest.fixture", "fixture"):
                return True
        return isinstance(node, ast.FunctionDef) and node.name.startswith("pytest_")

    helpers = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not is_fixture(node)
    ]
    assert helpers == [], f"{path.name} defines helpers {helpers}: move them to tests/helpers/"
