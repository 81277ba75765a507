"""Builders for small Claude Code / Codex logs written by the tests themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep.store import Store

SID = "11111111-2222-4333-8444-555555555555"
CWD = "/home/dev/proj"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def claude_root(isolated_home: Path) -> Path:
    root = isolated_home / ".claude" / "projects"
    root.mkdir(parents=True)
    return root


@pytest.fixture
def codex_home(isolated_home: Path) -> Path:
    home = isolated_home / ".codex"
    (home / "sessions").mkdir(parents=True)
    return home


def cc_user(
    uuid: str, content: Any, *, sid: str = SID, ts: str = "2026-01-05T10:00:00.000Z", **extra: Any
) -> dict:
    rec = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": sid,
        "version": "2.1.40",
        "gitBranch": "main",
        "type": "user",
        "message": {"role": "user", "content": content},
        "uuid": uuid,
        "timestamp": ts,
    }
    rec.update(extra)
    return rec


def cc_assistant(
    uuid: str,
    msg_id: str,
    blocks: list[dict],
    *,
    sid: str = SID,
    model: str = "claude-sonnet-4-5",
    **extra: Any,
) -> dict:
    rec = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": sid,
        "version": "2.1.40",
        "type": "assistant",
        "requestId": "req_1",
        "message": {
            "id": msg_id,
            "model": model,
            "role": "assistant",
            "type": "message",
            "content": blocks,
        },
        "uuid": uuid,
        "timestamp": "2026-01-05T10:00:05.000Z",
    }
    rec.update(extra)
    return rec


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def tool_use(name: str, tid: str = "toolu_1") -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": {}}


def tool_result(content: str, tid: str = "toolu_1", is_error: bool = False) -> dict:
    return {"type": "tool_result", "tool_use_id": tid, "content": content, "is_error": is_error}


def jsonl(records: list[dict], crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    return "".join(json.dumps(r) + end for r in records).encode()


def write(path: Path, records: list[dict], mode: str = "wb") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as fh:
        fh.write(jsonl(records))
    return path


def cx(type_: str, payload: dict, ts: str = "2026-01-05T10:00:00.000Z") -> dict:
    return {"timestamp": ts, "type": type_, "payload": payload}


def cx_meta(
    sid: str, cwd: str = CWD, originator: str = "codex_cli_rs", source: Any = "cli"
) -> dict:
    return cx(
        "session_meta",
        {
            "id": sid,
            "timestamp": "2026-01-05T10:00:00.000Z",
            "cwd": cwd,
            "originator": originator,
            "cli_version": "0.104.0",
            "source": source,
            "model_provider": "openai",
        },
    )


def cx_user_item(t: str) -> dict:
    return cx(
        "response_item",
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]},
    )


def cx_user_event(t: str) -> dict:
    return cx("event_msg", {"type": "user_message", "message": t, "images": []})


def cx_answer_item(t: str) -> dict:
    return cx(
        "response_item",
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]},
    )


def cx_answer_event(t: str) -> dict:
    return cx("event_msg", {"type": "agent_message", "message": t})


def cx_call(name: str, call_id: str = "call_1") -> dict:
    return cx(
        "response_item",
        {"type": "function_call", "name": name, "arguments": "{}", "call_id": call_id},
    )


def cx_output(out: str, call_id: str = "call_1") -> dict:
    return cx("response_item", {"type": "function_call_output", "call_id": call_id, "output": out})


def cx_turn(model: str = "gpt-5.3-codex") -> dict:
    return cx("turn_context", {"cwd": CWD, "model": model, "approval_policy": "never"})
