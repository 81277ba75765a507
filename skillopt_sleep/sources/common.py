"""Helpers every harvester may use. Sources import these (and :mod:`.base`), never each other."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillopt_sleep.models import HarvestedMessage, HarvestedSession
from skillopt_sleep.redact import clean, clean_excerpt, decode
from skillopt_sleep.sources.base import SELF_MARKER, ParseResult


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else a new empty dict (any field of a log record may be
    missing or of another type than expected)."""
    return value if isinstance(value, dict) else {}


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with ``…`` appended when it was cut."""
    return text if len(text) <= limit else text[:limit] + "…"


def looks_like_path(value: Any) -> bool:
    """An absolute POSIX / Windows path or ``~`` path (not a placeholder like "[trimmed]")."""
    return isinstance(value, str) and bool(re.match(r"^(?:/|~|[A-Za-z]:[\\/]|\\\\)", value))


def ms_to_iso(value: Any) -> str | None:
    """Epoch milliseconds (or seconds) to ISO 8601 UTC."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    secs = value / 1000 if value > 1e11 else value
    try:
        return (
            datetime.fromtimestamp(secs, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )
    except (OverflowError, OSError, ValueError):
        return None


#: deepest JSON nesting a record may have; deeper records are skipped as ``too_deep``
MAX_DEPTH = 256
#: a ``\\uD800``–``\\uDFFF`` escape: the record may hold a lone surrogate (not storable)
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class BadRecord(ValueError):
    """A JSON record that cannot be used, for ``reason`` (``bad_json``, ``too_deep``,
    ``lone_surrogate``): the caller skips that record only and counts the reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _depth(value: Any) -> int:
    """Nesting depth of a decoded JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                stack.extend((x, d + 1) for x in item if isinstance(x, (dict, list)))
    return deepest


def loads(raw: bytes | str) -> Any:
    """Decode one JSON record (bytes decoded with U+FFFD for bad UTF-8) with bounds: raises
    :class:`BadRecord` (a ``ValueError``) when it is not JSON, nested deeper than
    :data:`MAX_DEPTH` or holds a lone surrogate (``"\\ud800"``), which no store can keep."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    try:
        value = json.loads(decode(data))
    except RecursionError:
        raise BadRecord("too_deep") from None
    except ValueError:
        raise BadRecord("bad_json") from None
    if (data.count(b"[") + data.count(b"{")) > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise BadRecord("too_deep")
    if _SURROGATE.search(data):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise BadRecord("lone_surrogate") from None
    return value


#: largest file a source reads whole (bytes): a JSON document, a workspace file
MAX_FILE = 64 * 1024 * 1024


def read_regular(path: str | os.PathLike, limit: int = MAX_FILE, *, cut: bool = False) -> bytes:
    """The bytes of a *regular* file of at most ``limit`` bytes (with ``cut``: its first
    ``limit`` bytes, whatever its size). Never opens a FIFO, device or
    socket (checked before opening, opened non-blocking and checked again on the open file,
    so a file swapped in between cannot block); raises ``OSError`` for any other file or one
    over ``limit`` (its reason in ``OSError.strerror``: ``not_a_file`` / ``too_large``)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(0, "not_a_file", str(path))
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not_a_file", str(path))
        if st.st_size > limit and not cut:
            raise OSError(0, "too_large", str(path))
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit if cut else limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(0, "too_large", str(path))
    return data


def json_records(
    lines: Iterable[bytes], skipped: Counter, state: dict | None = None
) -> Iterator[dict]:
    """Decode JSONL lines into dict records (:func:`loads`). Unusable lines count by their
    :class:`BadRecord` reason, other JSON values as ``not_an_object``; with ``state``,
    ``state["line"]`` counts every line."""
    for raw in lines:
        if state is not None:
            state["line"] += 1
        try:
            rec = loads(raw)
        except BadRecord as exc:
            skipped[exc.reason] += 1
            continue
        if not isinstance(rec, dict):
            skipped["not_an_object"] += 1
            continue
        yield rec


def stat_signature(files: Iterable[Path]) -> str:
    """A hash of the files' paths, sizes and modification times (a missing file counts as
    such): what changes when a snapshot source's data may have."""
    h = hashlib.sha256()
    for f in files:
        try:
            st = f.stat()
            h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{f}:-\n".encode())
    return h.hexdigest()


#: the longest prompt or answer text kept, and the longest tool-result excerpt
MAX_TEXT = 20_000
TOOL_EXCERPT = 400


def prompt_message(
    uid: str, ts: str | None, text: str, *, side: bool = False, limit: int = MAX_TEXT
) -> HarvestedMessage:
    """A user's prompt, cleaned and capped."""
    text = cap(clean(text), limit)
    return HarvestedMessage(uid=uid, role="user", timestamp=ts, is_sidechain=side, text=text)


def answer_message(
    uid: str,
    ts: str | None,
    text: str,
    tools: list[str],
    *,
    side: bool = False,
    limit: int = MAX_TEXT,
) -> HarvestedMessage:
    """An assistant's answer, cleaned and capped, with the names of the tools it called."""
    msg = prompt_message(uid, ts, text, side=side, limit=limit)
    return msg.model_copy(update={"role": "assistant", "kind": "answer", "tool_names": tools})


def tool_message(
    uid: str,
    ts: str | None,
    excerpt: str,
    *,
    is_error: bool,
    side: bool = False,
    limit: int = TOOL_EXCERPT,
) -> HarvestedMessage:
    """A tool's result, as a redacted excerpt (a user-role message of kind ``tool``)."""
    msg = prompt_message(uid, ts, "", side=side)
    return msg.model_copy(
        update={"kind": "tool", "is_error": is_error, "text": clean_excerpt(excerpt, limit)}
    )


def add_tool_name(tools: list[str], name: Any) -> None:
    """Append a tool's ``name`` to ``tools`` once (a non-empty string only)."""
    if isinstance(name, str) and name and name not in tools:
        tools.append(name)


#: ``message`` roles of Pi's session format that are injected context, not the conversation
PI_INJECTED_ROLES = ("custom", "branchSummary", "compactionSummary")


def blocks_text(content: Any, keep: Callable[[dict[str, Any]], bool]) -> str:
    """A message ``content``'s text: a string as it is, else the ``text`` of the blocks
    ``keep`` picks, joined by lines."""
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    return "\n".join(
        b["text"]
        for b in blocks
        if isinstance(b, dict) and isinstance(b.get("text"), str) and keep(b)
    )


def pi_text(content: Any) -> str:
    """The text of a Pi-format message's ``content``: a string, or its ``text`` blocks joined."""
    return blocks_text(content, lambda b: b.get("type") == "text")


def pi_message(
    msg: dict[str, Any],
    uid: str,
    ts: str | None,
    skipped: Counter,
    *,
    max_text: int = MAX_TEXT,
    tool_excerpt: int = TOOL_EXCERPT,
) -> HarvestedMessage | None:
    """One ``message`` entry of the session format Pi writes (and OpenClaw, whose embedded agent
    runtime is Pi's): ``user`` → prompt, ``assistant`` → answer with its ``toolCall`` names,
    ``toolResult`` / ``bashExecution`` → tool excerpt. None, counted in ``skipped``, for an
    empty message, a failed answer without content (``failed_answer``), injected context
    (:data:`PI_INJECTED_ROLES`: ``injected``) or an unknown role (``unknown_role:<role>``)."""
    role = msg.get("role")
    if role == "user":
        text = pi_text(msg.get("content")).strip()
        if not text:
            skipped["empty"] += 1
            return None
        return prompt_message(uid, ts, text, limit=max_text)
    if role == "assistant":
        raw = msg.get("content")
        content: list[Any] = raw if isinstance(raw, list) else []
        tools: list[str] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                add_tool_name(tools, block.get("name"))
        text = pi_text(content).strip()
        if not text and not tools:
            failed = msg.get("stopReason") in ("error", "aborted")
            skipped["failed_answer" if failed else "empty"] += 1
            return None
        return answer_message(uid, ts, text, tools, limit=max_text)
    if role == "toolResult":
        excerpt = pi_text(msg.get("content"))
        return tool_message(uid, ts, excerpt, is_error=bool(msg.get("isError")), limit=tool_excerpt)
    if role == "bashExecution":
        code = msg.get("exitCode")
        output = msg.get("output")
        failed = isinstance(code, int) and code != 0
        text = output if isinstance(output, str) else ""
        return tool_message(uid, ts, text, is_error=failed, limit=tool_excerpt)
    if role in PI_INJECTED_ROLES:
        skipped["injected"] += 1
    else:
        skipped[f"unknown_role:{role}"] += 1
    return None


class PiSession:
    """One session of Pi's session format (also OpenClaw's) in one pass: its ``session``,
    ``model_change`` and ``message`` entries; what must survive a pass lives in ``st``
    (``key``, ``line``, ``fp``, ``self``, ``cwd``, ``started``, ``headless``)."""

    def __init__(self, source: str, st: dict):
        self.st = st
        self.sess = HarvestedSession(source=source, key=st["key"])

    def record(self, rec: dict, skipped: Counter, first: bool) -> None:
        st, sess = self.st, self.sess
        rtype = rec.get("type")
        ts = rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None
        if rtype == "session":
            if isinstance(rec.get("id"), str) and rec["id"] and first:
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
        eid = rec.get("id")
        if not isinstance(eid, str) or not eid:
            skipped["no_id"] += 1
            return
        if msg.get("role") == "assistant" and isinstance(msg.get("model"), str) and msg["model"]:
            sess.model = msg["model"]
        out = pi_message(msg, f"{st['key']}:{eid}", ts, skipped)
        if out is None:
            return
        if out.kind == "prompt" and not st["fp"]:
            st["fp"], st["self"] = True, SELF_MARKER in out.text
        sess.messages.append(out)

    def done(self) -> HarvestedSession:
        self.sess.key = self.st["key"]
        self.sess.project = self.sess.project or self.st.get("cwd")
        self.sess.started_at = self.sess.started_at or self.st.get("started")
        self.sess.self_generated = self.st["self"]
        self.sess.headless = bool(self.st.get("headless"))
        return self.sess


def parse_pi_lines(source: str, lines: Iterable[bytes], st: dict[str, Any]) -> ParseResult:
    """A pass over lines of Pi's session format: one session; a record with a field of an
    odd type is counted as ``malformed:<error>``."""
    result = ParseResult(skipped=Counter())
    one = PiSession(source, st)
    for rec in json_records(lines, result.skipped, st):
        try:
            one.record(rec, result.skipped, st["line"] <= 1)
        except (TypeError, ValueError, AttributeError) as exc:
            result.skipped[f"malformed:{type(exc).__name__}"] += 1
    result.sessions = [one.done()]
    result.state = st
    return result
