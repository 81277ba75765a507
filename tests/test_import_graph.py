"""The package's import graph has no circle (docs/architecture.md, "Rules of the house").

The graph is read from the source with :mod:`ast`, not by importing it: an edge is every
``import`` / ``from … import`` of a ``skillopt_sleep`` module anywhere in a module, at its top
or inside a function (a circle through a lazy import is still a circle), except under
``if TYPE_CHECKING:`` (never executed). ``from pkg import name`` is an edge to the submodule
``pkg.name`` when there is one, else to ``pkg`` itself; importing a submodule is not counted
as importing its parent packages' ``__init__`` (every module would then sit in a circle with
its package). ``importlib.import_module("…")`` with a literal name counts too; a computed name
cannot be seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import skillopt_sleep

#: Circles that exist today outside the daemon / MCP work, reported (printed) rather than
#: failed on until their owners remove them. Each entry is one strongly connected component.
KNOWN_CIRCLES: set[frozenset[str]] = set()  # none: every circle fails the test


def modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package ``__init__``) for every module under ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_pkg)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_import(node: ast.AST) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    return (  # importlib.import_module("a.literal.name")
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def _imports(node: ast.AST) -> Iterator[ast.AST]:
    """Every import in ``node``, at any depth, except under ``if TYPE_CHECKING:`` (its
    ``else`` does run)."""
    if _is_import(node):
        yield node
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        children: list[ast.AST] = list(node.orelse)
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        yield from _imports(child)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (see the module docstring)."""
    mods = modules(root, package)

    def owner(name: str) -> str | None:  # the module a dotted name lives in
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        here = name if is_pkg else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in _imports(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Call):
                target = owner(node.args[0].value)  # type: ignore[attr-defined]
                if target:
                    deps.add(target)
            elif isinstance(node, ast.Import):
                deps.update(t for a in node.names if (t := owner(a.name)))
            else:
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                if base != package and not base.startswith(package + "."):
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    target = sub if sub in mods else owner(base)
                    if target:
                        deps.add(target)
        deps.discard(name)
        graph[name] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(graph: dict[str, set[str]], circle: frozenset[str]) -> str:
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & circle))}" for m in sorted(circle))


def test_no_import_circles() -> None:
    root = Path(skillopt_sleep.__file__).parent
    graph = import_graph(root, "skillopt_sleep")
    assert "skillopt_sleep.daemon.core" in graph  # the walk found the package
    found = circles(graph)
    for circle in found:
        if circle in KNOWN_CIRCLES:
            print(f"known import circle (to remove): {describe(graph, circle)}")
    for gone in KNOWN_CIRCLES - set(found):
        print(f"a known import circle is gone; drop it from KNOWN_CIRCLES: {sorted(gone)}")
    new = [describe(graph, c) for c in found if c not in KNOWN_CIRCLES]
    assert not new, "import circles:\n" + "\n".join(new)


def test_the_check_sees_lazy_and_relative_imports_but_not_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")  # lazy + relative
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nimport pkg.a\nif TYPE_CHECKING:\n    import pkg.c2\n"
    )
    (pkg / "c2.py").write_text("from pkg import c\n")
    (pkg / "d.py").write_text("import importlib\nimportlib.import_module('pkg.e')\n")
    (pkg / "e.py").write_text("from pkg.d import x\n")
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a"}
    assert set(circles(graph)) == {
        frozenset({"pkg.a", "pkg.sub.b"}),
        frozenset({"pkg.d", "pkg.e"}),
    }
