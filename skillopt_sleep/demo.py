"""``skillopt-sleep demo``: a whole night in a sandbox against the bundled simulator.

The sandbox gets its own HOME-like folder with Claude Code and Codex session logs written in
those agents' on-disk formats (Claude Code 2.1.x project JSONL, Codex envelope rollouts), its
own store and state folder, and a simulator on 127.0.0.1. Nothing outside the sandbox is read
or written. The same transcript writers serve the engine's tests.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillopt_sleep.errors import NightError

#: (prompt, answer, correction or None) turns per conversation in the demo project.
DEMO_CONVERSATIONS: list[tuple[str, list[tuple[str, str, str | None]]]] = [
    (
        "claude_code",
        [
            (
                "how do I install the dependencies?",
                "Run `npm install` in the project root.",
                "no, use pnpm instead of npm",
            )
        ],
    ),
    (
        "codex",
        [
            (
                "How do I install the dependencies",
                "Run `npm install` in the project root.",
                "no, use pnpm instead of npm",
            )
        ],
    ),
    (
        "claude_code",
        [("install the dependencies please", "Run `npm install` in the project root.", None)],
    ),
    (
        "claude_code",
        [("run the tests", "Run `npm test` to run the suite.", "no, use pnpm instead of npm")],
    ),
    ("codex", [("run the tests", "Run `npm test` to run the suite.", "use pnpm instead of npm")]),
    (
        "claude_code",
        [
            (
                "add the lodash package as a dependency",
                "Run `npm install lodash`.",
                "no, use pnpm instead of npm",
            )
        ],
    ),
    (
        "codex",
        [
            (
                "add the zod package as a dependency",
                "Run `npm install zod`.",
                "use pnpm instead of npm",
            )
        ],
    ),
    ("claude_code", [("run the linter", "Run `npm run lint`.", "no, use pnpm instead of npm")]),
    (
        "codex",
        [("run the linter on the project", "Run `npm run lint`.", "use pnpm instead of npm")],
    ),
    (
        "claude_code",
        [
            (
                "set up the project for development",
                "Run `npm install` in the project root.",
                "no, use pnpm instead of npm",
            )
        ],
    ),
    (
        "codex",
        [("set up the project for development", "Run `npm install` in the project root.", None)],
    ),
]


def _ts(base: dt.datetime, seconds: int) -> str:
    return (base + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def write_claude_session(
    home: Path,
    project: Path,
    turns: list[tuple[str, str, str | None]],
    *,
    when: dt.datetime | None = None,
    version: str = "2.1.328",
) -> Path:
    """Write one Claude Code transcript (``~/.claude/projects/<slug>/<session>.jsonl``).

    Each turn is (prompt, answer, correction|None); a correction is a user record after the
    answer, followed by a short assistant acknowledgement. Returns the file path.
    """
    when = when or dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)
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
    }
    records: list[dict[str, Any]] = []
    parent = None
    t = 0

    def user(text: str) -> None:
        nonlocal parent, t
        u = str(uuid.uuid4())
        records.append(
            {
                "parentUuid": parent,
                **env,
                "type": "user",
                "message": {"role": "user", "content": text},
                "uuid": u,
                "timestamp": _ts(when, t),
            }
        )
        parent, t = u, t + 5

    def assistant(text: str) -> None:
        nonlocal parent, t
        u = str(uuid.uuid4())
        records.append(
            {
                "parentUuid": parent,
                **env,
                "type": "assistant",
                "requestId": f"req_{u[:12]}",
                "message": {
                    "id": f"msg_{u[:16]}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 40, "output_tokens": 12},
                },
                "uuid": u,
                "timestamp": _ts(when, t),
            }
        )
        parent, t = u, t + 5

    for prompt, answer, correction in turns:
        user(prompt)
        assistant(answer)
        if correction:
            user(correction)
            assistant("Understood, I will do that.")
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
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
    when = when or dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
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
    rec(
        "response_item",
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": f"<environment_context>\n  <cwd>{project}</cwd>\n</environment_context>",
                }
            ],
        },
    )

    def user(text: str) -> None:
        rec(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        )
        rec("event_msg", {"type": "user_message", "message": text, "images": []})

    def assistant(text: str) -> None:
        rec("event_msg", {"type": "agent_message", "message": text})
        rec(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            },
        )

    for prompt, answer, correction in turns:
        user(prompt)
        assistant(answer)
        if correction:
            user(correction)
            assistant("Understood, I will do that.")
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def write_conversations(
    home: Path, project: Path, conversations: list[tuple[str, list[tuple[str, str, str | None]]]]
) -> list[Path]:
    """Write each (agent, turns) conversation as a session of that agent; returns the files."""
    base = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
    out = []
    for i, (agent, turns) in enumerate(conversations):
        when = base + dt.timedelta(minutes=10 * i)
        writer = write_claude_session if agent == "claude_code" else write_codex_session
        out.append(writer(home, project, turns, when=when))
    return out


@contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def demo_settings(home: Path, project: Path, url: str) -> dict[str, Any]:
    """Settings overrides for a sandbox night against the simulator at ``url``."""
    backend = {
        "name": "openai_compatible",
        "base_url": url + "/v1",
        "model": "sim-demo",
        "api_key": "sk-sim-demo",
        "max_retries": 0,
        "timeout": 30,
    }
    return {
        "sources": {
            "claude_code": {"roots": [str(home / ".claude" / "projects")]},
            "codex": {"roots": [str(home / ".codex" / "sessions")]},
        },
        "project": str(project),
        "target": backend,
        "optimizer": backend,
        "epochs": 1,
        "edit_budget": 3,
        "document": {
            "kind": "path",
            "path": str(project / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"),
        },
    }


def run_demo(
    folder: Path | None = None, say: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run the demo night; returns status, scores and the report path."""
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.simulator import serve
    from skillopt_sleep.store import Store

    say = say or (lambda _m: None)
    keep = folder is not None
    root = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="skillopt-sleep-demo-"))
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise NightError(f"demo folder {root} must be a new or empty folder")
    root.mkdir(parents=True, exist_ok=True)
    home, project = root / "home", root / "webapp"
    project.mkdir(parents=True, exist_ok=True)
    write_conversations(home, project, DEMO_CONVERSATIONS)
    say(f"sandbox: {root} ({len(DEMO_CONVERSATIONS)} sessions written)")
    with serve("demo") as sim, _env(SKILLOPT_SLEEP_HOME=str(root / "skillopt-home")):
        say(f"simulator on {sim.url}")
        settings = load_settings(root / "no-config.toml", **demo_settings(home, project, sim.url))
        store = Store(root / "skillopt-home" / "state" / "skillopt.db")
        result = run_night(store, settings, trigger="demo", progress=say)
        report = ""
        if result.proposal_id:
            row = store.proposals.get(result.proposal_id) or {}
            report = str(Path(row["dir"]) / "report.md")
        store.close()
    return {
        "status": result.status,
        "val_before": result.val_before,
        "val_after": result.val_after,
        "test_before": result.test_before,
        "test_after": result.test_after,
        "report": report,
        "sandbox": str(root) if keep or report else "",
        "proposal_id": result.proposal_id,
        "home": str(root / "skillopt-home"),
    }
