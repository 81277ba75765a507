"""Marks of memory lines: how a session's transcript shows which rules its agent loaded.

Claude Code writes the memory files it loaded into its transcript (an ``instructions``
attachment: each file's path and content), Codex the ``AGENTS.md`` instructions it sent (a
``# AGENTS.md instructions`` message). A harvester keeps, per session, not that text but a
short mark of each of its lines (:func:`memory_marks`); the wild check then tells a session
the adopted rules *reached* — observed, every rule's mark is there — from one that loaded the
agent's memory without them (a CLI run without user settings, another file), and from one
whose transcript records nothing (reach then inferred from the file being in place).
"""

from __future__ import annotations

import hashlib

#: marks kept per session at most (a huge memory file is marked by its first lines)
MAX_MARKS = 500


def rule_mark(line: str) -> str:
    """The mark of one memory line (a bullet's ``- `` and spacing and case ignored)."""
    text = " ".join(line.strip().removeprefix("- ").removeprefix("* ").split()).casefold()
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def memory_marks(text: str) -> list[str]:
    """The marks of ``text``'s non-empty lines, in order, each once (at most
    :data:`MAX_MARKS`)."""
    out: dict[str, None] = {}
    for line in text.splitlines():
        if line.strip() and len(out) < MAX_MARKS:
            out.setdefault(rule_mark(line), None)
    return list(out)
