"""A deterministic corpus of agent session logs for benchmarks: Claude Code 2.1.x project
JSONL and Codex envelope rollouts (0.10x), in the record mix of the shared corpus's real
samples (``/work/shared/corpus``: progress and hook records, assistant responses written as
one record per content block with the same ``message.id``, tool calls with their results and
``toolUseResult``, ``file-history-snapshot``, ``system`` records; Codex ``session_meta``,
``turn_context``, reasoning, function calls and outputs, ``token_count`` events), written
under a HOME-like folder::

    from skillopt_sleep.testing.corpus_gen import generate_corpus
    counts = generate_corpus(tmp / "home", sessions=2000, seed=7)
    counts["bytes"], counts["files"], counts["claude_sessions"], counts["codex_sessions"]

The same ``(sessions, seed, …)`` always writes the same bytes at the same paths (uuids,
timestamps and text all come from the seeded generator; timestamps lie in the 30 days before
``end``, by default a fixed date). Session sizes are spread like real ones (most a few tens of
KB, a long tail of several hundred KB: about 170 KB on average, so 2,000 sessions are about
345 MB like the corpus the issue measured); about half the sessions are Claude Code, one in
ten of those with a subagent file; about one tool output in 60 holds a fake secret so
redaction has work to do. Every file's mtime is set to its last record's time.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import uuid
from pathlib import Path
from typing import Any

from skillopt_sleep.testing.sessions import codex_answer

#: the default end of the 30-day window the sessions lie in
END = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)

_WORD_TEXT = (
    "the a to of and in is for on with that this it as be by from at or not are was use "
    "file test run build error function value return type config module import class data "
    "user request response server client cache index query table row column key path list "
    "string number update create delete read write check fix add remove change handle parse "
    "load save open close start stop wait retry timeout async await promise result option "
    "default missing invalid expected actual should must can will would could now then when "
    "before after because instead only also still just again here there each every some"
)
_WORDS = _WORD_TEXT.split()
_IDENT_TEXT = (
    "handler parser router store session message worker queue report render widget service "
    "client adapter loader reader writer builder factory manager helper util context state"
)
_IDENT = _IDENT_TEXT.split()
_PROMPTS = (
    "fix the failing test in {m}",
    "add a {m} option to the config and document it",
    "why does {m} time out when the cache is cold?",
    "refactor {m} so the {n} no longer imports the {o}",
    "run the tests and fix what fails",
    "write a unit test for {m}.{n}",
    "the {m} endpoint returns 500 on an empty body, find out why",
    "rename {n} to {o} everywhere",
    "update the README with the new {m} flags",
    "make the {m} retry with backoff instead of failing at once",
    "review the diff and tell me what could break",
    "bump the dependencies and run the build",
)
_SECRETS = (
    "export AWS_ACCESS_KEY_ID=AKIA{U16}",
    "GITHUB_TOKEN=ghp_{A36}",
    "db password=Hx{A16}9",
    "Authorization: Bearer {A40}",
    "curl -u deploy:{A20}7 https://example.invalid/api",
    "OPENAI_API_KEY=sk-proj-{A40}1",
)
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


class _Gen:
    def __init__(self, seed: int, end: dt.datetime, n_projects: int) -> None:
        self.rng = random.Random(seed)
        self.end = end
        self.projects = [
            f"/home/dev/code/{self._ident()}-{self._ident()}-{i:02d}" for i in range(n_projects)
        ]
        # a pool of text the bulk content is cut from (random words are slow to draw one by one)
        self.prose = " ".join(self.rng.choice(_WORDS) for _ in range(40_000))
        lines = []
        for i in range(6_000):
            ind = "    " * self.rng.randrange(0, 4)
            a, b = self._ident(), self._ident()
            lines.append(
                self.rng.choice(
                    (
                        f"{ind}def {a}_{b}(self, {b}: str) -> None:",
                        f"{ind}return self.{a}.{b}({i})",
                        f"{ind}{a} = {b}.get('{a}', {i})",
                        f"{ind}if not {a}:",
                        f"{ind}# {self._words(8)}",
                        f"{ind}raise ValueError(f'{a} {{ {b} }} invalid')",
                        f"src/{a}/{b}.py:{i}: {self._words(6)}",
                    )
                )
            )
        self.code = "\n".join(lines)

    def _ident(self) -> str:
        return self.rng.choice(_IDENT)

    def _words(self, n: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(n))

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def token(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def cut(self, pool: str, size: int) -> str:
        size = max(1, min(size, len(pool) - 1))
        at = self.rng.randrange(0, len(pool) - size)
        return pool[at : at + size]

    def prose_text(self, size: int) -> str:
        return self.cut(self.prose, size).strip().capitalize() + "."

    def tool_output(self, size: int) -> str:
        out = self.cut(self.code, size)
        if self.rng.random() < 1 / 60:
            secret = self.rng.choice(_SECRETS).format(
                U16=self.token(_UPPER, 16),
                A16=self.token(_ALNUM, 16),
                A20=self.token(_ALNUM, 20),
                A36=self.token(_ALNUM, 36),
                A40=self.token(_ALNUM, 40),
            )
            at = out.find("\n", len(out) // 2)
            out = out[:at] + "\n" + secret + out[at:] if at > 0 else out + "\n" + secret
        return out

    def prompt(self) -> str:
        return self.rng.choice(_PROMPTS).format(m=self._ident(), n=self._ident(), o=self._ident())

    def target_size(self) -> int:
        # lognormal: median ~65 KB, mean ~150 KB, capped at 3 MB
        return int(min(3_000_000, max(4_000, self.rng.lognormvariate(11.08, 1.25))))


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _write(path: Path, records: list[dict[str, Any]], last: dt.datetime) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
    path.write_bytes(data)
    stamp = last.timestamp()
    os.utime(path, (stamp, stamp))
    return len(data)


def _claude(g: _Gen, home: Path, project: str, start: dt.datetime, size: int) -> dict[str, int]:
    session = g.uuid()
    slug = "".join(c if c.isalnum() else "-" for c in project)
    folder = home / ".claude" / "projects" / slug
    c = _ClaudeFile(g, project, session, start)
    c.add(
        {
            "type": "progress",
            "data": {"type": "hook_progress", "hookEvent": "SessionStart", "hookName": "start"},
            "parentToolUseID": g.uuid(),
            "toolUseID": g.uuid(),
        }
    )
    model = g.rng.choice(("claude-opus-4-6", "claude-sonnet-4-5"))
    first = True
    while first or c.total < size:  # at least one turn
        first = False
        c.turn(model)
    n = _write(folder / f"{session}.jsonl", c.records, c.t)
    files = 1
    if g.rng.random() < 0.1:  # a subagent's own file
        n += _claude_subagent(g, folder / session / "subagents", c.env, model, start)
        files += 1
    return {"files": files, "bytes": n, "messages": c.messages}


class _ClaudeFile:
    """The records of one generated Claude Code session file, in the order written: each
    record's envelope (parent, session, cwd …), its time a random step after the last."""

    def __init__(self, g: _Gen, project: str, session: str, start: dt.datetime) -> None:
        self.g, self.rng, self.project = g, g.rng, project
        self.env = {
            "isSidechain": False,
            "userType": "external",
            "cwd": project,
            "sessionId": session,
            "version": "2.1.39",
            "gitBranch": "main",
        }
        self.t = start
        self.records: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.total = 0
        self.messages = 0

    def add(self, rec: dict[str, Any], *, envelope: bool = True, step: float = 2.0) -> str:
        self.t += dt.timedelta(seconds=self.rng.uniform(0.2, step))
        u = self.g.uuid()
        full = {"parentUuid": self.parent, **self.env, **rec, "uuid": u, "timestamp": _iso(self.t)}
        if not envelope:
            full = {**rec, "timestamp": _iso(self.t)}
        self.records.append(full)
        self.total += len(json.dumps(full)) + 1
        if envelope:
            self.parent = u
        return u

    def turn(self, model: str) -> None:
        """A prompt, one to seven tool rounds, the final answer and the turn's duration."""
        g, rng = self.g, self.rng
        mid = g.uuid()
        self.add(
            {
                "type": "file-history-snapshot",
                "messageId": mid,
                "snapshot": {"messageId": mid, "trackedFileBackups": {}, "timestamp": _iso(self.t)},
                "isSnapshotUpdate": False,
            },
            envelope=False,
        )
        self.add(
            {
                "type": "user",
                "message": {"role": "user", "content": g.prompt()},
                "permissionMode": "default",
            },
            step=60.0,
        )
        self.messages += 1
        for _ in range(rng.randrange(1, 8)):  # tool rounds of one answer
            self.tool_round(model)
        self.add(
            {
                "type": "assistant",
                "requestId": "req_011" + g.token(_ALNUM, 21),
                "message": {
                    "model": model,
                    "id": "msg_01" + g.token(_ALNUM, 22),
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": g.prose_text(rng.randrange(100, 1500))}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 3, "output_tokens": rng.randrange(20, 800)},
                },
            }
        )
        self.messages += 1
        self.add(
            {"type": "system", "subtype": "turn_duration", "durationMs": rng.randrange(1, 900_000)}
        )

    def tool_round(self, model: str) -> None:
        """One answer's content blocks (a record each) ending in a tool call, its progress
        and its result."""
        g, rng = self.g, self.rng
        msg_id = "msg_01" + g.token(_ALNUM, 22)
        req = "req_011" + g.token(_ALNUM, 21)
        usage = {
            "input_tokens": rng.randrange(1, 50),
            "cache_creation_input_tokens": rng.randrange(0, 20000),
            "cache_read_input_tokens": rng.randrange(0, 90000),
            "output_tokens": rng.randrange(5, 900),
            "service_tier": "standard",
        }
        blocks: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": g.prose_text(rng.randrange(80, 1200)),
                    "signature": g.token(_ALNUM, 120),
                }
            )
        if rng.random() < 0.6:
            blocks.append({"type": "text", "text": g.prose_text(rng.randrange(40, 600))})
        tool_id = "toolu_01" + g.token(_ALNUM, 22)
        blocks.append(self.tool_use(tool_id))
        for block in blocks:  # one record per content block, same message id and usage
            self.add(
                {
                    "type": "assistant",
                    "requestId": req,
                    "message": {
                        "model": model,
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "content": [block],
                        "stop_reason": None,
                        "usage": usage,
                    },
                }
            )
            self.messages += 1
        for _ in range(rng.randrange(0, 4)):
            self.add(
                {
                    "type": "progress",
                    "data": {"type": "bash_progress", "output": g.cut(g.code, 200)},
                    "parentToolUseID": tool_id,
                    "toolUseID": "bash-progress-0",
                },
                step=0.5,
            )
        self.tool_result(tool_id)

    def tool_use(self, tool_id: str) -> dict[str, Any]:
        g, project = self.g, self.project
        tool = self.rng.choice(("Bash", "Read", "Edit", "Grep"))
        tool_input = {
            "Bash": {"command": f"pytest -q tests/test_{g._ident()}.py", "description": "x"},
            "Read": {"file_path": f"{project}/src/{g._ident()}.py"},
            "Edit": {
                "file_path": f"{project}/src/{g._ident()}.py",
                "old_string": g.cut(g.code, 120),
                "new_string": g.cut(g.code, 140),
            },
            "Grep": {"pattern": g._ident(), "path": project},
        }[tool]
        return {"type": "tool_use", "id": tool_id, "name": tool, "input": tool_input}

    def tool_result(self, tool_id: str) -> None:
        output = self.g.tool_output(int(self.rng.lognormvariate(7.5, 1.3)))
        self.add(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "tool_use_id": tool_id,
                            "type": "tool_result",
                            "content": output,
                            "is_error": self.rng.random() < 0.05,
                        }
                    ],
                },
                "toolUseResult": {
                    "stdout": output,
                    "stderr": "",
                    "interrupted": False,
                    "isImage": False,
                },
                "sourceToolUseID": tool_id,
            },
            step=20.0,
        )
        self.messages += 1


def _claude_subagent(
    g: _Gen, folder: Path, env: dict[str, Any], model: str, start: dt.datetime
) -> int:
    """A subagent's own file beside the session's; the bytes written."""
    rng = g.rng
    agent = g.token("0123456789abcdef", 7)
    sub = {**env, "isSidechain": True, "agentId": agent}
    sub_records: list[dict[str, Any]] = []
    st = start + dt.timedelta(seconds=30)
    p: str | None = None
    for i in range(rng.randrange(2, 12)):
        st += dt.timedelta(seconds=rng.uniform(1, 10))
        u = g.uuid()
        role = "user" if i % 2 == 0 else "assistant"
        content: Any = (
            g.prompt()
            if i == 0
            else [{"type": "text", "text": g.prose_text(rng.randrange(50, 800))}]
        )
        msg: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant":
            msg.update({"model": model, "id": "msg_01" + g.token(_ALNUM, 22)})
        sub_records.append(
            {"parentUuid": p, **sub, "type": role, "message": msg, "uuid": u, "timestamp": _iso(st)}
        )
        p = u
    return _write(folder / f"agent-a{agent}.jsonl", sub_records, st)


def _codex(g: _Gen, home: Path, project: str, start: dt.datetime, size: int) -> dict[str, int]:
    rng = g.rng
    session = g.uuid()
    folder = home / ".codex" / "sessions" / start.strftime("%Y/%m/%d")
    path = folder / f"rollout-{start.strftime('%Y-%m-%dT%H-%M-%S')}-{session}.jsonl"
    c = _CodexFile(g, project, start)
    c.model = rng.choice(("gpt-5.3-codex", "gpt-5-codex"))
    c.rec(
        "session_meta",
        {
            "id": session,
            "timestamp": _iso(c.t),
            "cwd": project,
            "originator": "codex_cli_rs",
            "cli_version": "0.104.0",
            "source": "cli",
            "model_provider": "openai",
            "base_instructions": {"text": g.prose_text(3000)},
            "git": {"commit_hash": g.token("0123456789abcdef", 40), "branch": "main"},
        },
    )
    c.rec(
        "response_item",
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": g.prose_text(1500)}],
        },
    )
    context = f"<environment_context>\n  <cwd>{project}</cwd>\n</environment_context>"
    c.rec(
        "response_item",
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": context}]},
    )
    first = True
    while first or c.total < size:  # at least one turn
        first = False
        c.turn()
    return {"files": 1, "bytes": _write(path, c.lines, c.t), "messages": c.messages}


class _CodexFile:
    """The lines of one generated Codex rollout file, each a random step after the last."""

    def __init__(self, g: _Gen, project: str, start: dt.datetime) -> None:
        self.g, self.rng, self.project = g, g.rng, project
        self.t = start
        self.lines: list[dict[str, Any]] = []
        self.total = 0
        self.messages = 0
        self.cumulative = 0
        self.model = ""

    def rec(self, kind: str, payload: dict[str, Any], step: float = 1.0) -> None:
        self.t += dt.timedelta(seconds=self.rng.uniform(0.05, step))
        line = {"timestamp": _iso(self.t), "type": kind, "payload": payload}
        self.lines.append(line)
        self.total += len(json.dumps(line)) + 1

    def turn(self) -> None:
        """A prompt, one to seven command rounds and the answer."""
        g, rng, rec = self.g, self.rng, self.rec
        turn = g.uuid()
        rec("event_msg", {"type": "task_started", "turn_id": turn, "model_context_window": 258400})
        prompt = g.prompt()
        rec(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            },
            step=60.0,
        )
        rec("event_msg", {"type": "user_message", "message": prompt, "images": []})
        self.messages += 1
        for _ in range(rng.randrange(1, 8)):
            self.command_round(turn)
        answer = g.prose_text(rng.randrange(100, 1500))
        codex_answer(rec, answer)
        rec("event_msg", {"type": "task_complete", "last_agent_message": answer})
        self.messages += 1

    def command_round(self, turn: str) -> None:
        """The turn context, a reasoning, one shell command with its output, the token count."""
        g, rng, rec = self.g, self.rng, self.rec
        rec(
            "turn_context",
            {
                "turn_id": turn,
                "cwd": self.project,
                "approval_policy": "on-request",
                "sandbox_policy": {"type": "workspace-write", "network_access": False},
                "model": self.model,
                "effort": "medium",
                "summary": "auto",
            },
        )
        thought = g.prose_text(rng.randrange(60, 600))
        rec("event_msg", {"type": "agent_reasoning", "text": thought})
        rec(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": thought}],
                "content": None,
                "encrypted_content": g.token(_ALNUM, rng.randrange(200, 1500)),
            },
        )
        call = "call_" + g.token(_ALNUM, 24)
        cmd = rng.choice(("rg -n", "sed -n 1,120p", "pytest -q", "git diff", "ls -la"))
        rec(
            "response_item",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": f"{cmd} src/{g._ident()}.py"}),
                "call_id": call,
            },
        )
        output = g.tool_output(int(rng.lognormvariate(7.5, 1.3)))
        rec(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": call,
                "output": (
                    f"Chunk ID: {g.token('0123456789abcdef', 6)}\nWall time: 0.1 seconds\n"
                    f"Process exited with code 0\nOutput:\n{output}"
                ),
            },
            step=20.0,
        )
        self.messages += 2
        self.cumulative += rng.randrange(1000, 30000)
        rec(
            "event_msg",
            {
                "type": "token_count",
                "info": {
                    "total_token_usage": {"input_tokens": self.cumulative, "output_tokens": 900},
                    "last_token_usage": {"input_tokens": 5000, "output_tokens": 300},
                    "model_context_window": 258400,
                },
                "rate_limits": None,
            },
        )


def generate_corpus(
    home: Path,
    sessions: int,
    seed: int,
    *,
    projects: int = 50,
    codex_share: float = 0.5,
    end: dt.datetime = END,
    size_scale: float = 1.0,
) -> dict:
    """Write ``sessions`` sessions (Claude Code and Codex, ``codex_share`` of them Codex) in
    ``projects`` projects under ``home`` (``home/.claude/projects`` and ``home/.codex/sessions``).
    ``size_scale`` multiplies every session's target size (0.1 for a quick small corpus).

    Returns ``{"sessions", "claude_sessions", "codex_sessions", "files", "bytes",
    "messages_approx", "projects", "claude_root", "codex_root"}`` (``messages_approx``: the
    conversation records written, an upper bound of the messages a harvest stores).
    """
    home = Path(home)
    g = _Gen(seed, end, projects)
    out: dict[str, Any] = {
        "sessions": sessions,
        "claude_sessions": 0,
        "codex_sessions": 0,
        "files": 0,
        "bytes": 0,
        "messages_approx": 0,
        "projects": projects,
        "claude_root": str(home / ".claude" / "projects"),
        "codex_root": str(home / ".codex" / "sessions"),
    }
    window = 30 * 86400
    for _ in range(sessions):
        project = g.rng.choice(g.projects)
        start = end - dt.timedelta(seconds=g.rng.randrange(3600, window))
        start = start.replace(microsecond=g.rng.randrange(0, 1000) * 1000)
        size = max(2_000, int(g.target_size() * size_scale))
        codex = g.rng.random() < codex_share
        made = (_codex if codex else _claude)(g, home, project, start, size)
        out["codex_sessions" if codex else "claude_sessions"] += 1
        out["files"] += made["files"]
        out["bytes"] += made["bytes"]
        out["messages_approx"] += made["messages"]
    return out
