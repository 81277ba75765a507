"""The artifact a task asks for, and where it stands in an answer.

A user who asks for a commit message judges the message, not the sentence the agent put
before it; a check such as ``max_chars 50`` or ``imperative`` therefore applies to the
artifact, never to the whole answer. :func:`kind_of` tells a task's artifact from its request
(``commit_message``, ``command``, ``test`` or ``answer``: the whole answer), and
:func:`extract` finds it in an answer:

* ``commit_message`` — the message of a ``git commit -m "…"`` in the answer; else the first
  fenced block; else the answer after a one-line preamble that ends in a colon ("Here is a
  commit message:"), or after a label on its own line ("Commit message: Add …"). Quotes
  and backticks around it are taken off. Its form checks
  (:data:`SUBJECT_CHECKS`: ``imperative``, ``max_chars``…) judge the subject line, as ``git
  log --oneline`` shows it; the others (``contains``…) the whole message.
* ``command`` — the first fenced block, else the first inline `` `code` ``, else the answer.
* ``test`` — the whole answer (a test file, fenced or not), which must define a test
  (:mod:`~skillopt_sleep.mining.integrity`, ``no_test``).
* ``answer`` — the whole answer.

An agent that acted with its tools is judged on what it did (:func:`acted`): the test file it
wrote, the message of the ``git commit`` it ran, before its text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_COMMIT = re.compile(
    r"\bcommit\s+(?:message|msg|subject|title)s?\b|\bmessage\s+for\s+(?:the\s+|this\s+)?commit\b",
    re.I,
)
_COMMAND = re.compile(r"\b(?:command|one-liner)\b|\banswer with one command\b", re.I)
#: a request to write a test (in English, German, Spanish and French); "run the tests" is not
_TEST = re.compile(
    r"\b(?:write|add|create|generate|make|cover|schreib\w*|füge|erstelle|escrib\w*|añad\w*"
    r"|crea|écri\w*|ajout\w*)\b[^.?!\n]{0,40}?\b(?:unit[\s-]+)?(?:tests?|pruebas?|testfall)\b",
    re.I,
)
_GIT_COMMIT_M = re.compile(r"""git\s+commit\b[^\n]*?\s-\w*m\s*(["'])(.+?)\1""", re.S)
#: a label before the message on its own line ("Commit message: …", "Suggested subject: …")
_LABEL = re.compile(
    r"(?i)[\w ]{0,20}\b(?:commit(?:\s+message)?|message|subject|title)\s*:\s+(?=\S)"
)
_BLOCK = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")


def kind_of(intent: str) -> str:
    """The artifact the request ``intent`` asks for (see the module doc)."""
    if _COMMIT.search(intent):
        return "commit_message"
    if _TEST.search(intent):
        return "test"
    if _COMMAND.search(intent):
        return "command"
    return "answer"


#: the checks of a commit message that judge its subject line
SUBJECT_CHECKS = frozenset({"imperative", "max_chars", "min_chars", "max_words", "no_emoji"})


def text_for(check_kind: str, kind: str, answer: str) -> str:
    """What a check of ``check_kind`` judges in ``answer`` when the task asks for ``kind``."""
    return judged_text(kind, extract(kind, answer))(check_kind)


def judged_text(kind: str, found: str) -> Callable[[str], str]:
    """``text_for`` of every check of one answer whose artifact (:func:`extract`) is
    ``found``: check kind → the text it judges (a commit message's form checks its subject
    line)."""
    subject = subject_of(found) if kind == "commit_message" else found
    return lambda check_kind: subject if check_kind in SUBJECT_CHECKS else found


def extract(kind: str, answer: str) -> str:
    """The artifact of ``kind`` in ``answer`` (the whole answer when none is found)."""
    if kind == "commit_message":
        return _message(answer).strip().strip("`'\"").strip()
    if kind == "command":
        block = _BLOCK.search(answer)
        if block:
            return block.group(1).strip()
        inline = _INLINE.search(answer)
        return inline.group(1).strip() if inline else answer.strip()
    return answer


#: a file name that holds tests (``test_x.py``, ``x_test.go``, ``x.test.ts``, ``x.spec.js``,
#: anything in a ``tests`` / ``__tests__`` / ``spec`` folder)
_TEST_FILE = re.compile(
    r"(?:^|/)(?:tests?|__tests__|specs?)/|(?:^|/)test_[^/]*$|[^/]*(?:_test|\.test|\.spec|Test)\.\w+$"
)


def acted(kind: str, answer: str, files: dict[str, str], commands: list[str]) -> str | None:
    """The artifact of ``kind`` in what an agent *did*, when it did it (None: judge the
    answer): a test file it wrote (fenced with its extension, so a file cut off fails as
    an answer cut off does), the message of a ``git commit -m`` it ran."""
    if kind == "test":
        tests = [p for p in files if _TEST_FILE.search(p) and files[p].strip()]
        if tests:
            return "\n\n".join(
                f"```{p.rsplit('.', 1)[-1] if '.' in p else ''}\n{files[p].rstrip()}\n```"
                for p in tests
            )
    if kind == "commit_message":
        for command in reversed(commands):
            m = _GIT_COMMIT_M.search(command)
            if m:
                return m.group(2)
    return None


def _message(answer: str) -> str:
    m = _GIT_COMMIT_M.search(answer)
    if m:
        return m.group(2)
    block = _BLOCK.search(answer)
    if block:
        return block.group(1)
    lines = answer.strip().splitlines()
    if len(lines) > 1 and lines[0].rstrip().endswith(":"):
        return "\n".join(lines[1:])
    labelled = _LABEL.match(answer.strip())
    if labelled:  # "Commit message: Add retries …"
        return answer.strip()[labelled.end() :]
    return answer


def subject_of(message: str) -> str:
    """The first non-empty line, without the quotes or backticks around it."""
    for line in message.strip().splitlines():
        line = line.strip()
        if line:
            return line.strip("`'\"").strip()
    return ""


# --- task families: what a rule learned from a task is scoped to


@dataclass(frozen=True)
class Family:
    """A task family: the kind of request a rule learned from it applies to. ``key``
    compares families; ``phrase`` is what a scoped rule says to the agent ("When writing a
    commit message: …", :func:`~skillopt_sleep.delivery.document.scoped`)."""

    key: str
    phrase: str


#: families told by the request's words, in order (after the artifact kinds commit message
#: and test): (key, phrase, pattern)
_FAMILIES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    (
        "install",
        "installing dependencies or adding packages",
        re.compile(
            r"\b(?:install\w*|dependenc\w*|deps)\b"
            r"|\badd\b[^.?!\n]{0,30}?\b(?:package|library|module)s?\b",
            re.I,
        ),
    ),
    (
        "run_tests",
        "running the tests",
        re.compile(r"\b(?:run\w*|execute)\b[^.?!\n]{0,30}?\b(?:tests?|specs?|suite)\b", re.I),
    ),
    (
        "lint",
        "linting or formatting code",
        re.compile(r"\b(?:lint\w*|format(?:ter|ting)?)\b", re.I),
    ),
    ("review", "reviewing code", re.compile(r"\breview\w*\b", re.I)),
    (
        "docs",
        "writing documentation",
        re.compile(r"\b(?:docstrings?|readme|documentation|document\s+(?:the|this))\b", re.I),
    ),
)
_WORDS = re.compile(r"[^\W_][\w.-]*")
#: words a request's own family phrase leaves out
_FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "my",
        "our",
        "your",
        "me",
        "us",
        "to",
        "of",
        "for",
        "in",
        "on",
        "at",
        "with",
        "and",
        "or",
        "please",
        "can",
        "could",
        "would",
        "you",
        "i",
        "we",
        "it",
        "is",
        "are",
        "be",
        "do",
    ]
)


def family_of(intent: str) -> Family:
    """The family of the request ``intent``: its artifact (a commit message, a test), else
    what its words are about (:data:`_FAMILIES`), else a shell command, else the request
    itself (its first content words: two requests of one task share them)."""
    kind = kind_of(intent)
    if kind == "commit_message":
        return Family("commit_message", "writing a commit message")
    if kind == "test":
        return Family("test", "writing tests")
    for key, phrase, pattern in _FAMILIES:
        if pattern.search(intent):
            return Family(key, phrase)
    if kind == "command":
        return Family("command", "giving a shell command")
    words = [w for w in _WORDS.findall(intent.lower()) if w not in _FILLER][:5]
    said = " ".join(words) or "this request"
    return Family("request:" + said, f'asked "{said}"')
