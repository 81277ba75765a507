"""Whole answers: what every scored answer must be, whatever its task's checks say.

A task's checks judge what the user asked for (``pnpm``, a short subject); they cannot see
that an answer is broken — a test file cut in half still "mentions pytest". So before its
checks, every answer of a replay (and of the wild) is read for what makes it no answer at all;
:func:`broken` lists each fault, and one fault scores the answer 0 (``Replayer``):

* ``empty`` — nothing but white space.
* ``bare`` — one word and no code block: a bare keyword (``pytest``, ``pnpm``) names the tool
  and does not do the task.
* ``cut`` — the answer stops before its end: a code fence opened and never closed, an
  inline code span or a quotation opened on the last line and never closed, a word broken
  by a hyphen, or prose whose last word cannot end a sentence (an article, a preposition, a
  conjunction: "… so that the"), a last word that a word of the task completes ("clie" of
  "client"), or a last sentence of four words or more ending on a word with no end (no
  period, colon, closing quote …). A commit subject without a period is whole.
* ``echo`` — (:func:`~skillopt_sleep.mining.judges.judge_answer`, which knows the task) a
  short answer made only of the words of the user's correction ("Use pnpm", "Use the
  imperative mood"): it games the checks those words gave and does not do the task.
* ``no_test`` — the task asks for a test (:func:`~skillopt_sleep.mining.artifact.kind_of`
  ``test``) and the answer defines none (no ``def test_…``, ``class Test…``, ``it(``,
  ``test(``, ``describe(``, ``#[test]``, ``func Test…``, ``@Test``).
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
from collections.abc import Callable
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


def broken(
    answer: str, kind: str = "answer", vocabulary: frozenset[str] = frozenset()
) -> list[Fault]:
    """Every fault of ``answer`` (empty: the answer is whole); ``kind``: the artifact its task
    asks for (:func:`~skillopt_sleep.mining.artifact.kind_of`); ``vocabulary``: words of its
    task (its request, the user's corrections, the transcript's answers), which tell a last
    word cut short ("clie" of "client")."""
    text = answer.strip()
    if not text:
        return [Fault("empty", "the answer is empty")]
    faults: list[Fault] = []
    if len(_FENCE.findall(answer)) % 2:
        faults.append(
            Fault("cut", "a code block is opened and never closed: the answer is cut off")
        )
    else:
        why = _cut_prose(text, sentence_end=kind != "commit_message", vocabulary=vocabulary)
        if why:
            faults.append(Fault("cut", why))
    if kind == "test" and not _TEST_DEFINED.search(answer):
        faults.append(Fault("no_test", "the task asks for a test and the answer defines none"))
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


#: a test the answer defines, in the languages agents write tests in
_TEST_DEFINED = re.compile(
    r"\bdef\s+test\w*\s*\(|\bclass\s+Test\w*|\b(?:it|test|describe)\s*\(\s*['\"`]"
    r"|#\[test\]|\bfunc\s+Test\w*\s*\(|@Test\b|\bassert\w*\b"
)
#: words of a last line (prose, not a list item, a table or a heading) from which on it must
#: end as a sentence does (a period, a colon, a closing quote or code span …) when it ends on
#: a word of letters (a path, a number, a name in code may end a line); shorter lines may be
#: labels or terse replies. On the real answers of the shared corpus no line is flagged at 3
#: words or more (docs/benchmarks.md, "Judge quality")
LONG_SENTENCE = 4
#: words that cannot end an English sentence: prose that stops on one was cut (prepositions
#: and pronouns may: "the one to start with", "use this")
_DANGLING = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "nor",
        "but",
        "because",
        "than",
        "if",
        "your",
        "my",
        "our",
        "their",
        "into",
        "onto",
    ]
)
#: the first letters of common words that are no word themselves: "so tha", "and wit"
_BROKEN_OFF = frozenset(
    w[:n]
    for w in ("that", "with", "from", "which", "because", "their", "these", "those", "when")
    for n in range(3, len(w))
    if w[:n] not in {"the", "thes", "fro", "whe", "tho"}
)


_CODE_LINE = re.compile(r"[=(){};<>\[\]]|->|^\$ ")


def _cut_prose(
    text: str, *, sentence_end: bool = True, vocabulary: frozenset[str] = frozenset()
) -> str | None:
    """Why ``text`` (no code fence open) stops before its end (None: it ends whole).
    ``sentence_end``: a last sentence of prose must end as sentences do (not for a commit
    message, whose subject has no period); ``vocabulary``: see :func:`broken`."""
    outside = _BLOCK.sub("", text)
    raw = outside.rstrip().splitlines()[-1] if outside.strip() else ""
    last = raw.strip()
    if not last:
        return None
    # code (an unfenced file, an indented line, a line of operators) ends as code does
    code = bool(_PYTHON_START.match(text)) or raw[:1].isspace() or bool(_CODE_LINE.search(last))
    if last.count("`") % 2:
        return "an inline code span is opened and never closed: the answer is cut off"
    if last.count('"') % 2 and not last.endswith('"'):
        return "a quotation is opened and never closed: the answer is cut off"
    words = re.findall(r"[A-Za-z'-]+|\S", last)
    if len(words) >= 3 and re.fullmatch(r"[A-Za-z]+-", last.split()[-1]):
        return f"the answer stops inside a word ({last.split()[-1]!r})"
    tail = words[-1].lower() if words else ""
    if len(words) >= 3 and not last.startswith(("#", "-", "*", "|")):
        if tail in _DANGLING:
            return f"the answer stops mid-sentence, after {words[-1]!r}"
        if tail in _BROKEN_OFF:
            return f"the answer stops inside a word ({words[-1]!r})"
        if tail not in vocabulary and any(
            len(w) >= len(tail) + 2 and w.startswith(tail) for w in vocabulary if len(tail) >= 2
        ):
            return f"the answer stops inside a word ({words[-1]!r})"
        last_word = last.split()[-1]
        if (
            not code
            and sentence_end
            and len(last.split()) >= LONG_SENTENCE
            and re.fullmatch(r"[^\W\d_]+", last_word)
        ):
            return "the answer stops mid-sentence (its last sentence has no end)"
    return None


#: the data formats a parser of the standard library reads: their name and loader
_DATA: dict[str, tuple[str, Callable[[str], object]]] = {
    "json": ("JSON", json.loads),
    "toml": ("TOML", tomllib.loads),
}


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
    if lang in _DATA:
        name, load = _DATA[lang]
        try:
            load(code)
        except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError are
            return f"its {name} does not parse ({exc})"
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
