"""World builders: agent session logs in the agents' own on-disk formats (Claude Code 2.1.x
project JSONL, Codex envelope rollouts), written under a HOME-like folder. The demo writes its
sandbox with them; the tests write their worlds with them.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _ts(base: dt.datetime, seconds: int) -> str:
    return (base + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def write_claude_session(
    home: Path,
    project: Path,
    turns: list[tuple[str, str, str | None]],
    *,
    when: dt.datetime | None = None,
    version: str = "2.1.328",
    entrypoint: str | None = None,
    loaded: dict[str, str] | None = None,
) -> Path:
    """Write one Claude Code transcript (``~/.claude/projects/<slug>/<session>.jsonl``).

    Each turn is (prompt, answer, correction|None); a correction is a user record after the
    answer, followed by a short assistant acknowledgement. ``loaded``: the memory files the
    session loaded (path -> content), recorded first as Claude Code's ``instructions``
    attachment (None: not recorded, as older versions do). ``entrypoint``: the envelope's
    field (``cli`` interactive; ``sdk-py`` an Agent-SDK program such as a grader; absent when
    None). Returns the file path.
    """
    when = when or dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    session = str(uuid.uuid4())
    slug = "".join(c if c.isalnum() else "-" for c in str(project))
    path = home / ".claude" / "projects" / slug / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    env = {
        "isSidechain": False,
        "userType": "external",
        "cwd": str(project),
        "sessionId": session,
        "version": version,
        "gitBranch": "main",
        **({"entrypoint": entrypoint} if entrypoint else {}),
    }
    records: list[dict[str, Any]] = []

    def add(kind: str, text: str) -> None:
        u = str(uuid.uuid4())
        rec = {"parentUuid": records[-1]["uuid"] if records else None, **env, "type": kind}
        if kind == "user":
            rec["message"] = {"role": "user", "content": text}
        else:
            rec["requestId"] = f"req_{u[:12]}"
            rec["message"] = {
                "id": f"msg_{u[:16]}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 40, "output_tokens": 12},
            }
        rec.update(uuid=u, timestamp=_ts(when, 5 * len(records)))
        records.append(rec)

    if loaded is not None:  # the memory files it loaded, as Claude Code 2.1 records them
        records.append(
            {
                **env,
                "parentUuid": None,
                "type": "attachment",
                "attachment": {
                    "type": "instructions",
                    "files": [
                        {"path": p, "type": "User", "content": text} for p, text in loaded.items()
                    ],
                },
                "uuid": str(uuid.uuid4()),
                "timestamp": _ts(when, 0),
            }
        )
    _play(turns, lambda text: add("user", text), lambda text: add("assistant", text))
    _write_jsonl(path, records)
    return path


def write_codex_session(
    home: Path,
    project: Path,
    turns: list[tuple[str, str, str | None]],
    *,
    when: dt.datetime | None = None,
    version: str = "0.169.0",
) -> Path:
    """Write one Codex rollout (``~/.codex/sessions/YYYY/MM/DD/rollout-…-<id>.jsonl``, envelope format)."""
    when = when or dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    session = str(uuid.uuid4())
    folder = home / ".codex" / "sessions" / when.strftime("%Y/%m/%d")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-{when.strftime('%Y-%m-%dT%H-%M-%S')}-{session}.jsonl"
    lines: list[dict[str, Any]] = []
    t = 0

    def rec(kind: str, payload: dict[str, Any]) -> None:
        nonlocal t
        lines.append({"timestamp": _ts(when, t), "type": kind, "payload": payload})
        t += 2

    _codex_header(rec, session, when, project, version)

    def user(text: str) -> None:
        rec(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        )
        rec("event_msg", {"type": "user_message", "message": text, "images": []})

    _play(turns, user, lambda text: codex_answer(rec, text))
    _write_jsonl(path, lines)
    return path


def codex_answer(rec: Callable[[str, dict[str, Any]], None], text: str) -> None:
    """The two lines of a Codex answer: the ``agent_message`` event and the response item."""
    rec("event_msg", {"type": "agent_message", "message": text})
    rec(
        "response_item",
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        },
    )


def _codex_header(
    rec: Callable[[str, dict[str, Any]], None],
    session: str,
    when: dt.datetime,
    project: Path,
    version: str,
) -> None:
    """The session meta, turn context and environment context a rollout starts with."""
    rec(
        "session_meta",
        {
            "id": session,
            "timestamp": _ts(when, 0),
            "cwd": str(project),
            "originator": "codex_cli_rs",
            "cli_version": version,
            "source": "cli",
            "model_provider": "openai",
            "instructions": None,
        },
    )
    rec(
        "turn_context",
        {
            "cwd": str(project),
            "approval_policy": "on-request",
            "model": "gpt-5-codex",
            "sandbox_policy": {"type": "read-only"},
            "summary": "auto",
        },
    )
    context = f"<environment_context>\n  <cwd>{project}</cwd>\n</environment_context>"
    rec(
        "response_item",
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": context}]},
    )


def _play(
    turns: list[tuple[str, str, str | None]],
    user: Callable[[str], None],
    assistant: Callable[[str], None],
) -> None:
    """Each turn's prompt and answer; a correction, then a short acknowledgement."""
    for prompt, answer, correction in turns:
        user(prompt)
        assistant(answer)
        if correction:
            user(correction)
            assistant("Understood, I will do that.")


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def write_conversations(
    home: Path, project: Path, conversations: list[tuple[str, list[tuple[str, str, str | None]]]]
) -> list[Path]:
    """Write each (agent, turns) conversation as a session of that agent; returns the files."""
    base = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    out = []
    for i, (agent, turns) in enumerate(conversations):
        when = base + dt.timedelta(minutes=10 * i)
        writer = write_claude_session if agent == "claude_code" else write_codex_session
        out.append(writer(home, project, turns, when=when))
    return out
