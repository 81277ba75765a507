"""Builders for small agent logs written by the tests themselves: Claude Code and Codex
records, Copilot CLI and Devin sessions, an OpenCode storage tree."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

SID = "11111111-2222-4333-8444-555555555555"
CWD = "/home/dev/proj"


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


def _ts(base: dt.datetime, s: int) -> str:
    return (base + dt.timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def write_copilot_session(
    home: Path,
    project: Path,
    turns: list[tuple[str, str, str | None]],
    *,
    when: dt.datetime | None = None,
) -> Path:
    """One Copilot CLI session in its real layout (``~/.copilot/session-state/<id>/events.jsonl``)."""
    when = when or dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)
    sid = str(uuid.uuid4())
    events, n = [], 0

    def ev(type_: str, data: dict) -> None:
        nonlocal n
        n += 1
        events.append(
            {
                "type": type_,
                "data": data,
                "id": str(uuid.uuid4()),
                "timestamp": _ts(when, n),
                "parentId": None,
            }
        )

    ev(
        "session.start",
        {
            "sessionId": sid,
            "version": 1,
            "producer": "copilot-agent",
            "copilotVersion": "1.0.102",
            "startTime": _ts(when, 0),
            "context": {"cwd": str(project)},
        },
    )
    for prompt, answer, correction in turns:
        for text, reply in ((prompt, answer), (correction, "Understood.")):
            if text is None:
                continue
            ev(
                "user.message",
                {
                    "content": text,
                    "transformedContent": f"<current_datetime>x</current_datetime>\n\n{text}",
                },
            )
            ev(
                "assistant.message",
                {"messageId": str(uuid.uuid4()), "content": reply, "toolRequests": []},
            )
    path = home / ".copilot" / "session-state" / sid / "events.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def write_devin_session(
    home: Path,
    project: Path,
    turns: list[tuple[str, str, str | None]],
    *,
    when: dt.datetime | None = None,
) -> Path:
    """One Devin CLI ATIF transcript (``~/.local/share/devin/cli/transcripts/<id>.json``)."""
    when = when or dt.datetime.now(dt.UTC) - dt.timedelta(hours=4)
    sid = f"devin-{uuid.uuid4().hex[:8]}"
    steps: list[dict] = [
        {"step_id": 1, "timestamp": _ts(when, 0), "source": "system", "message": "You are Devin."}
    ]
    for prompt, answer, correction in turns:
        for text, reply in ((prompt, answer), (correction, "Understood.")):
            if text is None:
                continue
            steps.append(
                {
                    "step_id": len(steps) + 1,
                    "timestamp": _ts(when, len(steps)),
                    "source": "user",
                    "message": text,
                }
            )
            steps.append(
                {
                    "step_id": len(steps) + 1,
                    "timestamp": _ts(when, len(steps)),
                    "source": "agent",
                    "message": reply,
                }
            )
    doc = {
        "schema_version": "ATIF-v1.7",
        "session_id": sid,
        "agent": {
            "name": "devin",
            "version": "3000.3.27",
            "model_name": "swe-1-7",
            "extra": {"cwd": str(project)},
        },
        "steps": steps,
    }
    path = home / ".local" / "share" / "devin" / "cli" / "transcripts" / f"{sid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def opencode_tree_session(root: Path, sid: str, msgs: list[tuple[dict, list[dict]]]) -> Path:
    """An OpenCode JSON storage tree under ``root/storage``: one session, its messages
    (info, parts); returns the session file."""
    storage = root / "storage"
    ses = storage / "session" / "proj" / f"{sid}.json"
    ses.parent.mkdir(parents=True)
    ses.write_text(json.dumps({"id": sid, "directory": "/home/dev/app", "title": "App"}))
    for i, (info, parts) in enumerate(msgs):
        mdir = storage / "message" / sid
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / f"msg_{i}.json").write_text(json.dumps(info))
        pdir = storage / "part" / info["id"]
        pdir.mkdir(parents=True)
        for j, p in enumerate(parts):
            (pdir / f"{j}.json").write_text(json.dumps(p))
    return ses
