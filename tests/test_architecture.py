"""The house rules of ``docs/architecture.md`` that a machine can check."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import skillopt_sleep

PACKAGE = Path(skillopt_sleep.__file__).parent

#: Modules outside ``store/`` allowed to hold SQL, and why. Nothing here may touch our store.
SQL_ALLOWED = {
    # they read the agent's own SQLite database (opencode.db, Devin's session store): that is
    # source data the harvester parses, not our store
    "sources/opencode.py": "reads opencode's own SQLite database",
    "sources/devin.py": "reads Devin's own SQLite database",
    "sources/openclaw.py": "reads OpenClaw's own SQLite database",
}

SQL = re.compile(
    r"\b(select\s.+?\sfrom|insert\s+(or\s+\w+\s+)?into|update\s+\[?\w+\]?\s+set|delete\s+from"
    r"|create\s+(unique\s+)?(table|index|view|trigger)|drop\s+(table|index)|alter\s+table"
    r"|pragma\s+\w+|begin\s+(immediate|exclusive|deferred)|\w+_fts\s+match)\b"
    # a WHERE fragment (as the removed generic ``store.rows(table, "status = ?")`` took)
    r"|\w\]?\s+(=|!=|<>|>=|<=|>|<|like|in)\s+\(?\?(?![\w=!:<>(])",
    re.IGNORECASE | re.DOTALL,
)
#: calls that run SQL or reach sqlite-utils' tables directly
SQL_CALLS = {"execute", "executemany", "executescript", "rows_where"}


def _text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's literal parts, the holes as ``{}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
            for v in node.values
        )
    return None


def sql_violations(source: str, name: str) -> list[str]:
    """Where ``source`` (a module's text) holds SQL or reaches a database directly."""
    tree = ast.parse(source, name)
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    out: list[str] = []
    for node in ast.walk(tree):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and id(node) not in docstrings
        ):
            text = _text(node)
            if text and SQL.search(text):
                out.append(f"{where}: SQL string {text[:60]!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "db":
            out.append(f"{where}: .db (the store's database) reached directly")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SQL_CALLS
        ):
            out.append(f"{where}: .{node.func.attr}() call")
    return out


def test_no_sql_outside_store() -> None:
    """SQL lives in ``store/``: no other module holds a SQL statement, calls ``execute`` or
    reaches ``store.db`` (the allow-list says who reads someone else's database, and why)."""
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("store/") or rel in SQL_ALLOWED:
            continue
        found += sql_violations(path.read_text("utf-8"), rel)
    assert not found, "SQL outside store/:\n" + "\n".join(found)


def test_the_sql_check_catches_what_it_forbids() -> None:
    """The check above fails on the code it replaced (kept here as its own regression test)."""
    bad = {
        "raw": 'rows = store.db.execute("select id from nights where id > ?", [n])',
        "table": 'store.db["proposals"].upsert(row, pk="id")',
        "fstring": 'sql = f"select task_id, split from rollouts where task_id in ({marks})"',
        "fts": 'where = ["messages_fts match ?", "s.self_generated = 0"]',
        "generic": 'store.rows_where("status = ?", ["running"])',
        "conn": 'con.execute("PRAGMA journal_mode")',
        "where": 'store.rows("nights", "status = ?", ["running"], order_by="id desc")',
    }
    for what, code in bad.items():
        assert sql_violations(code, what), what
    fine = (
        'say("select a model, then update the file")\n'
        "row = store.nights.get(3)\n"
        'pattern = re.compile(r"(?P<keep>(?i:bearer)\\s+)(?=[A-Za-z])")\n'
        'say(f"is {a} = {b}? no")\n'
        'def f():\n    """Select from the staged proposals."""\n'
    )
    assert sql_violations(fine, "fine") == []


def _modules() -> list[str]:
    """Every module of the package, as its path below ``skillopt_sleep/`` (a package's
    ``__init__.py`` and ``__main__.py`` are its room's face: the room names them)."""
    return sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    )


def test_every_module_of_the_package_is_in_the_architecture_doc():
    # docs/architecture.md lists each module of the package by its path (`night/train.py`):
    # a module added or moved without a line there fails here
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/]+\.py)`", doc))
    missing = [m for m in _modules() if m not in named]
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)}"
    gone = sorted(m for m in named if not m.startswith("tests/") and not (PACKAGE / m).exists())
    assert not gone, f"docs/architecture.md names modules that do not exist: {', '.join(gone)}"
