"""The ``copilot-agent`` event envelope (corpus SCHEMAS.md §3), shared by two harvesters: GitHub
Copilot CLI writes it to ``session-state/<id>/events.jsonl`` (:mod:`.copilot_cli`) and VS Code
hands it to hooks as an agent transcript (:mod:`.copilot_vscode`). Not a source itself.

Each line is one event ``{type, data, id, timestamp, parentId}``. What is kept:

* ``prompt`` — ``user.message`` ``data.content`` (what the user typed). ``transformedContent``
  (the same text with injected ``<current_datetime>``/attachments context) and
  ``system.message`` events (the system prompt) are never prompts (counted as ``injected``
  / ``system_message``).
* ``answer`` — ``assistant.message`` ``data.content`` with the names of its ``toolRequests``;
  uid = ``data.messageId``. Sub-agent messages (``parentToolCallId``) are ``is_sidechain``.
* ``tool`` — ``tool.execution_complete``: an excerpt of ``result.content``, ``is_error`` when
  ``success`` is false.

Known event types that carry nothing to mine (turn markers, usage, hooks, reasoning, …) are
counted as ``ignored_type:<type>``; types this parser does not know as ``unknown_type:<type>``,
so a schema drift shows up in the accounting while the known events are still harvested.

Session key = ``session.start`` ``data.sessionId`` (else the folder / file name); project =
``data.context.cwd`` of ``session.start``/``session.resume`` (else ``cwd:`` of the adjacent
``workspace.yaml``). ``headless``: the system message says the CLI runs in non-interactive
mode (what ``copilot -p`` writes). ``self_generated``: the first prompt contains
:data:`~skillopt_sleep.sources.base.SELF_MARKER`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skillopt_sleep.models import HarvestedMessage, HarvestedSession
from skillopt_sleep.redact import clean, clean_excerpt
from skillopt_sleep.sources.base import SELF_MARKER, ParseResult
from skillopt_sleep.sources.common import cap, json_records, looks_like_path, read_regular

MAX_TEXT = 20_000
TOOL_EXCERPT = 400

#: event types that are understood but carry no prompt, answer or tool result
IGNORED_TYPES = frozenset(
    {
        "assistant.turn_start",
        "assistant.turn_end",
        "assistant.reasoning",
        "assistant.usage",
        "tool.execution_start",
        "tool.execution_partial_result",
        "tool.user_requested",
        "session.info",
        "session.error",
        "session.warning",
        "session.usage_record",
        "session.usage_checkpoint",
        "session.shutdown",
        "session.truncation",
        "session.compaction_start",
        "session.compaction_complete",
        "session.auto_mode_resolved",
        "session.idle",
        "session.handoff",
        "session.context_changed",
        "session.title_changed",
        "session.snapshot_rewind",
        "hook.start",
        "hook.end",
        "abort",
        "subagent.started",
        "subagent.completed",
        "subagent.failed",
        "subagent.selected",
        "system.notification",
        "assistant.intent",
        "assistant.message_delta",
        "pending_messages.modified",
        "session.plan_changed",
        "session.workspace_file_changed",
    }
)
_HEADLESS_HINT = "non-interactive mode"
_WS_CWD = re.compile(r"^cwd:\s*(.+?)\s*$", re.M)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        return "\n".join(
            p.get("text", "")
            for p in value
            if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def new_state(key: str) -> dict:
    return {
        "key": key,
        "line": 0,
        "n": 0,
        "fp": False,
        "self": False,
        "headless": False,
        "cwd": None,
        "cur": None,
    }


def parse_events(
    source: str, path: Path, lines: Iterable[bytes], state: dict, default_key: str
) -> ParseResult:
    """Parse ``copilot-agent`` event lines (see the module doc) into one session."""
    return _EventParser(source, state, default_key).run(path, lines)


class _EventParser:
    """One parse of an event stream: the session, its messages by uid, the resumable state
    ``st`` and the skip counts; a method per kind of event."""

    def __init__(self, source: str, state: dict, default_key: str) -> None:
        self.st = dict(state) if state else new_state(default_key)
        self.result = ParseResult(skipped=Counter())
        self.skipped = self.result.skipped
        self.sess = HarvestedSession(source=source, key=self.st["key"])
        self.out: dict[str, HarvestedMessage] = {}

    def run(self, path: Path, lines: Iterable[bytes]) -> ParseResult:
        st, sess = self.st, self.sess
        for rec in json_records(lines, self.skipped, st):
            self.record(rec)
        if not st.get("cwd"):
            st["cwd"] = _workspace_cwd(path)
        sess.key = st["key"]
        sess.project = st.get("cwd")
        sess.messages = list(self.out.values())
        sess.headless, sess.self_generated = st["headless"], st["self"]
        self.result.sessions = [sess]
        self.result.state = st
        return self.result

    def record(self, rec: dict[str, Any]) -> None:
        etype, data = rec.get("type"), rec.get("data")
        if not isinstance(etype, str) or not isinstance(data, dict):
            if isinstance(rec.get("role"), str):  # a bare chat message line (older builds)
                etype, data = f"{rec['role']}.message", rec
            else:
                self.skipped["unknown_record"] += 1
                return
        ts = rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None
        if ts and not ts[:4].isdigit():
            ts = None
        ident = rec.get("id") if isinstance(rec.get("id"), str) and rec.get("id") else None
        if etype in ("session.start", "session.resume"):
            self.session_start(etype, data, ts)
        elif etype == "session.model_change":
            if isinstance(data.get("newModel"), str):
                self.sess.model = data["newModel"]
        elif etype == "system.message":
            if _HEADLESS_HINT in _text(data.get("content"))[:2000]:
                self.st["headless"] = True
            self.skipped["system_message"] += 1
        elif etype == "user.message":
            self.prompt(data, ts, ident)
        elif etype == "assistant.message":
            self.answer(data, ts, ident)
        elif etype == "tool.execution_complete":
            self.tool(data, ts, ident)
        elif etype in IGNORED_TYPES:
            self.skipped[f"ignored_type:{etype}"] += 1
        else:
            self.skipped[f"unknown_type:{etype}"] += 1

    def add(self, msg: HarvestedMessage) -> None:
        if not self.sess.started_at and msg.timestamp:
            self.sess.started_at = msg.timestamp
        self.st["n"] += 1
        self.out[msg.uid] = msg

    def uid(self, ident: Any) -> str:
        """``<key>:<ident>``; the line number (``<key>:L<line>``) for no ident or one taken."""
        uid = f"{self.st['key']}:{ident}" if ident is not None else ""
        return uid if uid and uid not in self.out else f"{self.st['key']}:L{self.st['line']}"

    def session_start(self, etype: str, data: dict[str, Any], ts: str | None) -> None:
        st, sess = self.st, self.sess
        sid = data.get("sessionId")
        if etype == "session.start" and isinstance(sid, str) and sid and st["n"] == 0:
            st["key"] = sid
        ctx = data.get("context")
        if isinstance(ctx, dict) and looks_like_path(ctx.get("cwd")):
            st["cwd"] = ctx["cwd"]
        start = data.get("startTime") or ts
        if etype == "session.start" and isinstance(start, str) and start[:4].isdigit():
            sess.started_at = start
        if isinstance(data.get("copilotVersion"), str):
            sess.agent_version = data["copilotVersion"]
        model = data.get("selectedModel")
        if isinstance(model, str) and model and not model.startswith("["):
            sess.model = model

    def prompt(self, data: dict[str, Any], ts: str | None, ident: str | None) -> None:
        st = self.st
        side = isinstance(data.get("parentToolCallId"), str)
        text = _text(data.get("content")).strip()
        if data.get("source") == "system" or data.get("role") == "system":
            self.skipped["injected"] += 1
            return
        if not text:
            self.skipped["empty"] += 1
            return
        if not side and not st["fp"]:
            st["fp"], st["self"] = True, SELF_MARKER in text
        no_id = data.get("messageId") is None and ident is None
        st["cur"] = None
        self.add(
            HarvestedMessage(
                uid=self.uid(None if no_id else data.get("messageId") or ident or st["line"]),
                role="user",
                kind="prompt",
                timestamp=ts,
                text=cap(clean(text), MAX_TEXT),
                is_sidechain=side,
            )
        )

    def answer(self, data: dict[str, Any], ts: str | None, ident: str | None) -> None:
        text = _text(data.get("content")).strip()
        tools: list[str] = []
        for req in data.get("toolRequests") or []:
            name = req.get("name") if isinstance(req, dict) else None
            if isinstance(name, str) and name and name not in tools:
                tools.append(name)
        model = data.get("model")
        if isinstance(model, str) and model and not model.startswith("["):
            self.sess.model = model
        mid = data.get("messageId") or ident
        uid = self.uid(mid if isinstance(mid, str) else None)
        if not text and not tools:
            self.skipped["empty"] += 1
            return
        self.st["cur"] = uid
        self.add(
            HarvestedMessage(
                uid=uid,
                role="assistant",
                kind="answer",
                timestamp=ts,
                text=cap(clean(text), MAX_TEXT),
                tool_names=tools,
                is_sidechain=isinstance(data.get("parentToolCallId"), str),
            )
        )

    def tool(self, data: dict[str, Any], ts: str | None, ident: str | None) -> None:
        res = data.get("result")
        content = res.get("content") if isinstance(res, dict) else res
        # a dict result as JSON text, whole: clean_excerpt cuts it at whitespace before it
        # redacts, so no token is kept in part (a cut at 800 characters kept 15–31 of 40)
        excerpt = (
            json.dumps(content, ensure_ascii=False) if isinstance(content, dict) else _text(content)
        )
        self.add(
            HarvestedMessage(
                uid=self.uid(ident),
                role="user",
                kind="tool",
                timestamp=ts,
                text=clean_excerpt(excerpt, TOOL_EXCERPT),
                is_error=data.get("success") is False,
                is_sidechain=isinstance(data.get("parentToolCallId"), str),
            )
        )


def _workspace_cwd(path: Path) -> str | None:
    """``cwd:`` of the ``workspace.yaml`` next to ``events.jsonl`` (read-only, small)."""
    ws = path.parent / "workspace.yaml"
    if path.name != "events.jsonl" or not ws.is_file():
        return None
    try:
        m = _WS_CWD.search(read_regular(ws, 1024 * 1024)[:20_000].decode("utf-8", "replace"))
    except OSError:
        return None
    value = m.group(1).strip().strip("'\"") if m else None
    return value if looks_like_path(value) else None
