"""Pi coding agent sessions (npm ``@mariozechner/pi-coding-agent``; format checked against the
files pi 0.73.1 writes, docs/sources.md): ``<pi home>/sessions/--<cwd>--/<ISO time>_<uuid>.jsonl``
with ``<pi home>`` = ``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``, or
``$PI_CODING_AGENT_SESSION_DIR`` instead of ``<pi home>/sessions``. Override with
``[sources.pi] roots = [...]``.

One append-only JSONL file per session (format version 3):

* the first line is the header ``{"type": "session", "version": 3, "id": <uuid>, "timestamp",
  "cwd", "parentSession"?}``: the key (``id``, else the uuid in the file name) and the project
  (``cwd``);
* ``{"type": "message", "id", "parentId", "timestamp", "message": {...}}`` entries carry the
  conversation (the entries form a tree through ``parentId``; an abandoned branch stays in the
  file and is read like the rest). ``message.role``: ``user`` (``content`` a string or
  ``text`` / ``image`` blocks) → a prompt; ``assistant`` (``text`` / ``thinking`` /
  ``toolCall`` blocks, ``model``, ``stopReason``) → an answer with its tool names (an
  assistant message that failed with no content, ``stopReason`` ``error`` / ``aborted``, is
  counted as ``failed_answer``); ``toolResult`` (``toolName``, ``content``, ``isError``) → a
  ``tool`` excerpt; ``bashExecution`` (a ``!command`` the user ran) → a ``tool`` excerpt of
  its output; ``custom`` (an extension's injected message), ``branchSummary`` and
  ``compactionSummary`` are injected context: dropped, counted as ``injected``;
* ``model_change`` sets the session's model; ``thinking_level_change``, ``compaction``,
  ``branch_summary``, ``custom``, ``label``, ``session_info`` … are counted as
  ``ignored_type:<type>``.

uids are ``<session id>:<entry id>``. A session whose first prompt carries
:data:`SELF_MARKER` is ``self_generated`` (a replay; the pi backend runs with
``--no-session`` and writes none). Pi does not record whether a run was ``pi -p``: ``headless``
stays False.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from skillopt_sleep.models import HarvestedMessage, HarvestedSession
from skillopt_sleep.redact import clean, clean_excerpt
from skillopt_sleep.sources.base import SELF_MARKER, ParseResult, Source
from skillopt_sleep.sources.common import as_dict, cap, json_records

MAX_TEXT = 20_000
TOOL_EXCERPT = 400
_UUID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", re.I)
_INJECTED_ROLES = ("custom", "branchSummary", "compactionSummary")


def _text(content: Any) -> str:
    """The text of a message's ``content``: a string, or its ``text`` blocks joined."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            parts.append(block["text"])
    return "\n".join(parts)


class PiSource(Source):
    """Harvester for Pi's session JSONL files (see module doc)."""

    name = "pi"
    format_version = "pi 0.73.1 session files (format version 3)"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        from skillopt_sleep.agents import agent_of_source

        return [agent_of_source(self.name).data_dir(env, home)]

    def discover(self, root: Path) -> Iterator[Path]:
        """Every ``*.jsonl`` below ``root`` (one folder per working directory), sorted."""
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(".jsonl"):
                    yield Path(dirpath) / name

    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        st = dict(state) if state else {}
        if "key" not in st:
            m = _UUID.search(path.name)
            st.update(key=m.group(1) if m else path.stem, line=0, fp=False, self=False)
        result = ParseResult(skipped=Counter())
        sess = HarvestedSession(source=self.name, key=st["key"])
        messages: list[HarvestedMessage] = []
        for rec in json_records(lines, result.skipped, st):
            try:
                self._record(rec, st, sess, messages, result.skipped)
            except (TypeError, ValueError, AttributeError) as exc:  # a field of an odd type
                result.skipped[f"malformed:{type(exc).__name__}"] += 1
        sess.key = st["key"]
        sess.project = sess.project or st.get("cwd")
        sess.started_at = sess.started_at or st.get("started")
        sess.self_generated = st["self"]
        sess.messages = messages
        result.sessions = [sess]
        result.state = st
        return result

    def _record(
        self,
        rec: dict,
        st: dict,
        sess: HarvestedSession,
        out: list[HarvestedMessage],
        skipped: Counter,
    ) -> None:
        rtype = rec.get("type")
        ts = rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None
        if rtype == "session":
            if isinstance(rec.get("id"), str) and rec["id"] and st["line"] <= 1:
                st["key"] = rec["id"]
            if isinstance(rec.get("cwd"), str) and rec["cwd"]:
                st["cwd"] = rec["cwd"]
            if ts:
                st["started"] = ts
            return
        if rtype == "model_change":
            if isinstance(rec.get("modelId"), str) and rec["modelId"]:
                sess.model = rec["modelId"]
            return
        if rtype != "message":
            skipped[f"ignored_type:{rtype}"] += 1
            return
        msg = as_dict(rec.get("message"))
        role = msg.get("role")
        eid = rec.get("id")
        if not isinstance(eid, str) or not eid:
            skipped["no_id"] += 1
            return
        uid = f"{st['key']}:{eid}"
        if role == "user":
            text = _text(msg.get("content")).strip()
            if not text:
                skipped["empty"] += 1
                return
            if not st["fp"]:
                st["fp"], st["self"] = True, SELF_MARKER in text
            out.append(
                HarvestedMessage(
                    uid=uid,
                    role="user",
                    kind="prompt",
                    timestamp=ts,
                    text=cap(clean(text), MAX_TEXT),
                )
            )
        elif role == "assistant":
            raw = msg.get("content")
            content: list[Any] = raw if isinstance(raw, list) else []
            tools: list[str] = []
            for block in content:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    name = block.get("name")
                    if isinstance(name, str) and name and name not in tools:
                        tools.append(name)
            text = _text(content).strip()
            if isinstance(msg.get("model"), str) and msg["model"]:
                sess.model = msg["model"]
            if not text and not tools:
                failed = msg.get("stopReason") in ("error", "aborted")
                skipped["failed_answer" if failed else "empty"] += 1
                return
            out.append(
                HarvestedMessage(
                    uid=uid,
                    role="assistant",
                    kind="answer",
                    timestamp=ts,
                    text=cap(clean(text), MAX_TEXT),
                    tool_names=tools,
                )
            )
        elif role == "toolResult":
            out.append(
                HarvestedMessage(
                    uid=uid,
                    role="user",
                    kind="tool",
                    timestamp=ts,
                    is_error=bool(msg.get("isError")),
                    text=clean_excerpt(_text(msg.get("content")), TOOL_EXCERPT),
                )
            )
        elif role == "bashExecution":
            code = msg.get("exitCode")
            output = msg.get("output")
            output = output if isinstance(output, str) else ""
            out.append(
                HarvestedMessage(
                    uid=uid,
                    role="user",
                    kind="tool",
                    timestamp=ts,
                    is_error=isinstance(code, int) and code != 0,
                    text=clean_excerpt(output, TOOL_EXCERPT),
                )
            )
        elif role in _INJECTED_ROLES:
            skipped["injected"] += 1
        else:
            skipped[f"unknown_role:{role}"] += 1
