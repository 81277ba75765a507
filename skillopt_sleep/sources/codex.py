"""OpenAI Codex rollouts: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`` and
``$CODEX_HOME/archived_sessions/rollout-*.jsonl`` (``CODEX_HOME`` defaults to ``~/.codex``);
``rollout-*.jsonl.zst`` (zstd) too, the plain file winning when both exist.

Generations parsed (corpus SCHEMAS.md §2):

1. **pre-envelope** Rust JSONL (to ~Sept 2025, often CRLF): a bare header
   ``{id, timestamp, instructions, git, cwd?, originator?}``, ``{"record_type": "state"}``
   markers, and bare ResponseItems (``message``, ``function_call``, …) without timestamps;
2. **envelope** (0.3x → 0.104): ``{"timestamp", "type", "payload"}`` with ``session_meta``,
   ``response_item``, ``event_msg``, ``turn_context``, ``compacted``;
3. **newer** (0.146): also ``world_state``, ``inter_agent_communication*``, several
   ``session_meta`` lines, ``item_completed`` events — all ignored except as noted.

Prompts: user ``message`` items, ``event_msg``/``user_message`` and (0.146+, e.g. 0.169
``codex exec``) ``event_msg``/``item_completed`` ``UserMessage`` — one typed prompt is written as
two or three of these, before or after each other, so a copy is recognised within the next few
messages by a whitespace-free hash of the cleaned text and stored once. Injected user messages
(``<environment_context>``, ``<user_instructions>``, ``# AGENTS.md instructions``,
``<permissions instructions>``, …, and any message that is one ``<tag>…</tag>`` block) are
dropped; of an IDE preamble ("# Context from my IDE setup:") only the text after
``## My request for Codex:`` is kept. Developer/system messages are never prompts.
Answers: assistant ``message`` items, ``agent_message`` events and ``item_completed``
``AgentMessage`` (deduped likewise). Tool names from
``function_call``/``custom_tool_call`` (names as written, e.g. ``mcp__server__tool``) and
``local_shell``/``web_search``/``tool_search``/``image_generation`` calls, attached to the
turn's current answer. Tool outputs become ``tool`` excerpts (``is_error`` from a non-zero exit
code); a shell call's output (``exec_command`` ``cmd`` / ``shell`` ``command``, its id waiting
in the state for the output) also becomes the message's ``context`` (for the task's context
capsule: the command line and its output, redacted, cut at :data:`CONTEXT_CHARS`). Compacted ``replacement_history`` is copied history and is skipped.

Session key: the first ``session_meta`` id (or the header id), else the uuid in the file name;
a file whose name holds another uuid than its meta id keeps the name's (two files sharing a
session id stay two sessions: their uids would collide).
uids are ``<key>:<line number>``, stable across re-reads. ``headless``: originator
``codex_exec`` or source ``exec``; sub-agent threads (``source: {subagent: …}``) are
``is_sidechain``. The ``state`` dict carries the key, cwd, line number and dedupe window.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from skillopt_sleep.marks import memory_marks
from skillopt_sleep.models import CapsuleItem, HarvestedMessage, HarvestedSession
from skillopt_sleep.redact import clean, clean_excerpt
from skillopt_sleep.sources.base import SELF_MARKER, ParseResult, Source, walk_files, walk_paths
from skillopt_sleep.sources.common import as_dict, blocks_text, cap, json_records

MAX_TEXT = 20_000
TOOL_EXCERPT = 400
#: characters kept of a command's output for the task's context capsule
CONTEXT_CHARS = 8000
#: shell calls remembered per session while their outputs are awaited
PENDING_TOOLS = 64
#: how many recent messages a duplicate (response_item vs event_msg) is looked for in
DEDUPE_WINDOW = 12

_UUID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", re.I)
_ENV_CWD = re.compile(r"<cwd>([^<]+)</cwd>")
_EXIT = re.compile(r"(?:exit code|exited with code)\D{0,3}(-?\d+)", re.I)
_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
    "<collaboration_mode>",
    "<skills_instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<INSTRUCTIONS>",
)
_IDE_PREAMBLE = "# Context from my IDE setup:"
_IDE_REQUEST = "## My request for Codex:"
#: a message that is one XML-ish block, e.g. ``<environment_context>…</environment_context>``
_WRAPPED = re.compile(r"^<([A-Za-z_][\w -]*)>[\s\S]*</\1>$")
_IMAGE_TAG = re.compile(r"^</?image\b[^>]*>$")
_TOOL_CALLS = {
    "function_call": None,
    "custom_tool_call": None,
    "local_shell_call": "local_shell",
    "web_search_call": "web_search",
    "tool_search_call": "tool_search",
    "image_generation_call": "image_generation",
}
_RESPONSE_TYPES = {
    "message",
    "reasoning",
    "function_call_output",
    "custom_tool_call_output",
    *_TOOL_CALLS,
}


def _kind(obj: dict) -> str | None:
    value = obj.get("type")
    return value if isinstance(value, str) else None


def clean_user_text(text: str) -> str | None:
    """The user's own words in a Codex user message, or None when it is injected context."""
    text = text.strip()
    if text.startswith(_IDE_PREAMBLE):
        _, sep, rest = text.partition(_IDE_REQUEST)
        return rest.strip() or None if sep else None
    if not text or text.startswith(_INJECTED) or _WRAPPED.match(text):
        return None
    return text


def _content_text(content: Any) -> str:
    return blocks_text(content, lambda b: not _IMAGE_TAG.match(b["text"].strip()))


def _tool_output(payload: dict) -> tuple[str, bool]:
    out = payload.get("output")
    if isinstance(out, dict):
        # whole: the caller's clean_excerpt cuts (at whitespace) and redacts
        out = out.get("content") or out.get("output") or json.dumps(out, ensure_ascii=False)
    if not isinstance(out, str):
        out = _content_text(out)
    error = False
    try:
        inner = json.loads(out) if out.startswith("{") else None
    except ValueError:
        inner = None
    if isinstance(inner, dict):
        code = (inner.get("metadata") or {}).get("exit_code")
        error = isinstance(code, int) and code != 0
        inner_out = inner.get("output")
        out = inner_out if isinstance(inner_out, str) else out
    else:
        m = _EXIT.search(out[:2000])
        error = bool(m and m.group(1) != "0") or out.startswith(("failed in sandbox", "error:"))
    return out, error


def _rollouts(dirnames: list[str], filenames: list[str]) -> list[str]:
    """The rollouts of one folder, sorted (its subfolders sorted in place)."""
    dirnames.sort()
    names = set(filenames)
    return [
        name
        for name in sorted(names)
        if name.startswith("rollout-")
        and (name.endswith(".jsonl") or (name.endswith(".jsonl.zst") and name[:-4] not in names))
    ]


class CodexSource(Source):
    """Harvester for Codex CLI/IDE/Desktop rollout files (see module doc)."""

    name = "codex"
    format_version = "Codex CLI pre-envelope rollouts (Sept 2025) and envelope rollouts 0.40.0 – 0.104.0; record types up to 0.146 (synthetic)"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        from skillopt_sleep.agents import agent_of_source

        base = agent_of_source(self.name).home(env, home)
        return [base / "sessions", base / "archived_sessions"]

    def discover(self, root: Path) -> Iterator[Path]:
        """``rollout-*.jsonl`` and ``rollout-*.jsonl.zst`` below ``root``, sorted; a ``.zst``
        is skipped when the plain file is there too."""
        return walk_files(root, _rollouts)

    def discover_paths(self, root: Path) -> Iterator[str]:
        return walk_paths(root, _rollouts)

    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        """Parse complete rollout lines; see the module doc for the formats and ``state``."""
        st = dict(state) if state else {}
        if "key" not in st:
            m = _UUID.search(path.name)
            st.update(
                key=m.group(1) if m else path.name.split(".")[0],
                fkey=m.group(1) if m else None,
                line=0,
                n=0,
                fp=False,
                self=False,
                headless=False,
                side=False,
                cur=None,
                recent=[],
                meta=False,
            )
        result = ParseResult(skipped=Counter())
        sess = HarvestedSession(source=self.name, key=st["key"])
        out: dict[str, HarvestedMessage] = {}
        ctx = _Ctx(st, sess, out, result.skipped)
        for rec in json_records(lines, result.skipped, st):
            try:
                ctx.record(rec)
            except (TypeError, ValueError, AttributeError) as exc:  # a field of an odd type
                result.skipped[f"malformed:{type(exc).__name__}"] += 1
        sess.key = st["key"]
        sess.messages = list(out.values())
        sess.project = sess.project or st.get("cwd")
        sess.headless, sess.self_generated = st["headless"], st["self"]
        if st.get("loaded") is not None:
            sess.loaded = st["loaded"]
        result.sessions = [sess]
        result.state = st
        return result


def _shell_command(arguments: Any) -> str | None:
    """The command line of a shell call's ``arguments`` (``{"cmd": "git diff"}`` of
    ``exec_command``, ``{"command": ["bash", "-lc", "git diff"]}`` of ``shell``), for the
    context capsule; None for any other call."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    cmd = args.get("cmd", args.get("command"))
    if isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd):
        cmd = cmd[-1] if len(cmd) == 3 and cmd[1] in ("-lc", "-c") else " ".join(cmd)
    return clean(cmd)[:300] if isinstance(cmd, str) and cmd.strip() else None


class _Ctx:
    """Per-pass parse context; everything that must survive a pass lives in ``st``."""

    def __init__(self, st: dict, sess: HarvestedSession, out: dict, skipped: Counter):
        self.st, self.sess, self.out, self.skipped = st, sess, out, skipped
        self.ts: str | None = None

    def record(self, rec: dict) -> None:
        payload, rtype = rec.get("payload"), _kind(rec)
        self.ts = rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None
        if isinstance(payload, dict) and isinstance(rtype, str):  # envelope
            if rtype == "session_meta":
                self.meta(payload)
            elif rtype == "turn_context":
                if isinstance(payload.get("model"), str):
                    self.sess.model = payload["model"]
                if isinstance(payload.get("cwd"), str) and not self.st.get("cwd"):
                    self.st["cwd"] = payload["cwd"]
            elif rtype == "response_item":
                self.item(payload)
            elif rtype == "event_msg":
                self.event(payload)
            else:
                self.skipped[f"ignored_type:{rtype}"] += 1
        elif "record_type" in rec:
            self.skipped[f"ignored_type:record_type.{rec.get('record_type')}"] += 1
        elif rtype in _RESPONSE_TYPES:  # pre-envelope bare ResponseItem
            self.item(rec)
        elif "id" in rec and "type" not in rec:  # pre-envelope header
            self.meta(rec)
        else:
            self.skipped[f"ignored_type:{rtype}"] += 1

    def meta(self, p: dict) -> None:
        st, sess = self.st, self.sess
        if st["meta"]:
            self.skipped["ignored_type:session_meta.extra"] += 1
            return
        st["meta"] = True
        sid = p.get("id") or p.get("session_id")
        # Codex names each rollout file after its session id: a file whose meta id is another
        # file's keeps its own (two files sharing an id stay two sessions, never merged)
        if (
            isinstance(sid, str)
            and sid
            and st["n"] == 0
            and str(st.get("fkey") or sid).lower() == sid.lower()
        ):
            st["key"] = sid
        if isinstance(p.get("cwd"), str) and p["cwd"]:
            st["cwd"] = p["cwd"]
        ts = p.get("timestamp") or self.ts
        if isinstance(ts, str):
            sess.started_at = ts
        if isinstance(p.get("cli_version"), str):
            sess.agent_version = p["cli_version"]
        source = p.get("source")
        st["headless"] = p.get("originator") == "codex_exec" or source == "exec"
        st["side"] = isinstance(source, dict) and "subagent" in source

    def item(self, p: dict) -> None:
        ptype = _kind(p)
        if ptype == "message":
            role = p.get("role")
            text = _content_text(p.get("content"))
            if role == "user":
                self.prompt(text, "item")
            elif role == "assistant":
                self.answer(text, "item")
            else:
                self.skipped[f"{role}_message"] += 1
        elif ptype in _TOOL_CALLS:
            name = p.get("name") if _TOOL_CALLS[ptype] is None else _TOOL_CALLS[ptype]
            if not isinstance(name, str) or not name:
                name = ptype.removesuffix("_call")
            self.tool_call(name)
            command = _shell_command(p.get("arguments"))
            if command and isinstance(p.get("call_id"), str):
                pending = self.st.setdefault("tu", {})
                pending[p["call_id"]] = command
                for old in list(pending)[:-PENDING_TOOLS]:
                    del pending[old]
        elif ptype in ("function_call_output", "custom_tool_call_output"):
            text, error = _tool_output(p)
            uid = f"{self.st['key']}:{self.st['line']}"
            command = self.st.get("tu", {}).pop(str(p.get("call_id")), None)
            context = None
            if command and not error:
                seen = clean(text)
                context = CapsuleItem(
                    kind="output",
                    name=command,
                    text=seen[:CONTEXT_CHARS],
                    truncated=len(seen) > CONTEXT_CHARS,
                )
            self.add(
                HarvestedMessage(
                    uid=uid,
                    role="user",
                    kind="tool",
                    is_error=error,
                    text=clean_excerpt(text, TOOL_EXCERPT),
                    context=context,
                )
            )
        else:
            self.skipped[f"ignored_type:response_item.{ptype}"] += 1

    def event(self, p: dict) -> None:
        ptype = _kind(p)
        item = as_dict(p.get("item")) if ptype == "item_completed" else {}
        itype = _kind(item)
        if ptype == "user_message" and isinstance(p.get("message"), str):
            self.prompt(p["message"], "event")
        elif ptype == "agent_message" and isinstance(p.get("message"), str):
            self.answer(p["message"], "event")
        elif itype == "UserMessage":  # paginated-history builds (0.146+)
            self.prompt(_content_text(item.get("content")), "completed")
        elif itype == "AgentMessage":
            self.answer(_content_text(item.get("content")), "completed")
        elif ptype == "thread_name_updated" and isinstance(p.get("thread_name"), str):
            self.sess.title = clean(p["thread_name"])[:200]
        else:
            self.skipped[f"ignored_type:event_msg.{ptype}"] += 1

    # ------------------------------------------------------------------ messages
    def add(self, msg: HarvestedMessage) -> HarvestedMessage:
        msg.timestamp = msg.timestamp or self.ts
        if not self.sess.started_at and self.ts:
            self.sess.started_at = self.ts
        msg.is_sidechain = self.st["side"]
        self.st["n"] += 1
        self.out[msg.uid] = msg
        return msg

    def duplicate(self, role: str, channel: str, text: str) -> str | None:
        """The uid of a recent message with the same text not yet seen on ``channel`` (the same
        message written as another record type), else None (and this one is remembered)."""
        digest = hashlib.sha1("".join(text.split()).encode("utf-8", "replace")).hexdigest()[:16]
        recent: list = self.st["recent"]
        for entry in recent:  # [role, [channels], digest, uid]
            if entry[0] == role and entry[2] == digest and channel not in entry[1]:
                entry[1].append(channel)
                return entry[3]
        recent.append([role, [channel], digest, f"{self.st['key']}:{self.st['line']}"])
        del recent[:-DEDUPE_WINDOW]
        return None

    def prompt(self, raw: str, channel: str) -> None:
        if not self.st.get("cwd") and "<environment_context>" in raw[:200]:
            m = _ENV_CWD.search(raw)
            self.st["cwd"] = m.group(1).strip() if m else None
        text = clean_user_text(raw)
        if text is None:
            self.skipped["injected"] += 1
            stripped = raw.strip()
            if stripped.startswith(("# AGENTS.md instructions", "<user_instructions>")):
                self.loaded(stripped)
            return
        self.st["cur"] = None
        if self.duplicate("user", channel, text):
            self.skipped[f"duplicate_{channel}"] += 1
            return
        if not self.st["side"] and not self.st["fp"]:
            self.st["fp"], self.st["self"] = True, SELF_MARKER in text
        uid = f"{self.st['key']}:{self.st['line']}"
        self.add(
            HarvestedMessage(uid=uid, role="user", kind="prompt", text=cap(clean(text), MAX_TEXT))
        )

    def loaded(self, text: str) -> None:
        """The AGENTS.md instructions Codex sent the model: marked (never stored as text)."""
        body = text
        for open_tag, close_tag in (
            ("<INSTRUCTIONS>", "</INSTRUCTIONS>"),
            ("<user_instructions>", "</user_instructions>"),
        ):
            if open_tag in body:
                body = body.split(open_tag, 1)[1].split(close_tag, 1)[0]
        marks = self.st.get("loaded") or []
        self.st["loaded"] = list(dict.fromkeys([*marks, *memory_marks(body)]))
        self.sess.loaded = self.st["loaded"]

    def answer(self, raw: str, channel: str) -> None:
        text = raw.strip()
        if not text:
            self.skipped["empty"] += 1
            return
        dup = self.duplicate("assistant", channel, text)
        if dup:
            self.st["cur"] = dup
            self.skipped[f"duplicate_{channel}"] += 1
            return
        uid = f"{self.st['key']}:{self.st['line']}"
        self.st["cur"] = uid
        self.add(
            HarvestedMessage(
                uid=uid, role="assistant", kind="answer", text=cap(clean(text), MAX_TEXT)
            )
        )

    def tool_call(self, name: str) -> None:
        uid = self.st["cur"]
        if uid is None:
            uid = self.st["cur"] = f"{self.st['key']}:{self.st['line']}"
        msg = self.out.get(uid)
        if msg is None:
            # the answer was stored by an earlier pass (or is new): the store merges tool names
            msg = self.add(HarvestedMessage(uid=uid, role="assistant", kind="answer"))
        if name not in msg.tool_names:
            msg.tool_names.append(name)
