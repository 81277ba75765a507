"""The docs name only what exists: every ``skillopt-sleep`` command and flag, every config key
and ``SKILLOPT_SLEEP_*`` variable, and every repository path that README.md and docs/*.md
name.

What counts (kept narrow so a test failure is always real drift):

* a **command** is a backticked span or a line of a ``bash`` / ``sh`` block that starts with
  ``skillopt-sleep`` (also after ``&&`` / ``;`` / ``|``); its command and subcommand must exist
  in the Typer app and every ``--flag`` after it must be an option of that command. A span
  that starts with a command name and carries a ``--flag`` (``start --foreground``) is
  checked the same way.
* a **config key** is a backticked key in the first column of a table whose header is
  ``key``, a key of a ``toml`` block (or of a ``<<TOML`` heredoc), or a ``SKILLOPT_SLEEP_*``
  variable. Keys resolve through :class:`~skillopt_sleep.config.Settings` (``<name>`` stands
  for any key of a mapping, ``*`` for every field of a section); in docs/backends.md the key
  tables describe one backend section (``[target]`` / ``[optimizer]``). A variable that is no
  setting must be read by the package by that name.
* a **repository path** is a backticked word that contains ``/`` and starts with a top-level
  folder of the repository (``skillopt_sleep/``, ``tests/``, ``docs/``, ``plugins/`` …) or a
  folder of the package (``night/``, ``store/`` …: relative to ``skillopt_sleep/``), or a bare
  ``*.py`` name (a package module), or a bare name of a file at the repository root. Paths
  under a home or state folder (``~/…``, ``$CODEX_HOME/…``, ``<state>/…``, ``DIR/…``) are
  the user's, not the repository's. Under a heading that names a repository folder
  (``plugins/claude-code``) other relative paths are taken from it. A ``<placeholder>``, ``*`` or ``…`` segment ends the part
  that is checked.
* a **module**: a backticked dotted name ``skillopt_sleep.…`` (or a ``from skillopt_sleep.…
  import …`` line of a ``python`` block) must import (a module, or an attribute of one).
* a **default** in a ``key | default`` table (a number, ``true`` / ``false``, a backticked
  value, ``none``) equals the setting's default; prose defaults (``all``, ``off``) are not read.
"""

from __future__ import annotations

import enum
import importlib
import re
import tomllib
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from pydantic import BaseModel

from skillopt_sleep import config
from skillopt_sleep.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGE = ROOT / "skillopt_sleep"

#: TOML blocks that show another tool's config file, by their top-level table.
FOREIGN_TOML = {
    "mcp_servers": "Codex's config.toml (docs/mcp.md)",
    "projects": "Codex's config.toml (docs/plugins.md)",
}
#: Key tables that describe one section of the settings rather than the top level.
TABLE_SECTION = {"backends.md": "target"}
#: Paths a document may name before they exist (planned work), per document: none today.
PLANNED: dict[str, set[str]] = {}

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
HEREDOC_TOML = re.compile(r"<<-?\s*'?TOML'?[^\n]*\n(.*?)^TOML$", re.M | re.S)
ENV = re.compile(r"\bSKILLOPT_SLEEP_[A-Z0-9_]*[A-Z0-9]")
PLACEHOLDER = re.compile(r"[<>*…{}\[\]|]")


# ---------------------------------------------------------------------------------- reading
def blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1).lower(), m.group(2)) for m in FENCE.finditer(text)]


def prose(text: str) -> str:
    return FENCE.sub("", text)


def spans(text: str) -> list[str]:
    return SPAN.findall(prose(text).replace("\\`", ""))


def tables(text: str) -> Iterator[list[list[str]]]:
    """Each markdown table of the prose as rows of cells (header first, no separator)."""
    rows: list[list[str]] = []
    for line in [*prose(text).splitlines(), ""]:
        if line.lstrip().startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
        elif rows:
            yield rows
            rows = []


# ---------------------------------------------------------------------------------- commands
ROOT_COMMAND = typer.main.get_command(app)


def command_lines(text: str) -> Iterator[str]:
    yield from spans(text)
    for lang, body in blocks(text):
        if lang in ("bash", "sh", "shell", "console"):
            for line in body.splitlines():
                yield re.sub(r"(^|\s)#.*", "", line)


def options(cmd: typing.Any) -> dict[str, typing.Any]:
    return {o: p for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}


def choices(param: typing.Any) -> set[str]:
    """The values a positional argument accepts when they are a fixed set (an Enum, or the
    ``choices`` its validating callback names)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {str(m.value) for m in annotation}
    said = getattr(getattr(param, "callback", None), "choices", None)  # a validating callback's
    return set(said or getattr(getattr(param, "type", None), "choices", None) or ())


def check_invocation(words: list[str], cmd: typing.Any, said: str) -> list[str]:
    """``words`` follow the program name (or are a bare command line when ``cmd`` is a leaf)."""
    problems: list[str] = []
    names = ["skillopt-sleep"]
    i = 0
    while hasattr(cmd, "commands"):  # a group (Typer vendors its own click)
        while i < len(words) and words[i].startswith("-"):
            flag, _, value = words[i].partition("=")
            param = options(cmd).get(flag)
            if param is None:
                return [f"`{said}`: `{' '.join(names)}` has no option {flag}"]
            i += 1 if (value or getattr(param, "is_flag", False)) else 2
        if i >= len(words) or PLACEHOLDER.search(words[i]):
            return problems
        sub = cmd.commands.get(words[i])
        if sub is None:
            return [f"`{said}`: `{' '.join(names)}` has no command {words[i]!r}"]
        names.append(words[i])
        cmd, i = sub, i + 1
    arguments = [p for p in cmd.params if not p.opts[0].startswith("-")]
    if arguments and i < len(words) and not words[i].startswith("-"):
        allowed = choices(arguments[0])
        if allowed and not PLACEHOLDER.search(words[i]) and words[i] not in allowed:
            problems.append(
                f"`{said}`: `{' '.join(names)}` takes {arguments[0].name} in {sorted(allowed)},"
                f" not {words[i]!r}"
            )
    for word in words[i:]:
        if word in (">", "|", "2>", "&&", ";"):
            break
        flag = word.strip("[](),").partition("=")[0]
        if flag.startswith("--") and flag not in options(cmd):
            problems.append(f"`{said}`: `{' '.join(names)}` has no option {flag}")
    return problems


def command_problems(text: str) -> tuple[list[str], int]:
    problems, seen = [], 0
    for line in command_lines(text):
        for part in re.split(r"&&|\|\||;|\|", line):
            words = part.split()
            if words and words[0] == "$":
                words = words[1:]
            if not words:
                continue
            if words[0] == "skillopt-sleep":
                seen += 1
                problems += check_invocation(words[1:], ROOT_COMMAND, part.strip())
            elif words[0] in ROOT_COMMAND.commands and any(w.startswith("--") for w in words):
                seen += 1
                problems += check_invocation(words, ROOT_COMMAND, part.strip())
    return problems, seen


# ---------------------------------------------------------------------------------- config keys
def _unwrap(annotation: typing.Any) -> typing.Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _unwrap(args[0]) if len(args) == 1 else annotation
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    return annotation


def resolve(segments: list[str]) -> str | None:
    """None when ``segments`` name a setting (or a section of them), else why not."""
    where: typing.Any = config.Settings
    path: list[str] = []
    for seg in segments:
        if seg == "*":
            ok = isinstance(where, type) and issubclass(where, BaseModel)
            return None if ok else f"{'.'.join(path)} is not a section"
        if isinstance(where, type) and issubclass(where, BaseModel):
            field = where.model_fields.get(seg)
            if field is None:
                return f"{'.'.join([*path, seg])} is no setting"
            where = _unwrap(field.annotation)
        elif typing.get_origin(where) is dict:
            if path == ["sources"] and not seg.startswith("<") and seg not in config.KNOWN_SOURCES:
                return f"sources.{seg}: no such source"
            where = _unwrap(typing.get_args(where)[1])
        else:
            return f"{'.'.join(path)} has no key {seg!r}"
        path.append(seg)
    return None


def table_keys(doc: Path, text: str) -> Iterator[str]:
    section = TABLE_SECTION.get(doc.name)
    for rows in tables(text):
        if rows[0][0].lower() != "key":
            continue
        for row in rows[1:]:
            previous = ""
            for key in SPAN.findall(row[0]):
                if key.startswith(".") and previous:
                    key = previous.rsplit(".", 1)[0] + key
                previous = key
                yield f"{section}.{key}" if section else key


def toml_keys(text: str) -> Iterator[list[str]]:
    sources = [body for lang, body in blocks(text) if lang == "toml"]
    for lang, body in blocks(text):
        if lang in ("bash", "sh", "shell"):
            sources += HEREDOC_TOML.findall(body)

    def walk(data: dict, path: list[str]) -> Iterator[list[str]]:
        for key, value in data.items():
            if isinstance(value, dict) and value:
                yield from walk(value, [*path, key])
            else:
                yield [*path, key]

    for body in sources:
        data = tomllib.loads(body)
        if any(k in FOREIGN_TOML for k in data):
            assert set(data) <= set(FOREIGN_TOML), f"a TOML block mixes foreign tables: {body}"
            continue
        yield from walk(data, [])


def field_default(key: str) -> typing.Any:
    """The default of the scalar setting ``key`` (dotted), or ``...`` when it has none."""
    model: typing.Any = config.Settings
    *sections, name = key.split(".")
    for section in sections:
        field = model.model_fields.get(section) if isinstance(model, type) else None
        model = _unwrap(field.annotation) if field else None
    field = model.model_fields.get(name) if isinstance(model, type) else None
    if field is None or field.default_factory is not None:
        return ...
    return field.default


def parse_default(cell: str) -> typing.Any:
    """A documented default: ``true``/``false``, a number, ``none`` / ``—`` (None), a string in
    backticks; ``...`` when the cell is prose (``all``, ``off``, ``agent defaults``)."""
    cell = cell.strip()
    if cell.lower() in ("none", "—", "-"):
        return None
    quoted = re.fullmatch(r"`([^`]*)`", cell)
    if quoted:
        value = quoted.group(1)
        return {"true": True, "false": False}.get(value, value)
    number = cell.replace(" ", "").replace("\u202f", "")
    if re.fullmatch(r"-?\d+(\.\d+)?", number):
        return float(number)
    return ...


def default_problems(doc: Path, text: str) -> tuple[list[str], int]:
    """In a table with columns key | default, each documented default equals the setting's."""
    problems, seen = [], 0
    for rows in tables(text):
        if [c.lower() for c in rows[0][:2]] != ["key", "default"] or doc.name in TABLE_SECTION:
            continue
        for row in rows[1:]:
            keys = SPAN.findall(row[0])
            cells = [row[1]] if len(keys) == 1 else re.split(r",\s(?=\S)", row[1])
            if len(cells) != len(keys):
                continue
            for key, cell in zip(keys, cells, strict=True):
                documented, actual = parse_default(cell), field_default(key)
                if documented is ... or actual is ...:
                    continue
                seen += 1
                same = (
                    documented == actual
                    if not isinstance(documented, float) or isinstance(actual, bool)
                    else actual is not None and float(actual) == documented
                )
                if not same:
                    problems.append(f"`{key}`: the docs say {cell}, Settings says {actual!r}")
    return problems, seen


PACKAGE_SOURCE = "\n".join(p.read_text("utf-8") for p in PACKAGE.rglob("*.py"))


def env_problem(name: str) -> str | None:
    key = name.removeprefix("SKILLOPT_SLEEP_").lower()
    if resolve(key.split("__")) is None:
        return None
    if re.search(rf"['\"]{name}['\"]", PACKAGE_SOURCE):
        return None
    return f"{name}: neither a setting nor read by the package"


def config_problems(doc: Path, text: str) -> tuple[list[str], int]:
    problems, seen = [], 0
    for key in table_keys(doc, text):
        seen += 1
        why = resolve(key.split("."))
        if why:
            problems.append(f"config table key `{key}`: {why}")
    for segments in toml_keys(text):
        seen += 1
        why = resolve(segments)
        if why:
            problems.append(f"TOML key {'.'.join(segments)}: {why}")
    for name in sorted(set(ENV.findall(text))):
        seen += 1
        why = env_problem(name)
        if why:
            problems.append(why)
    return problems, seen


# ---------------------------------------------------------------------------------- paths
def _tracked_top() -> tuple[set[str], set[str]]:
    folders = {
        p.name
        for p in ROOT.iterdir()
        if p.is_dir() and p.name not in (".git", ".venv", "node_modules") and "cache" not in p.name
    }
    files = {p.name for p in ROOT.iterdir() if p.is_file()}
    return folders, files


TOP_FOLDERS, TOP_FILES = _tracked_top()
PACKAGE_FOLDERS = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}


def repo_path(word: str, base: str | None = None) -> str | None:
    """The repository path ``word`` names (placeholder tail cut off), or None. Under a heading
    that names a repository folder (``base``), a relative path is taken from that folder."""
    word = word.lstrip("([,;:'\"").rstrip(")],;:.'\"")
    if not word or word[0] in "~$%/<" or "://" in word or "@" in word:
        return None
    if "/" not in word:
        if word.endswith(".py") and not PLACEHOLDER.search(word):
            hits = list(PACKAGE.rglob(word)) + [p for p in [ROOT / word] if p.exists()]
            return str(hits[0].relative_to(ROOT)) if hits else f"skillopt_sleep/{word}"
        return word if word in TOP_FILES else None
    head = word.split("/", 1)[0]
    if head in TOP_FOLDERS:
        rel = word
    elif head in PACKAGE_FOLDERS:
        rel = f"skillopt_sleep/{word}"
    elif base:
        rel = f"{base}/{word}"
    else:
        return None
    kept: list[str] = []
    for seg in rel.split("/"):
        if PLACEHOLDER.search(seg):
            break
        kept.append(seg)
    return "/".join(kept).rstrip("/") or None


def path_problems(doc: Path, text: str) -> tuple[list[str], int]:
    problems, seen = [], 0
    planned = PLANNED.get(str(doc.relative_to(ROOT)), set())
    for heading, section in sections(text):
        named = [repo_path(w) for w in SPAN.findall(heading)]
        folders = [r for r in named if r and "/" in r and (ROOT / r).is_dir()]
        base = folders[0] if folders else None
        for span in spans(section):
            for word in span.split():
                rel = repo_path(word, base)
                if rel is None:
                    continue
                seen += 1
                if not (ROOT / rel).exists() and rel not in planned:
                    problems.append(f"`{word}` ({rel}) does not exist")
    return problems, seen


def sections(text: str) -> Iterator[tuple[str, str]]:
    """(heading, body) per markdown section; the text before the first heading has none."""
    parts = re.split(r"^(#{1,6} .*)$", prose(text), flags=re.M)
    yield "", parts[0]
    yield from zip(parts[1::2], parts[2::2], strict=True)


DOTTED = re.compile(r"^skillopt_sleep(?:\.\w+)+$")
FROM_IMPORT = re.compile(r"^from (skillopt_sleep[\w.]*) import ([\w, ]+)$", re.M)


def dotted_problem(name: str) -> str | None:
    """None when ``name`` is a module of the package or an attribute of one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return f"`{name}`: {'.'.join(parts[:cut])} has no {attr!r}"
            obj = getattr(obj, attr)
        return None
    return f"`{name}`: no such module"


def module_problems(text: str) -> tuple[list[str], int]:
    words = [w.rstrip("(),.:") for span in spans(text) for w in span.split()]
    names = [w for w in words if DOTTED.match(w)]
    for lang, body in blocks(text):
        if lang == "python":
            for module, imported in FROM_IMPORT.findall(body):
                names += [f"{module}.{n.strip()}" for n in imported.split(",")]
    problems = [why for why in map(dotted_problem, names) if why]
    return problems, len(names)


# ---------------------------------------------------------------------------------- tests
def _id(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_every_command_and_flag_the_docs_name_exists(doc: Path) -> None:
    problems, _ = command_problems(doc.read_text("utf-8"))
    assert problems == []


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_every_config_key_the_docs_name_exists(doc: Path) -> None:
    problems, _ = config_problems(doc, doc.read_text("utf-8"))
    assert problems == []


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_every_default_the_config_tables_give_is_the_settings_default(doc: Path) -> None:
    problems, _ = default_problems(doc, doc.read_text("utf-8"))
    assert problems == []


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_every_repository_path_the_docs_name_exists(doc: Path) -> None:
    problems, _ = path_problems(doc, doc.read_text("utf-8"))
    assert problems == []


@pytest.mark.parametrize("doc", DOCS, ids=_id)
def test_every_module_the_docs_name_imports(doc: Path) -> None:
    problems, _ = module_problems(doc.read_text("utf-8"))
    assert problems == []


def test_the_checks_see_what_the_docs_name() -> None:
    """Not vacuous: the real docs yield many commands, keys and paths."""
    totals = [0, 0, 0, 0, 0]
    for doc in DOCS:
        text = doc.read_text("utf-8")
        totals[0] += command_problems(text)[1]
        totals[1] += config_problems(doc, text)[1]
        totals[2] += path_problems(doc, text)[1]
        totals[3] += module_problems(text)[1]
        totals[4] += default_problems(doc, text)[1]
    minimum = [40, 40, 30, 5, 20]
    assert all(n >= m for n, m in zip(totals, minimum, strict=True)), totals


def test_the_checks_catch_made_up_names() -> None:
    doc = ROOT / "README.md"
    text = """
Run `skillopt-sleep frobnicate`, `skillopt-sleep run --frob`, `skillopt-sleep service fly`,
`skillopt-sleep --nope status`, `start --backgroundish` and `skillopt-sleep install vim`.

```bash
skillopt-sleep harvest --json && skillopt-sleep tasks --sorted   # a comment --ignored
```

| key | default | meaning |
|---|---|---|
| `frob_level` | 1 | made up |
| `document.colour` | - | made up |
| `sources.<name>.enabled` / `.rootz` | - | one real, one made up |
| `epochs`, `gate_metric` | 3, `hard` | real keys, wrong defaults |
| `no_regression` | `false` | a wrong default |

```toml
[target]
modle = "x"
[sources.not_an_agent]
enabled = true
```

Set `SKILLOPT_SLEEP_FROB` or `SKILLOPT_SLEEP_TARGET__MODLE`; see `skillopt_sleep/night/frob.py`,
`docs/nowhere.md`, `tests/bench/nothing/`, `night/nothing.py`, `nothing.py` and `setup.py`.
Not repository paths: `~/.claude/nothing.md`, `$CODEX_HOME/nothing`, `DIR/.nothing/`,
`<state>/nothing/`, `CLAUDE.md`, `plugins/<agent>/`.
Modules: `skillopt_sleep.daemon.nothing`, `skillopt_sleep.testing.transcripts.nothing`.

```python
from skillopt_sleep.mcp import build_server, nothing
```
"""
    commands, _ = command_problems(text)
    wrong_agent = [p for p in commands if "not 'vim'" in p]
    assert len(wrong_agent) == 1 and "`skillopt-sleep install` takes agent in" in wrong_agent[0]
    commands.remove(wrong_agent[0])
    assert [p.split(": ", 1)[1] for p in commands] == [
        "`skillopt-sleep` has no command 'frobnicate'",
        "`skillopt-sleep run` has no option --frob",
        "`skillopt-sleep service` has no command 'fly'",
        "`skillopt-sleep` has no option --nope",
        "`skillopt-sleep start` has no option --backgroundish",
        "`skillopt-sleep tasks` has no option --sorted",
    ]
    keys, _ = config_problems(doc, text)
    assert keys == [
        "config table key `frob_level`: frob_level is no setting",
        "config table key `document.colour`: document.colour is no setting",
        "config table key `sources.<name>.rootz`: sources.<name>.rootz is no setting",
        "TOML key target.modle: target.modle is no setting",
        "TOML key sources.not_an_agent.enabled: sources.not_an_agent: no such source",
        "SKILLOPT_SLEEP_FROB: neither a setting nor read by the package",
        "SKILLOPT_SLEEP_TARGET__MODLE: neither a setting nor read by the package",
    ]
    defaults, _ = default_problems(doc, text)
    assert defaults == [
        "`epochs`: the docs say 3, Settings says 2",
        "`gate_metric`: the docs say `hard`, Settings says 'mixed'",
        "`no_regression`: the docs say `false`, Settings says True",
    ]
    paths, _ = path_problems(doc, text)
    assert paths == [
        "`skillopt_sleep/night/frob.py` (skillopt_sleep/night/frob.py) does not exist",
        "`docs/nowhere.md` (docs/nowhere.md) does not exist",
        "`tests/bench/nothing/` (tests/bench/nothing) does not exist",
        "`night/nothing.py` (skillopt_sleep/night/nothing.py) does not exist",
        "`nothing.py` (skillopt_sleep/nothing.py) does not exist",
        "`setup.py` (skillopt_sleep/setup.py) does not exist",
    ]
    modules, _ = module_problems(text)
    assert modules == [
        "`skillopt_sleep.daemon.nothing`: skillopt_sleep.daemon has no 'nothing'",
        "`skillopt_sleep.testing.transcripts.nothing`: skillopt_sleep.testing.transcripts has no "
        "'nothing'",
        "`skillopt_sleep.mcp.nothing`: skillopt_sleep.mcp has no 'nothing'",
    ]
