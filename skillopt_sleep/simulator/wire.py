"""Wire formats of the three APIs the simulator speaks: request parsing into a
:class:`~skillopt_sleep.simulator.brain.Turn` and rendering of a
:class:`~skillopt_sleep.simulator.brain.Reply` as JSON or as SSE event streams.

* Anthropic Messages (``/v1/messages``): message object; SSE ``message_start``,
  ``content_block_start`` / ``ping`` / ``content_block_delta`` (``text_delta`` /
  ``input_json_delta``) / ``content_block_stop``, ``message_delta`` (stop_reason, usage),
  ``message_stop``.
* OpenAI Responses (``/v1/responses``): response object; SSE ``response.created``,
  ``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
  ``response.output_text.delta`` / ``.done``, ``response.content_part.done``,
  ``response.function_call_arguments.delta`` / ``.done``, ``response.output_item.done``,
  ``response.completed`` (with usage). Every event has a ``sequence_number``.
* OpenAI Chat Completions (``/v1/chat/completions``): ``chat.completion`` object; SSE
  ``chat.completion.chunk`` deltas (content, ``tool_calls``), a usage chunk when
  ``stream_options.include_usage`` is set, then ``data: [DONE]``.

Unknown request fields are ignored. ``usage`` is ``(input_tokens, output_tokens)``.

Skill listings (:func:`listed_skills`, formats measured in docs/agents.md) are read from the
system / developer text of every API: Claude Code's ``- name: description`` lines after "The
following skills are available for use with the Skill tool:" (a role ``system`` entry of
``messages``), Codex's ``<skills_instructions>`` (``- name: description (file: rN/…)`` with
the "Skill roots" table, resolved to an absolute path), Copilot's ``<available_skills>``
(``<skill>`` with name, description, location; OpenCode 1.18 and Pi 0.73 send the same block
with the SKILL.md path as location, OpenCode's own skill as ``&lt;built-in&gt;``; OpenClaw 2026.9.6
too, its shipped skills located in its package or ``<state>/plugin-skills/``, built-in). A skill body the CLI sends back after a load
(Claude's "Base directory for this skill:" text part, Copilot's ``<skill-context>`` user
message) is context, never the user's prompt. So are OpenClaw's injected
``<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>`` user message (it does not end a tool round) and the
``[<date> UTC]`` stamp and ``Runtime:`` paragraph around its user's prompt.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Iterator
from typing import Any

from skillopt_sleep.simulator.brain import ListedSkill, Reply, Turn

Usage = tuple[int, int]
#: a dream rollout's sample index (the night's HTTP backends send it past sample 0; the
#: brain answers a persona answer's ``variants`` by it)
SAMPLE_HEADER = "x-skillopt-sample"
_CHUNK = 24  # characters per streamed text delta
_TAGGED = re.compile(r"^\s*<([\w-]+)>.*?</\1>\s*", re.S)  # <system-reminder>..</system-reminder>
_AGENTS_MD = "# AGENTS.md instructions"
# OpenClaw 2026.9.6 (docs/agents.md): the prompt goes out as "[<weekday> <date> <time> UTC]
# <prompt>" plus a "Runtime: agent=… | session=…" paragraph, and every request ends with a user
# message that is only an injected <<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> block (context)
_OPENCLAW_CONTEXT = re.compile(
    r"\s*<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>.*?<<<END_OPENCLAW_INTERNAL_CONTEXT>>>\s*", re.S
)
_OPENCLAW_STAMP = re.compile(r"^\[\w{3} \d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})? [A-Z]{2,5}\] ")
# skills OpenClaw 2026.9.6 ships: in its package (skills/, custodian-skills/) or copied from its
# bundled plugins into <state>/plugin-skills/
_OPENCLAW_SHIPPED = re.compile(r"/node_modules/openclaw/|/plugin-skills/")
_OPENCLAW_RUNTIME = re.compile(r"\n\nRuntime: agent=[^\n]*\s*$")
_SKILL_BODY = ("Base directory for this skill:", "<skill-context")

# -- skill listings (docs/agents.md) --
_CLAUDE_SKILLS = "The following skills are available for use with the Skill tool:"
_CLAUDE_ENTRY = re.compile(r"^- ([^\s:]\S*?): (.*)$")  # a plugin's skill: "plugin:skill"
# Claude Code 2.1.328 lists its bundled skills with the user's and gives no location: these
# names (measured in a sandbox HOME with no skill of its own) count as built-in.
CLAUDE_BUNDLED_SKILLS = frozenset(
    {
        "dataviz",
        "update-config",
        "keybindings-help",
        "code-review",
        "simplify",
        "fewer-permission-prompts",
        "loop",
        "claude-api",
        "workflow-authoring",
        "run",
        "plugin-authoring",
        "init",
        "security-review",
    }
)
_CODEX_BLOCK = re.compile(r"<skills_instructions>(.*?)</skills_instructions>", re.S)
_CODEX_ROOT = re.compile(r"^- `(r\d+)` = `([^`]+)`$", re.M)
_CODEX_ENTRY = re.compile(r"^- ([^:\n]+): (.*) \(file: (r\d+)/([^)\n]+)\)$", re.M)
_COPILOT_BLOCK = re.compile(r"<available_skills>(.*?)</available_skills>", re.S)
_COPILOT_ENTRY = re.compile(
    r"<skill>\s*<name>(.*?)</name>\s*<description>(.*?)</description>\s*"
    r"<location>(.*?)</location>\s*</skill>",
    re.S,
)


def sample_of(value: str | None) -> int:
    """The sample index a :data:`SAMPLE_HEADER` value names (0 when absent or not a number)."""
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0


def _claude_listing(text: str) -> list[ListedSkill]:
    """Entries ``- name: description`` after the header, up to the first blank line; a line
    that does not start an entry continues the previous description (bundled skills have
    multi-line descriptions)."""
    start = text.find(_CLAUDE_SKILLS)
    if start < 0:
        return []
    found: list[tuple[str, list[str]]] = []  # (name, entry lines)
    for line in text[start + len(_CLAUDE_SKILLS) :].lstrip("\n").split("\n"):
        m = _CLAUDE_ENTRY.match(line)
        if m is not None:
            found.append((m.group(1), [line]))
        elif line.strip() and found:
            found[-1][1].append(line)
        else:
            break
    out = []
    for name, lines in found:
        entry = "\n".join(lines)
        description = entry[len(f"- {name}: ") :].strip()
        out.append(ListedSkill(name, description, "", entry, name in CLAUDE_BUNDLED_SKILLS))
    return out


def _codex_listing(text: str) -> list[ListedSkill]:
    out: list[ListedSkill] = []
    for block in _CODEX_BLOCK.finditer(text):
        roots: dict[str, str] = dict(_CODEX_ROOT.findall(block.group(1)))
        for m in _CODEX_ENTRY.finditer(block.group(1)):
            root = roots.get(m.group(3), m.group(3)).rstrip("/")
            location = f"{root}/{m.group(4)}"
            builtin = root.endswith("/.system") or "/.system/" in root
            out.append(
                ListedSkill(m.group(1).strip(), m.group(2).strip(), location, m.group(0), builtin)
            )
    return out


def _copilot_listing(text: str) -> list[ListedSkill]:
    out: list[ListedSkill] = []
    for block in _COPILOT_BLOCK.finditer(text):
        for m in _COPILOT_ENTRY.finditer(block.group(1)):
            location = html.unescape(m.group(3).strip())
            out.append(
                ListedSkill(
                    html.unescape(m.group(1).strip()),
                    html.unescape(m.group(2).strip()),
                    location,
                    m.group(0),
                    location in ("builtin", "<built-in>")  # Copilot, OpenCode
                    or _OPENCLAW_SHIPPED.search(location) is not None,
                )
            )
    return out


def listed_skills(text: str) -> list[ListedSkill]:
    """The skills listed in ``text`` in any of the three CLIs' formats, in listing order."""
    return _claude_listing(text) + _codex_listing(text) + _copilot_listing(text)


def _is_skill_body(text: str) -> bool:
    return text.lstrip().startswith(_SKILL_BODY)


def _args(raw: Any) -> dict[str, Any]:
    """A tool call's input: an object, or a JSON text of one (anything else: ``{}``)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _clean(text: str) -> str:
    """Drop leading tagged context blocks (reminders, datetime, environment) from a text;
    a skill body sent after a skill load is no prompt at all."""
    while (match := _TAGGED.match(text)) is not None:
        text = text[match.end() :]
    text = _OPENCLAW_CONTEXT.sub("\n", text).strip()
    if _OPENCLAW_STAMP.match(text) and _OPENCLAW_RUNTIME.search(text):
        text = _OPENCLAW_RUNTIME.sub("", _OPENCLAW_STAMP.sub("", text, count=1))
    if _is_skill_body(text):
        return ""
    if text.lstrip().startswith(_AGENTS_MD):
        # the instructions alone (as Codex sends them, a block of their own) are no prompt;
        # with the prompt after them in one text (as an HTTP backend frames Codex), the prompt
        # is what follows them
        _, closed, rest = text.partition("</INSTRUCTIONS>")
        return rest.strip() if closed else ""
    return text.strip()


def _text(content: Any) -> str:
    """All text in a content value: a string, a block, or a list of blocks (recursively)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_text(c) for c in content) if t)
    if isinstance(content, dict):
        for key in ("text", "content", "output", "input", "arguments"):
            if key in content and key != "type":
                value = content[key]
                return value if isinstance(value, str) else _text(value)
    return ""


def _blocks(content: Any) -> list[str]:
    """Text blocks of a user message (tool results excluded)."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        str(b.get("text", ""))
        for b in content
        if isinstance(b, dict) and b.get("type", "text") in ("text", "input_text") and "text" in b
    ]


def _finish(turn: Turn, user_blocks: list[list[str]]) -> Turn:
    """Set ``last_user`` / ``prompt`` from the user messages' text blocks (in order)."""
    for blocks in reversed(user_blocks):
        real = [_clean(b) for b in blocks if _clean(b)]
        if real:
            turn.last_user, turn.prompt = "\n".join(blocks), real[-1]
            return turn
    if user_blocks:
        turn.last_user = turn.prompt = "\n".join(user_blocks[-1])
    return turn


def _tool_names(tools: Any) -> list[str]:
    names = []
    for tool in tools or []:
        if isinstance(tool, dict):
            fn = tool.get("function")
            name = (fn or {}).get("name") if isinstance(fn, dict) else None
            names.append(str(name or tool.get("name") or tool.get("type") or ""))
    return [n for n in names if n]


def _sse(event: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _pieces(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)]


# ---- Anthropic Messages ----------------------------------------------------------------
def parse_anthropic(body: dict[str, Any]) -> Turn:
    turn = Turn(
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        system=_text(body.get("system")),
        tools=_tool_names(body.get("tools")),
    )
    user_blocks: list[list[str]] = []
    listing = [turn.system]
    for msg in body.get("messages") or []:
        role, content = msg.get("role", "user"), msg.get("content")
        if role == "system":
            listing.append(_text(content))
        if role == "assistant" and isinstance(content, list):
            turn.calls += [
                (str(b.get("name", "")), _args(b.get("input")))
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
        results = (
            [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if isinstance(content, list)
            else []
        )
        if results:
            turn.messages.append(("tool", _text([_text(r.get("content")) for r in results])))
        if role == "user":
            blocks = _blocks(content)
            if blocks:
                user_blocks.append(blocks)
                turn.messages.append(("user", "\n".join(blocks)))
            turn.after_tool = bool(results)
        else:
            turn.messages.append(("assistant", _text(content)))
            turn.after_tool = False
    turn.skills = listed_skills("\n".join(listing))
    return _finish(turn, user_blocks)


def anthropic_message(reply: Reply, turn: Turn, rid: str, usage: Usage) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text or not reply.tool:
        content.append({"type": "text", "text": reply.text})
    if reply.tool:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{rid}",
                "name": reply.tool,
                "input": reply.tool_input,
            }
        )
    return {
        "id": f"msg_{rid}",
        "type": "message",
        "role": "assistant",
        "model": turn.model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_sse(reply: Reply, turn: Turn, rid: str, usage: Usage) -> Iterator[bytes]:
    msg = anthropic_message(reply, turn, rid, usage)
    start = dict(msg, content=[], stop_reason=None, usage=dict(msg["usage"], output_tokens=1))
    yield _sse("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(msg["content"]):
        if block["type"] == "text":
            first: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            first = dict(block, input={})
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in _pieces(json.dumps(block["input"]))
            ]
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": first},
        )
        if index == 0:
            yield _sse("ping", {"type": "ping"})
        for delta in deltas:
            yield _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """``kind``: authentication_error, not_found_error, invalid_request_error, api_error."""
    return {"type": "error", "error": {"type": kind, "message": message}}


# ---- OpenAI Responses ------------------------------------------------------------------
def _namespaced(tools: Any) -> dict[str, tuple[str, str]]:
    """Responses-API ``namespace`` tools (Codex groups each MCP server's tools in one):
    ``{"<ns>__<tool>": (ns, tool)}``, so a persona can name ``mcp__server__tool``."""
    out: dict[str, tuple[str, str]] = {}
    for tool in tools or []:
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            for sub in tool.get("tools") or []:
                if isinstance(sub, dict) and sub.get("name"):
                    out[f"{tool.get('name')}__{sub['name']}"] = (str(tool.get("name")), sub["name"])
    return out


def parse_responses(body: dict[str, Any]) -> Turn:
    namespaced = _namespaced(body.get("tools"))
    turn = Turn(
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        system=_text(body.get("instructions")),
        tools=_tool_names(body.get("tools")) + list(namespaced),
    )
    turn.namespaced = namespaced  # type: ignore[attr-defined]
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    user_blocks: list[list[str]] = []
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind, role = item.get("type", "message"), item.get("role", "user")
        if kind == "message" and role in ("system", "developer"):
            turn.system += "\n" + _text(item.get("content"))
        elif kind == "message" and role == "user":
            blocks = _blocks(item.get("content"))
            user_blocks.append(blocks)
            turn.messages.append(("user", "\n".join(blocks)))
        elif kind.endswith("_output"):
            turn.messages.append(("tool", _text(item.get("output"))))
        else:
            turn.messages.append(("assistant", _text(item)))
            if kind.endswith("_call"):
                raw = item.get("arguments", item.get("input", item.get("action")))
                turn.calls.append((str(item.get("name") or kind), _args(raw)))
        turn.after_tool = kind.endswith("_output")
    turn.skills = listed_skills(turn.system)
    return _finish(turn, user_blocks)


def _response(
    turn: Turn, rid: str, status: str, output: list[Any], usage: Usage | None
) -> dict[str, Any]:
    return {
        "id": f"resp_{rid}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": turn.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "user": None,
        "metadata": {},
        "usage": None
        if usage is None
        else {
            "input_tokens": usage[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage[0] + usage[1],
        },
    }


def _response_item(reply: Reply, rid: str, turn: Turn | None = None) -> dict[str, Any]:
    if reply.tool:
        item = {
            "type": "function_call",
            "id": f"fc_{rid}",
            "call_id": f"call_{rid}",
            "name": reply.tool,
            "arguments": json.dumps(reply.tool_input),
            "status": "completed",
        }
        ns = getattr(turn, "namespaced", {}).get(reply.tool)
        if ns:
            item["namespace"], item["name"] = ns
        return item
    return {
        "type": "message",
        "id": f"msg_{rid}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
    }


def responses_object(reply: Reply, turn: Turn, rid: str, usage: Usage) -> dict[str, Any]:
    return _response(turn, rid, "completed", [_response_item(reply, rid, turn)], usage)


def responses_sse(reply: Reply, turn: Turn, rid: str, usage: Usage) -> Iterator[bytes]:
    seq = iter(range(10**6))

    def ev(kind: str, **data: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(seq), **data})

    yield ev("response.created", response=_response(turn, rid, "in_progress", [], None))
    yield ev("response.in_progress", response=_response(turn, rid, "in_progress", [], None))
    item = _response_item(reply, rid, turn)
    at = {"item_id": item["id"], "output_index": 0}
    if item["type"] == "function_call":
        yield ev(
            "response.output_item.added",
            output_index=0,
            item=dict(item, arguments="", status="in_progress"),
        )
        for piece in _pieces(item["arguments"]):
            yield ev("response.function_call_arguments.delta", **at, delta=piece)
        yield ev(
            "response.function_call_arguments.done",
            **at,
            name=item["name"],
            arguments=item["arguments"],
        )
    else:
        part = {"type": "output_text", "text": "", "annotations": []}
        yield ev(
            "response.output_item.added",
            output_index=0,
            item=dict(item, status="in_progress", content=[]),
        )
        yield ev("response.content_part.added", **at, content_index=0, part=part)
        for piece in _pieces(reply.text):
            yield ev("response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[])
        yield ev("response.output_text.done", **at, content_index=0, text=reply.text, logprobs=[])
        yield ev(
            "response.content_part.done", **at, content_index=0, part=dict(part, text=reply.text)
        )
    yield ev("response.output_item.done", output_index=0, item=item)
    yield ev("response.completed", response=_response(turn, rid, "completed", [item], usage))


# ---- OpenAI Chat Completions -----------------------------------------------------------
def parse_chat(body: dict[str, Any]) -> Turn:
    turn = Turn(
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        tools=_tool_names(body.get("tools") or body.get("functions")),
    )
    user_blocks: list[list[str]] = []
    for msg in body.get("messages") or []:
        role, content = msg.get("role", "user"), msg.get("content")
        if role in ("system", "developer"):
            turn.system += ("\n" if turn.system else "") + _text(content)
        elif role == "user":
            blocks = _blocks(content)
            user_blocks.append(blocks)
            turn.messages.append(("user", "\n".join(blocks)))
            if blocks and all(_is_skill_body(b) for b in blocks):
                continue  # Copilot's <skill-context> after a skill call: part of its result
            if blocks and all(_OPENCLAW_CONTEXT.fullmatch(b) for b in blocks):
                continue  # OpenClaw's injected context, sent after the last message of any kind
        elif role in ("tool", "function"):
            turn.messages.append(("tool", _text(content)))
        else:
            turn.messages.append(("assistant", _text(content)))
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict):
                    turn.calls.append((str(fn.get("name", "")), _args(fn.get("arguments"))))
        turn.after_tool = role in ("tool", "function")
    turn.skills = listed_skills(turn.system)
    return _finish(turn, user_blocks)


def _chat_usage(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage[0],
        "completion_tokens": usage[1],
        "total_tokens": usage[0] + usage[1],
    }


def _tool_call(reply: Reply, rid: str) -> dict[str, Any]:
    return {
        "id": f"call_{rid}",
        "type": "function",
        "function": {"name": reply.tool, "arguments": json.dumps(reply.tool_input)},
    }


def chat_object(reply: Reply, turn: Turn, rid: str, usage: Usage) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.tool:
        message["tool_calls"] = [_tool_call(reply, rid)]
    return {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": turn.model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if reply.tool else "stop",
            }
        ],
        "usage": _chat_usage(usage),
    }


def chat_sse(
    reply: Reply, turn: Turn, rid: str, usage: Usage, include_usage: bool = False
) -> Iterator[bytes]:
    base = {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": turn.model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(
            None,
            dict(
                base,
                choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            ),
        )

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.text):
        yield chunk({"content": piece})
    if reply.tool:
        call = _tool_call(reply, rid)
        yield chunk(
            {
                "tool_calls": [
                    {"index": 0, **call, "function": {"name": reply.tool, "arguments": ""}}
                ]
            }
        )
        for piece in _pieces(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if reply.tool else "stop")
    if include_usage:
        yield _sse(None, dict(base, choices=[], usage=_chat_usage(usage)))
    yield b"data: [DONE]\n\n"


def openai_error(message: str, kind: str, code: str | None) -> dict[str, Any]:
    """``kind``: invalid_request_error / server_error; ``code``: invalid_api_key, ..."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
