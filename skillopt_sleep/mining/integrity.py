"""Whole answers: what every scored answer must be, whatever its task's checks say.

A task's checks judge what the user asked for (``pnpm``, a short subject); they cannot see
that an answer is broken — a test file cut in half still "mentions pytest". So before its
checks, every answer of a replay (and of the wild) is read for what makes it no answer at all;
:func:`broken` lists each fault, and one fault scores the answer 0 (``Replayer``):

* ``empty`` — nothing but white space.
* ``bare`` — one word and no code block: a bare keyword (``pytest``, ``pnpm``) names the tool
  and does not do the task.
* ``cut`` — a code fence opened and never closed: the answer stops inside its code.
* ``python`` / ``json`` / ``toml`` / ``shell`` — a fenced block in that language (or, without
  any fence, an answer that starts the way a Python file does: ``import``, ``from … import``,
  ``def``, ``class``, a decorator) that its parser refuses: Python by :func:`ast.parse`, JSON
  and TOML by their parsers, shell by ``bash -n`` (skipped where no ``bash`` is installed).

Blocks in other languages are not parsed (no parser is shipped for them): their answers are
judged by the task's checks alone.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass

#: a fenced block: its language tag and body (the closing fence required)
_BLOCK = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*```", re.M | re.S)
_FENCE = re.compile(r"^[ \t]*```", re.M)
_PYTHON_START = re.compile(r"\A\s*(?:import\s+\w|from\s+[\w.]+\s+import\b|def\s+\w|class\s+\w|@\w)")
_LANGS = {
    "python": "python",
    "py": "python",
    "python3": "python",
    "json": "json",
    "toml": "toml",
    "sh": "shell",
    "bash": "shell",
    "shell": "shell",
    "zsh": "shell",
}


@dataclass(frozen=True)
class Fault:
    """Why an answer is no answer: ``kind`` (see the module doc) and the reason in words."""

    kind: str
    why: str


def broken(answer: str) -> list[Fault]:
    """Every fault of ``answer`` (empty: the answer is whole)."""
    text = answer.strip()
    if not text:
        return [Fault("empty", "the answer is empty")]
    faults: list[Fault] = []
    if len(_FENCE.findall(answer)) % 2:
        faults.append(
            Fault("cut", "a code block is opened and never closed: the answer is cut off")
        )
    blocks = _BLOCK.findall(answer)
    if len(text.split()) == 1 and not blocks:
        faults.append(
            Fault("bare", f"the whole answer is one word ({text[:40]!r}): it does not do the task")
        )
    if blocks:
        for tag, body in blocks:
            lang = _LANGS.get(tag.lower())
            why = _unparsable(lang, body) if lang else None
            if lang and why:
                faults.append(Fault(lang, why))
    elif "```" not in answer and _PYTHON_START.match(text):
        why = _unparsable("python", text)
        if why:
            faults.append(Fault("python", why))
    return faults


def _unparsable(lang: str, code: str) -> str | None:
    """Why ``code`` does not parse as ``lang`` (None: it parses, or cannot be checked here)."""
    if lang == "python":
        try:
            ast.parse(code)
        except SyntaxError as exc:
            return f"its Python does not parse (line {exc.lineno}: {exc.msg})"
        except ValueError as exc:
            return f"its Python does not parse ({exc})"
        return None
    if lang == "json":
        try:
            json.loads(code)
        except ValueError as exc:
            return f"its JSON does not parse ({exc})"
        return None
    if lang == "toml":
        try:
            tomllib.loads(code)
        except tomllib.TOMLDecodeError as exc:
            return f"its TOML does not parse ({exc})"
        return None
    bash = shutil.which("bash")
    if bash is None:
        return None
    proc = subprocess.run(
        [bash, "-n"], input=code, capture_output=True, text=True, timeout=10, check=False
    )
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["syntax error"])[0]
        return f"its shell does not parse ({first.removeprefix('bash: ')})"
    return None
