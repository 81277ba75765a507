"""Cursor agent transcripts: ``~/.cursor/projects/<slug>/agent-transcripts/<id>/<id>.jsonl``
(also flat ``agent-transcripts/<id>.jsonl``), sub-agents under ``<id>/subagents/<sub>.jsonl``
(corpus SCHEMAS.md §5). ``CURSOR_CONFIG_DIR`` replaces ``~/.cursor``; override with
``[sources.cursor] roots = [...]``.

Lines are ``{role, message: {content: [text | tool_use | tool_result | thinking]}}`` with no
ids, timestamps or usage. Append-only, so read by byte offset; uids are
``<session>:<file stem>:<line number>``.

* ``prompt`` — the text inside ``<user_query>…</user_query>``; text outside it (attached
  files, rules, reminders Cursor adds) is injected context and dropped (``injected``). A user
  text with no ``<user_query>`` tag at all (older builds) is kept whole. Only what the user
  typed counts: every other tagged block (``<attached_files>…</attached_files>`` …) is
  removed first, with any ``<user_query>`` a file inside it carries, and of what is left the
  last ``<user_query>`` (where Cursor puts the typed words) is taken.
* ``answer`` — assistant ``text`` blocks with ``tool_use`` names; ``thinking`` is dropped.
* ``tool`` — ``tool_result`` blocks (excerpt, ``is_error``).

Session key = the transcript id (the sub-agent's parent id for ``subagents/`` files, whose
messages are ``is_sidechain``). Project: the transcript names no folder, so it is decoded from
the ``<slug>`` (the workspace path with ``/`` → ``-``): the existing directory the slug
resolves to on this machine, else ``/`` + the slug with ``-`` read as ``/``. started_at is the
file's mtime at first read (lines carry no time).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillopt_sleep.models import HarvestedMessage, HarvestedSession
from skillopt_sleep.sources.base import SELF_MARKER, ParseResult, Source
from skillopt_sleep.sources.common import (
    answer_message,
    json_records,
    prompt_message,
    tool_message,
)

_QUERY = re.compile(r"<user_query>\s*([\s\S]*?)\s*(?:</user_query>|$)")


def decode_slug(slug: str) -> str:
    """Best effort: the directory a Cursor project slug stands for (see module doc)."""
    if re.match(r"^[A-Za-z]-", slug) and os.name == "nt":  # c-Users-me-proj
        return slug[0] + ":\\" + slug[2:].replace("-", "\\")
    parts = [p for p in slug.split("-") if p]
    path, i = Path("/"), 0
    while i < len(parts):  # greedy: the longest dash-joined name that exists
        for j in range(len(parts), i, -1):
            cand = path / "-".join(parts[i:j])
            if cand.is_dir():
                path, i = cand, j
                break
        else:
            return str(path / "/".join(parts[i:])) if str(path) != "/" else "/" + "/".join(parts)
    return str(path)


_CONTEXT_BLOCK = re.compile(r"<((?!user_query\b)[A-Za-z_][\w.-]*)\b[^<>]*>[\s\S]*?</\1\s*>")


def user_query(text: str) -> str | None:
    """The user's words of a Cursor user text, or None when it is only injected context
    (attached files and other tagged blocks never count, whatever they hold)."""
    typed = text
    for _ in range(50):  # nested blocks: outermost first, as often as they nest
        stripped = _CONTEXT_BLOCK.sub("", typed)
        if stripped == typed:
            break
        typed = stripped
    found = [q.strip() for q in _QUERY.findall(typed) if q.strip()]
    if found:
        return found[-1]
    if _QUERY.search(text):
        return None  # only inside injected context
    text = text.strip()
    if not text or text.startswith("<"):
        return None
    return text


def _blocks(rec: dict) -> list:
    msg = rec.get("message")
    content = msg.get("content") if isinstance(msg, dict) else rec.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "")
            for b in content
            if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


class CursorSource(Source):
    """Harvester for Cursor agent-transcript JSONL files (see module doc)."""

    name = "cursor"
    format_version = "Cursor agent-transcripts JSONL (synthetic, version not recorded)"
    mode = "jsonl"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        from skillopt_sleep.agents import agent_of_source

        return [agent_of_source(self.name).home(env, home) / "projects"]

    def discover(self, root: Path) -> Iterator[Path]:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            if "agent-transcripts" not in Path(dirpath).parts:
                continue
            for name in sorted(filenames):
                if name.endswith(".jsonl"):
                    yield Path(dirpath) / name

    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        side = path.parent.name == "subagents"
        st = dict(state or _first_state(path, side))
        result = ParseResult(skipped=Counter())
        sess = HarvestedSession(
            source=self.name, key=st["key"], project=st["project"], started_at=st["started"]
        )
        prefix = f"{st['key']}:{path.stem}"
        for rec in json_records(lines, result.skipped, st):
            role = rec.get("role")
            if role is None and isinstance(rec.get("message"), dict):
                role = rec["message"].get("role")
            uid = f"{prefix}:{st['line']}"
            if role == "user":
                sess.messages += _user(rec, uid, st, side, result.skipped)
            elif role == "assistant":
                sess.messages += _assistant(rec, uid, st["started"], side, result.skipped)
            else:
                result.skipped[f"unknown_role:{role}"] += 1
        sess.self_generated = st["self"]
        result.sessions = [sess]
        result.state = st
        return result


def _first_state(path: Path, side: bool) -> dict[str, Any]:
    """The state of a file not read before: its session key, project and start time."""
    key = path.parent.parent.name if side else path.stem
    parts = path.parts
    slug = parts[parts.index("agent-transcripts") - 1] if "agent-transcripts" in parts[1:] else None
    try:
        started = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
    except OSError:
        started = None
    return {
        "key": key,
        "line": 0,
        "fp": False,
        "self": False,
        "started": started,
        "project": decode_slug(slug) if slug else None,
    }


def _user(
    rec: dict[str, Any], uid: str, st: dict[str, Any], side: bool, skipped: Counter
) -> list[HarvestedMessage]:
    """A user record: its tool results (one excerpt) and its prompt, in that order."""
    ts = st["started"]
    texts, results = [], []
    for b in _blocks(rec):
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif b.get("type") == "tool_result":
            results.append((_result_text(b.get("content")), bool(b.get("is_error"))))
        else:
            skipped[f"ignored_block:{b.get('type')}"] += 1
    out = []
    if results:
        excerpt = "\n".join(r[0] for r in results)
        failed = any(r[1] for r in results)
        out.append(tool_message(f"{uid}:r", ts, excerpt, is_error=failed, side=side))
    if not texts:
        if not results:
            skipped["empty"] += 1
        return out
    prompt = user_query("\n".join(texts))
    if prompt is None:
        skipped["injected"] += 1
        return out
    if not side and not st["fp"]:
        st["fp"], st["self"] = True, SELF_MARKER in prompt
    return [*out, prompt_message(uid, ts, prompt, side=side)]


def _assistant(
    rec: dict[str, Any], uid: str, ts: str | None, side: bool, skipped: Counter
) -> list[HarvestedMessage]:
    """An assistant record: its answer with the tools it called (none when empty)."""
    texts: list[str] = []
    tools: list[str] = []
    for b in _blocks(rec):
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif b.get("type") == "tool_use" and isinstance(b.get("name"), str):
            if b["name"] not in tools:
                tools.append(b["name"])
        else:
            skipped[f"ignored_block:{b.get('type')}"] += 1
    text = "\n".join(t.strip() for t in texts if t.strip())
    if not text and not tools:
        skipped["empty"] += 1
        return []
    return [answer_message(uid, ts, text, tools, side=side)]
