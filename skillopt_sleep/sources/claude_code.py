"""Claude Code transcripts: ``$CLAUDE_CONFIG_DIR/projects`` or ``~/.claude/projects``.

Files: ``projects/<slug>/<sessionId>.jsonl`` and ``projects/<slug>/<sessionId>/subagents/
agent-<id>.jsonl`` (``tool-results/`` and ``*.meta.json`` are not transcripts). Parsed: the JSONL
record stream of Claude Code 2.0.x–2.1.x (one JSON object per line, ``type`` =
``user``/``assistant``/``system``/``summary``/``progress``/``file-history-snapshot``/
``queue-operation``/``attachment``/… — see the corpus SCHEMAS.md §1).

What is kept:

* ``prompt`` — user text typed by the user (string content or ``text`` blocks), with
  ``<system-reminder>`` blocks cut out; a plugin/skill slash command with arguments is kept as
  ``"/name args"``. Dropped (counted in ``skipped``): ``isMeta`` records (caveats, expanded
  command/skill bodies, CLAUDE.md), ``isCompactSummary``/``isVisibleInTranscriptOnly``
  summaries, ``<command-name>``/``<local-command-*>``/``<bash-*>`` wrappers,
  ``<task-notification>``, "[Request interrupted by user…]", records whose ``origin.kind`` is
  not ``human`` (or ``promptSource == "system"``), and every non-message record type
  (``ignored_type:<type>``).
* ``answer`` — assistant ``text`` blocks, with ``tool_use`` names in ``tool_names``. uid =
  ``message.id`` so the records one API response is split into merge into one message.
* ``tool`` — ``tool_result`` blocks: a short excerpt and ``is_error``; and, for the task's
  context capsule (``context``), what the agent saw: the file a ``Read`` returned (line
  numbers taken off, path relative to the session's cwd) or the output of a ``Bash`` command
  (or of another tool, named with its input; an edit's or a to-do list's result is an
  ``action``, no context), redacted and cut at :data:`CONTEXT_CHARS`
  (``truncated``; a ``Read`` with ``offset``/``limit`` counts as cut). The ``tool_use`` ids
  wait in the parse state for their results (at most :data:`PENDING_TOOLS`).

uid = record ``uuid`` (assistant: ``message.id``), so history copied into a resumed session's
new file dedupes in the store. Session key = the record's ``sessionId`` (else the file stem);
project = its ``cwd``.

**Subagents** are attached to their parent session: the records of
``<sessionId>/subagents/agent-*.jsonl`` are stored in session ``<sessionId>`` (the directory
name) with ``is_sidechain=True``, as are inline ``isSidechain`` records of 2.0.x. Compaction-agent files (``agent-acompact-*``) only
re-summarise the conversation and are skipped (``compaction_agent``).
``headless``: ``entrypoint`` ``sdk-cli``/``sdk-ts``/``sdk-py`` (what ``claude -p`` writes) or
``promptSource == "sdk"``. ``self_generated``: the session's first non-sidechain prompt
contains :data:`~skillopt_sleep.sources.base.SELF_MARKER`.
"""

from __future__ import annotations

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
from skillopt_sleep.sources.common import cap, json_records

#: characters kept of a prompt / answer, and of a tool result excerpt
MAX_TEXT = 20_000
TOOL_EXCERPT = 400
#: characters kept of what a tool showed the agent (a file, a command's output)
CONTEXT_CHARS = 8000
#: tool calls remembered per session while their results are awaited
PENDING_TOOLS = 64
#: tools whose result reports an action the agent took, not something it saw
ACTION_TOOLS = frozenset(
    {"Edit", "MultiEdit", "Write", "NotebookEdit", "TodoWrite", "ExitPlanMode", "Task", "Skill"}
)
_LINE_NO = re.compile(r"^ *\d+(?:→|\t)", re.M)

HEADLESS_ENTRYPOINTS = frozenset({"sdk-cli", "sdk-ts", "sdk-py"})
#: built-in slash commands whose arguments are settings, not tasks
BUILTIN_COMMANDS = frozenset(
    [
        "/model",
        "/mcp",
        "/compact",
        "/clear",
        "/config",
        "/login",
        "/logout",
        "/resume",
        "/cost",
        "/help",
        "/exit",
        "/quit",
        "/permissions",
        "/add-dir",
        "/agents",
        "/hooks",
        "/memory",
        "/status",
        "/doctor",
        "/ide",
        "/vim",
        "/theme",
        "/context",
        "/output-style",
        "/plugin",
        "/rewind",
        "/export",
        "/statusline",
        "/terminal-setup",
        "/usage",
        "/fast",
    ]
)

_REMINDER = re.compile(r"<system-reminder>[\s\S]*?(?:</system-reminder>|$)")
_HOOK = re.compile(r"<user-prompt-submit-hook>[\s\S]*?(?:</user-prompt-submit-hook>|$)")
_CMD_NAME = re.compile(r"<command-name>\s*([\s\S]*?)\s*</command-name>")
_CMD_ARGS = re.compile(r"<command-args>\s*([\s\S]*?)\s*</command-args>")
_INJECTED_PREFIXES = (
    ("<local-command-", "command"),
    ("<bash-", "bash_mode"),
    ("<task-notification>", "injected"),
    ("[Request interrupted by user", "interrupted"),
    ("Caveat: The messages below were generated", "injected"),
    ("This session is being continued from a previous conversation", "compact_summary"),
)


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content as blocks: a plain string is one text block; non-dict list
    items are dropped."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _block_text(content: Any) -> str:
    """Text of a tool_result ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        ]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def clean_prompt(text: str) -> tuple[str | None, str]:
    """Return ``(prompt, "")`` for a real typed prompt or ``(None, reason)`` for injected text."""
    text = _HOOK.sub("", _REMINDER.sub("", text)).strip()
    if not text:
        return None, "injected"
    if text.startswith(("<command-name>", "<command-message>")):
        name = _CMD_NAME.search(text)
        args = _CMD_ARGS.search(text)
        cmd = name.group(1).strip() if name else ""
        if cmd and args and args.group(1).strip() and cmd not in BUILTIN_COMMANDS:
            return f"{cmd} {args.group(1).strip()}", ""
        return None, "command"
    for prefix, reason in _INJECTED_PREFIXES:
        if text.startswith(prefix):
            return None, reason
    return text, ""


def _seen_as(name: str, tool_input: Any, cwd: str | None) -> list[Any] | None:
    """``[kind, name, cut]`` of what a tool call will show the agent: a ``Read`` a file
    (``cut`` when only part of it is read), a ``Bash`` its command's output, another tool
    its output named with the tool and its input; None when the log keeps no input (its
    result then counts as context that cannot be rebuilt)."""
    args = tool_input if isinstance(tool_input, dict) else {}
    if name in ACTION_TOOLS:
        return ["action", name, False]
    if not args:
        return None
    if name == "Read" and isinstance(args.get("file_path"), str):
        path = args["file_path"]
        if cwd and path.startswith(cwd.rstrip("/") + "/"):
            path = path[len(cwd.rstrip("/")) + 1 :]
        return ["file", clean(path), bool(args.get("offset") or args.get("limit"))]
    if name == "Bash" and isinstance(args.get("command"), str):
        return ["output", clean(args["command"])[:300], False]
    shown = json.dumps(args, ensure_ascii=False, sort_keys=True)[:200]
    return ["output", clean(f"{name} {shown}"), False]


def _capsule_item(seen: list[Any], body: str) -> CapsuleItem:
    kind, name, cut = seen
    if kind == "action":
        return CapsuleItem(kind="action", name=name)
    text = _REMINDER.sub("", body)
    if kind == "file":
        text = _LINE_NO.sub("", text)
    text = clean(text)
    if len(text) > CONTEXT_CHARS:
        text, cut = text[:CONTEXT_CHARS], True
    return CapsuleItem(kind=kind, name=name, text=text, truncated=bool(cut))


def _transcripts(dirnames: list[str], filenames: list[str]) -> list[str]:
    """The transcripts of one folder, sorted (its subfolders pruned and sorted in place)."""
    dirnames[:] = sorted(d for d in dirnames if d != "tool-results")
    names = set(filenames) | {d for d in dirnames if d.endswith(".jsonl")}
    return [name for name in sorted(names) if name.endswith(".jsonl")]


class ClaudeCodeSource(Source):
    """Harvester for Claude Code's ``projects/**/*.jsonl`` transcripts (see module doc)."""

    name = "claude_code"
    format_version = "Claude Code 2.0.14 – 2.1.38"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        from skillopt_sleep.agents import agent_of_source

        return [agent_of_source(self.name).home(env, home) / "projects"]

    def discover(self, root: Path) -> Iterator[Path]:
        """Every ``*.jsonl`` below ``root`` except under ``tool-results/`` (sorted, so a parent
        transcript comes before its ``<session>/subagents/`` files). Entries are yielded by
        name; the ingester decides whether they are readable files."""
        return walk_files(root, _transcripts)

    def discover_paths(self, root: Path) -> Iterator[str]:
        return walk_paths(root, _transcripts)

    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        """Parse complete JSONL records of one transcript file.

        ``state`` maps ``"s"`` → ``{sessionId: {"fp": first prompt seen, "self", "headless"}}``.
        """
        state = dict(state)
        per_session: dict[str, dict] = {k: dict(v) for k, v in state.get("s", {}).items()}
        result = ParseResult(skipped=Counter())
        skipped = result.skipped
        sessions: dict[str, HarvestedSession] = {}
        messages: dict[str, dict[str, HarvestedMessage]] = {}
        #: an assistant message's raw text as its records come in, redacted once joined
        raw: dict[str, dict[str, str]] = {}
        subagent_file = path.parent.name == "subagents"
        if subagent_file and path.name.startswith("agent-acompact"):
            for _ in lines:
                skipped["compaction_agent"] += 1
            result.state = state
            return result

        for rec in json_records(lines, skipped):
            rtype = rec.get("type")
            if rtype == "attachment" and _loaded_memory(rec) is not None:
                # the memory files this session loaded: marked, never stored as text
                mkey: str = (
                    path.parent.parent.name
                    if subagent_file
                    else (_str(rec.get("sessionId")) or path.stem)
                )
                self._remember_loaded(mkey, rec, sessions, messages, raw, per_session)
                continue
            if rtype not in ("user", "assistant", "custom-title", "ai-title"):
                skipped[f"ignored_type:{rtype}"] += 1
                continue
            key = path.parent.parent.name if subagent_file else _str(rec.get("sessionId"))
            key = key or path.stem
            sess = sessions.get(key)
            if sess is None:
                sess = sessions[key] = HarvestedSession(source=self.name, key=key)
                messages[key] = {}
                raw[key] = {}
            meta = per_session.setdefault(key, {"fp": False, "self": False, "headless": False})
            if rtype in ("custom-title", "ai-title"):
                title = rec.get("customTitle") or rec.get("aiTitle")
                if (
                    isinstance(title, str)
                    and title.strip()
                    and (rtype == "custom-title" or not sess.title)
                ):
                    sess.title = clean(title.strip())[:200]
                continue
            sidechain = rec.get("isSidechain") is True or subagent_file
            try:
                self._envelope(rec, sess, meta)
                if rtype == "assistant":
                    self._assistant(rec, messages[key], raw[key], sidechain, skipped, sess, meta)
                else:
                    self._user(rec, messages[key], sidechain, skipped, meta)
            except (TypeError, ValueError, AttributeError) as exc:  # a field of an odd type
                skipped[f"malformed:{type(exc).__name__}"] += 1

        for key, sess in sessions.items():
            meta = per_session[key]
            for uid, text in raw[key].items():  # parts joined first, then redacted, then cut
                messages[key][uid].text = cap(clean(text), MAX_TEXT)
            sess.messages = list(messages[key].values())
            sess.headless = meta["headless"]
            sess.self_generated = meta["self"]
            result.sessions.append(sess)
        state["s"] = per_session
        result.state = state
        return result

    def _remember_loaded(
        self,
        key: str,
        rec: dict,
        sessions: dict[str, HarvestedSession],
        messages: dict[str, dict[str, HarvestedMessage]],
        raw: dict[str, dict[str, str]],
        per_session: dict[str, dict],
    ) -> None:
        """An ``instructions`` attachment: the marks of the memory the session loaded."""
        sess = sessions.get(key)
        if sess is None:
            sess = sessions[key] = HarvestedSession(source=self.name, key=key)
            messages[key] = {}
            raw[key] = {}
        per_session.setdefault(key, {"fp": False, "self": False, "headless": False})
        marks = _loaded_memory(rec) or []
        sess.loaded = list(dict.fromkeys([*(sess.loaded or []), *marks]))

    # ------------------------------------------------------------------ records
    @staticmethod
    def _envelope(rec: dict, sess: HarvestedSession, meta: dict) -> None:
        cwd, ts, version = (
            _str(rec.get("cwd")),
            _str(rec.get("timestamp")),
            _str(rec.get("version")),
        )
        if cwd:
            sess.project = cwd
        if ts and not sess.started_at:
            sess.started_at = ts
        if version:
            sess.agent_version = version
        if rec.get("entrypoint") in HEADLESS_ENTRYPOINTS or rec.get("promptSource") == "sdk":
            meta["headless"] = True

    def _assistant(
        self,
        rec: dict,
        out: dict,
        raw: dict[str, str],
        sidechain: bool,
        skipped: Counter,
        sess: HarvestedSession,
        meta: dict | None = None,
    ) -> None:
        msg = rec.get("message")
        if not isinstance(msg, dict):
            skipped["no_message"] += 1
            return
        model = msg.get("model")
        if rec.get("isApiErrorMessage") or model == "<synthetic>":
            skipped["api_error"] += 1
            return
        if isinstance(model, str) and model and not model.startswith("["):
            sess.model = model
        uid = _str(msg.get("id")) or _str(rec.get("uuid"))
        if not uid:
            skipped["no_uid"] += 1
            return
        texts: list[str] = []
        tools: list[str] = []
        for block in _content_blocks(msg.get("content")):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use" and isinstance(block.get("name"), str):
                tools.append(block["name"])
                seen = _seen_as(block["name"], block.get("input"), sess.project)
                if meta is not None and isinstance(block.get("id"), str) and seen:
                    pending = meta.setdefault("tu", {})
                    pending[block["id"]] = seen
                    for old in list(pending)[:-PENDING_TOOLS]:
                        del pending[old]
        text = "\n".join(t.strip() for t in texts if t.strip())
        m = out.get(uid)
        if m is None:
            out[uid] = HarvestedMessage(
                uid=uid,
                role="assistant",
                kind="answer",
                tool_names=list(dict.fromkeys(tools)),
                timestamp=_str(rec.get("timestamp")),
                is_sidechain=sidechain,
            )
            raw[uid] = text
            return
        if text:
            raw[uid] = f"{raw[uid]}\n{text}" if raw.get(uid) else text
        m.tool_names += [t for t in tools if t not in m.tool_names]

    def _user(self, rec: dict, out: dict, sidechain: bool, skipped: Counter, meta: dict) -> None:
        uid = _str(rec.get("uuid"))
        msg = rec.get("message")
        if not uid or not isinstance(msg, dict):
            skipped["no_uid"] += 1
            return
        texts: list[str] = []
        results: list[tuple[str, bool]] = []
        context: CapsuleItem | None = None
        for block in _content_blocks(msg.get("content")):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_result":
                body, error = _block_text(block.get("content")), bool(block.get("is_error"))
                results.append((body, error))
                seen = meta.get("tu", {}).pop(str(block.get("tool_use_id")), None)
                if context is None and seen and not error:
                    context = _capsule_item(seen, body)
        ts = _str(rec.get("timestamp"))
        if results:
            excerpt = "\n".join(r[0] for r in results)
            excerpt = _REMINDER.sub("", excerpt).strip()
            out[uid] = HarvestedMessage(
                uid=uid,
                role="user",
                kind="tool",
                text=clean_excerpt(excerpt, TOOL_EXCERPT),
                timestamp=ts,
                is_sidechain=sidechain,
                is_error=any(r[1] for r in results),
                context=context,
            )
        text = "\n".join(t for t in texts if t.strip())
        if not text:
            if not results:
                skipped["empty"] += 1
            return
        if rec.get("isMeta"):
            skipped["meta"] += 1
            return
        if rec.get("isCompactSummary") or rec.get("isVisibleInTranscriptOnly"):
            skipped["compact_summary"] += 1
            return
        origin = rec.get("origin")
        if (isinstance(origin, dict) and origin.get("kind") not in (None, "human")) or (
            not isinstance(origin, dict) and rec.get("promptSource") == "system"
        ):
            skipped["injected"] += 1
            return
        prompt, reason = clean_prompt(text)
        if prompt is None:
            skipped[reason] += 1
            return
        if not sidechain and not meta["fp"]:
            meta["fp"] = True
            meta["self"] = SELF_MARKER in prompt
        puid = f"{uid}:text" if results else uid
        out[puid] = HarvestedMessage(
            uid=puid,
            role="user",
            kind="prompt",
            text=cap(clean(prompt), MAX_TEXT),
            timestamp=ts,
            is_sidechain=sidechain,
        )


def _loaded_memory(rec: dict) -> list[str] | None:
    """The marks of the memory files an ``instructions`` attachment says the session loaded
    (None: not such an attachment)."""
    att = rec.get("attachment")
    if not isinstance(att, dict) or att.get("type") != "instructions":
        return None
    files = att.get("files")
    marks: list[str] = []
    for f in files if isinstance(files, list) else []:
        if isinstance(f, dict) and isinstance(f.get("content"), str):
            marks += memory_marks(f["content"])
    return marks
