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
    st = dict(state) if state else new_state(default_key)
    result = ParseResult(skipped=Counter())
    skipped = result.skipped
    sess = HarvestedSession(source=source, key=st["key"])
    out: dict[str, HarvestedMessage] = {}

    def add(msg: HarvestedMessage) -> HarvestedMessage:
        if not sess.started_at and msg.timestamp:
            sess.started_at = msg.timestamp
        st["n"] += 1
        out[msg.uid] = msg
        return msg

    for rec in json_records(lines, skipped, st):
        etype, data = rec.get("type"), rec.get("data")
        if not isinstance(etype, str) or not isinstance(data, dict):
            if isinstance(rec.get("role"), str):  # a bare chat message line (older builds)
                etype, data = f"{rec['role']}.message", rec
            else:
                skipped["unknown_record"] += 1
                continue
        ts = rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None
        if ts and not ts[:4].isdigit():
            ts = None
        ident = rec.get("id") if isinstance(rec.get("id"), str) and rec.get("id") else None
        side = isinstance(data.get("parentToolCallId"), str)

        if etype in ("session.start", "session.resume"):
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
        elif etype == "session.model_change":
            if isinstance(data.get("newModel"), str):
                sess.model = data["newModel"]
        elif etype == "system.message":
            if _HEADLESS_HINT in _text(data.get("content"))[:2000]:
                st["headless"] = True
            skipped["system_message"] += 1
        elif etype == "user.message":
            text = _text(data.get("content")).strip()
            if data.get("source") == "system" or data.get("role") == "system":
                skipped["injected"] += 1
                continue
            if not text:
                skipped["empty"] += 1
                continue
            if not side and not st["fp"]:
                st["fp"], st["self"] = True, SELF_MARKER in text
            uid = f"{st['key']}:{data.get('messageId') or ident or st['line']}"
            if uid in out or (data.get("messageId") is None and ident is None):
                uid = f"{st['key']}:L{st['line']}"
            st["cur"] = None
            add(
                HarvestedMessage(
                    uid=uid,
                    role="user",
                    kind="prompt",
                    timestamp=ts,
                    text=cap(clean(text), MAX_TEXT),
                    is_sidechain=side,
                )
            )
        elif etype == "assistant.message":
            text = _text(data.get("content")).strip()
            tools: list[str] = []
            for req in data.get("toolRequests") or []:
                name = req.get("name") if isinstance(req, dict) else None
                if isinstance(name, str) and name and name not in tools:
                    tools.append(name)
            if (
                isinstance(data.get("model"), str)
                and data["model"]
                and not data["model"].startswith("[")
            ):
                sess.model = data["model"]
            mid = data.get("messageId") or ident
            uid = f"{st['key']}:{mid}" if isinstance(mid, str) else f"{st['key']}:L{st['line']}"
            if uid in out:
                uid = f"{st['key']}:L{st['line']}"
            if not text and not tools:
                skipped["empty"] += 1
                continue
            st["cur"] = uid
            add(
                HarvestedMessage(
                    uid=uid,
                    role="assistant",
                    kind="answer",
                    timestamp=ts,
                    text=cap(clean(text), MAX_TEXT),
                    tool_names=tools,
                    is_sidechain=side,
                )
            )
        elif etype == "tool.execution_complete":
            res = data.get("result")
            content = res.get("content") if isinstance(res, dict) else res
            # a dict result as JSON text, whole: clean_excerpt cuts it at whitespace before it
            # redacts, so no token is kept in part (a cut at 800 characters kept 15–31 of 40)
            excerpt = (
                json.dumps(content, ensure_ascii=False)
                if isinstance(content, dict)
                else _text(content)
            )
            uid = f"{st['key']}:{ident}" if ident else f"{st['key']}:L{st['line']}"
            if uid in out:
                uid = f"{st['key']}:L{st['line']}"
            add(
                HarvestedMessage(
                    uid=uid,
                    role="user",
                    kind="tool",
                    timestamp=ts,
                    text=clean_excerpt(excerpt, TOOL_EXCERPT),
                    is_error=data.get("success") is False,
                    is_sidechain=side,
                )
            )
        elif etype in IGNORED_TYPES:
            skipped[f"ignored_type:{etype}"] += 1
        else:
            skipped[f"unknown_type:{etype}"] += 1

    if not st.get("cwd"):
        st["cwd"] = _workspace_cwd(path)
    sess.key = st["key"]
    sess.project = st.get("cwd")
    sess.messages = list(out.values())
    sess.headless, sess.self_generated = st["headless"], st["self"]
    result.sessions = [sess]
    result.state = st
    return result


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
