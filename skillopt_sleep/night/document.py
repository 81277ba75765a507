"""The trained document and its managed block.

Only the text between the two marker lines is ever changed; everything before and after is
kept byte for byte. Inside the block each rule is one ``- `` bullet line::

    <!-- skillopt-sleep:begin — managed by skillopt-sleep; edit with care -->
    - Use `pnpm` instead of `npm`.
    <!-- skillopt-sleep:end -->

A file without a block gets one appended (after a blank line). A new managed skill file is
created with a valid frontmatter (``name``, ``description``) as Claude Code and Codex expect.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

from rapidfuzz import fuzz

from skillopt_sleep.config import DocumentConfig
from skillopt_sleep.errors import DocumentError, NightError

BEGIN = "<!-- skillopt-sleep:begin — managed by skillopt-sleep; edit with care -->"
END = "<!-- skillopt-sleep:end -->"
_BEGIN_RE = re.compile(r"^<!-- skillopt-sleep:begin\b[^\n]*?-->[ \t]*(?=\r?$)", re.M)
_END_RE = re.compile(r"^<!-- skillopt-sleep:end -->[ \t]*(?=\r?$)", re.M)

SKILL_NAME = "skillopt-sleep-learned"
NEW_SKILL = f"""---
name: {SKILL_NAME}
description: Rules learned by skillopt-sleep from this user's recurring tasks and corrections. Apply them to every coding task.
---

# Learned rules

These rules were validated on the user's own recurring tasks before being adopted.

"""


def sha256_text(text: str | None) -> str:
    """Hash of a document's text; ``""`` for an absent file."""
    if text is None:
        return ""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _agent_home(agent: str, env: Mapping[str, str], home: Path) -> Path:
    if agent == "claude_code":
        return Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    if agent == "codex":
        return Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
    if agent == "copilot":  # Copilot CLI: $COPILOT_HOME, default ~/.copilot (skills/<name>/SKILL.md)
        return Path(env["COPILOT_HOME"]) if env.get("COPILOT_HOME") else home / ".copilot"
    if agent == "devin":  # Devin CLI: ~/.config/devin (Windows %APPDATA%\devin)
        if os.name == "nt" and env.get("APPDATA"):
            return Path(env["APPDATA"]) / "devin"
        return home / ".config" / "devin"
    raise NightError(
        f"a managed skill for agent {agent!r} is not supported yet; "
        "set document.kind = \"path\" with document.path"
    )


def resolve_target(
    doc: DocumentConfig, project: Path | None, env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Path:
    """The live file a night trains. Raises NightError when it cannot be determined."""
    env = os.environ if env is None else env
    home = home or Path.home()
    if doc.kind == "path":
        if not doc.path:
            raise NightError('document.kind = "path" needs document.path')
        return doc.path.expanduser().resolve()
    if doc.kind in ("claude_md", "agents_md"):
        if not project:
            raise NightError(f"document.kind = {doc.kind!r} needs a project (--project DIR)")
        return project.resolve() / ("CLAUDE.md" if doc.kind == "claude_md" else "AGENTS.md")
    return _agent_home(doc.agent, env, home) / "skills" / SKILL_NAME / "SKILL.md"


def decode_live(data: bytes, path: Path | str, *,
                fix: str = "convert it to UTF-8 or train another document") -> str:
    """The text of a live file's bytes. DocumentError (naming the first bad byte) when they
    are not UTF-8; newlines are kept exactly."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start]
        raise DocumentError(
            f"{path} is not UTF-8 text (byte 0x{bad:02x} at offset {exc.start}); {fix}"
        ) from None


def read_live(path: Path) -> str | None:
    """The live file's text, or None when absent. Newlines are kept exactly (no translation).

    Raises DocumentError when the file is not UTF-8 text or cannot be read; never writes.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DocumentError(f"cannot read {path}: {exc.strerror or exc}") from None
    return decode_live(data, path)


@dataclass
class Document:
    """A document split around its managed block: ``before + block + after`` == the text."""

    before: str
    rules: list[str]
    after: str
    had_block: bool
    newline: str = "\n"

    @classmethod
    def parse(cls, text: str | None, *, new_skill: bool = False) -> "Document":
        if text is None:
            return cls(NEW_SKILL if new_skill else "", [], "", False)
        newline = "\r\n" if "\r\n" in text else "\n"
        b, e = _BEGIN_RE.search(text), None
        if b:
            e = _END_RE.search(text, b.end())
        if not b or not e:
            return cls(text, [], "", False, newline)
        inner = text[b.end() : e.start()]
        rules = [
            line.strip()[2:].strip()
            for line in inner.splitlines()
            if line.strip().startswith("- ") and line.strip()[2:].strip()
        ]
        return cls(text[: b.start()], rules, text[e.end() :], True, newline)

    def render(self, rules: list[str] | None = None) -> str:
        rules = self.rules if rules is None else rules
        nl = self.newline
        body = BEGIN + nl + "".join(f"- {r}{nl}" for r in rules) + END
        if self.had_block:
            return self.before + body + self.after
        if not rules:
            return self.before
        return self.before + _separator(self.before, nl) + body + nl


def _separator(before: str, nl: str) -> str:
    """What goes between ``before`` and an appended block so that exactly one blank line
    separates them: ends the last line if it is unterminated, then adds the blank line unless
    ``before`` already ends with one. Whatever line ending ``before`` already has (a CRLF file's
    last line may end in a bare LF) counts as one; only added line endings use ``nl``."""
    if not before:
        return ""
    if not before.endswith("\n"):
        return nl + nl
    last_line_start = before[:-1].removesuffix("\r")
    return "" if last_line_start.endswith("\n") else nl


@dataclass
class Edit:
    """One proposed change to the rules. ``op``: add | delete | replace."""

    op: Literal["add", "delete", "replace"]
    text: str = ""
    old: str = ""
    rationale: str = ""
    origin: str = "reflect"
    status: str = "proposed"  # applied | rejected | unmatched | unverified
    reason: str = ""
    val_before: float | None = None
    val_after: float | None = None
    epoch: int = 0
    batch: int = 0
    id: int | None = field(default=None, compare=False)

    def describe(self) -> str:
        if self.op == "add":
            return f"add: {self.text}"
        if self.op == "delete":
            return f"delete: {self.old}"
        return f"replace: {self.old} -> {self.text}"


def _clean_rule(text: str) -> str:
    text = " ".join(text.replace("\r", " ").replace("\n", " ").split())
    return text.removeprefix("- ").strip()


def find_rule(rules: list[str], old: str) -> int | None:
    """Index of the rule ``old`` refers to: exact, then case/space-insensitive, then fuzzy (>=90)."""
    target = _clean_rule(old)
    if target in rules:
        return rules.index(target)
    low = [r.casefold() for r in rules]
    if target.casefold() in low:
        return low.index(target.casefold())
    best, best_score = None, 0.0
    for i, r in enumerate(rules):
        score = fuzz.ratio(r.casefold(), target.casefold())
        if score > best_score:
            best, best_score = i, score
    return best if best_score >= 90 else None


def apply_edit(rules: list[str], edit: Edit, *, max_rules: int = 60) -> list[str] | None:
    """Return the new rules, or None when the edit does not apply (unmatched / no-op)."""
    if edit.op == "add":
        text = _clean_rule(edit.text)
        if not text or find_rule(rules, text) is not None or len(rules) >= max_rules:
            return None
        return rules + [text]
    idx = find_rule(rules, edit.old) if edit.old else None
    if idx is None:
        return None
    if edit.op == "delete":
        return rules[:idx] + rules[idx + 1 :]
    text = _clean_rule(edit.text)
    if not text or text == rules[idx]:
        return None
    return rules[:idx] + [text] + rules[idx + 1 :]


def parse_edits(data: dict, *, origin: str = "reflect") -> list[Edit]:
    """Edits from an optimizer answer ``{"edits": [...]}``; malformed items are dropped."""
    out: list[Edit] = []
    for item in data.get("edits") or []:
        if not isinstance(item, dict) or item.get("op") not in ("add", "delete", "replace"):
            continue
        out.append(
            Edit(
                op=item["op"],
                text=str(item.get("text") or ""),
                old=str(item.get("old") or ""),
                rationale=str(item.get("rationale") or "")[:500],
                origin=origin,
            )
        )
    return out
