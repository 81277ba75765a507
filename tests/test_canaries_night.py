"""Canary suite, the long road: every canary shape (Claude Code and Codex logs, every
placement) is harvested by the CLI, and a few shapes also ride in the prompts, answers and
corrections of the recurring tasks a night trains on, so the prompts the night builds carry
their (redacted) text. The daemon is started and runs the night (``run`` is dispatched to it;
its worker writes ``night.log``) against the simulator (target and optimizer, full request
log); the proposal is shown and adopted, every read command runs, and the real MCP server
answers every read tool, resource and prompt. Then no piece of any secret is in: the database
files (main, WAL, shared memory), any file of the state folder (reports, proposal folders,
logs, outbox), the adopted live file, the simulator's full request log (prompts and bodies),
the CLI's stdout and stderr, or the MCP results.

The full set of shapes goes through harvest, the store, search and MCP (cheap); the night's
prompts carry the :data:`NIGHT_SHAPES` (one per kind of token: prefix key, provider token, URL
credential, secret next to a word, password in prose) to keep the test near a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from skillopt_sleep.demo import DEMO_CONVERSATIONS
from skillopt_sleep.simulator import serve
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.canaries import MARK, WRITERS, canaries, db_bytes, leaks
from tests.helpers.cli_run import skillopt_in_process

CANARIES = canaries()
BY_NAME = {c.name: c for c in CANARIES}
NIGHT_SHAPES = [
    "anthropic",
    "github_classic",
    "url_credentials",
    "token_near_word",
    "password_prose",
]


def _night_conversations() -> list[tuple[str, list[tuple[str, str, str | None]]]]:
    """The demo's recurring conversations with a canary in each prompt, answer and
    correction (the same canary for every occurrence of a conversation's turn)."""
    out = []
    for i, (agent, turns) in enumerate(DEMO_CONVERSATIONS):
        c = BY_NAME[NIGHT_SHAPES[i % len(NIGHT_SHAPES)]]
        out.append(
            (
                agent,
                [
                    (
                        f"{ask} ({MARK} {c.text})",
                        f"{answer} ({MARK} {c.text})",
                        None if fix is None else f"{fix} ({MARK} {c.text})",
                    )
                    for ask, answer, fix in turns
                ],
            )
        )
    return out


def _config(path: Path, home: Path, project: Path, url: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    backend = f'name = "openai_compatible"\nbase_url = "{url}/v1"\nmodel = "sim"\n'
    backend += 'api_key = "sk-test"\nmax_retries = 1\ntimeout = 20\n'
    path.write_text(
        f'project = "{project}"\nepochs = 1\n'
        f'[sources.claude_code]\nroots = ["{home / ".claude" / "projects"}"]\n'
        f'[sources.codex]\nroots = ["{home / ".codex" / "sessions"}"]\n'
        f"[target]\n{backend}[optimizer]\n{backend}"
        f'[document]\nkind = "path"\npath = "{project / "AGENTS.md"}"\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.slow  # a whole night, adopt and an MCP server process
def test_no_canary_through_a_night_adopt_reports_logs_stdout_and_mcp(
    isolated_home: Path, tmp_path: Path
) -> None:
    home = isolated_home
    for source in ("claude_code", "codex"):
        for n, c in enumerate(CANARIES):
            WRITERS[source](home, c, n)
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(home, project, _night_conversations())
    env = dict(os.environ, COLUMNS="200")
    outputs: list[str] = []

    def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
        proc = skillopt_in_process(*args, env=env, timeout=180)
        outputs.extend([proc.stdout, proc.stderr])
        if ok:
            assert proc.returncode == 0, (args, proc.stderr[-2000:])
        return proc

    cli("harvest")
    state = Path(env["SKILLOPT_SLEEP_HOME"])
    with serve("demo", full_log=True) as sim:
        sim.stats.keep = 100_000
        cfg = _config(state / "config" / "config.toml", home, project, sim.url)
        # the daemon runs the night (its worker's stderr goes to night.log) and watches logs
        started = cli("start").stdout
        daemon = int(started.split("pid ")[1].split(")")[0])
        try:
            night = json.loads(cli("run", "--json").stdout)
            assert night["via"] == "daemon", night
            cli("logs")
        finally:
            cli("stop", "--timeout", "20", ok=False)
            if psutil.pid_exists(daemon):
                psutil.Process(daemon).kill()
        requests = list(sim.stats.requests)
    assert cfg.is_file()
    assert night["status"] == "succeeded", night
    assert (state / "state" / "night.log").stat().st_size > 0  # the worker wrote its log
    pid = night["proposal_id"]
    # the night's prompts did carry the canaries' (redacted) text
    sent = json.dumps(requests, ensure_ascii=False)
    assert requests and MARK in sent and "[REDACTED:" in sent
    assert {r.get("role") for r in requests} >= {"target", "reflect"}

    for args in (
        ("status",),
        ("status", "--json"),
        ("proposals",),
        ("proposals", "--json"),
        ("show", pid),
        ("show", pid, "--json"),
        ("nights",),
        ("nights", "--json"),
        ("tasks",),
        ("tasks", "--json"),
        ("search", MARK),
        ("search", MARK, "--json"),
        ("logs",),
        ("outbox",),
        ("outbox", "--json"),
        ("export", "proposal", pid),
        ("export", "history", "--format", "json"),
    ):
        cli(*args)
    hits = json.loads(cli("search", MARK, "--json").stdout)["hits"]
    assert hits and all(MARK in h["snippet"] for h in hits)
    for sid in sorted({h["session_id"] for h in hits})[:6]:
        cli("session", "show", sid)
    for c in CANARIES[::7]:  # a query is echoed (the user typed it): nothing else of it
        res = cli("search", c.secret[:40], ok=False)
        outputs[-2:] = [o.replace(c.secret[:40], "[query]") for o in outputs[-2:]]
        assert res.returncode in (0, 1) and "Traceback" not in res.stderr
    cli("adopt", pid)
    live = project / "AGENTS.md"
    assert live.is_file()

    mcp_answers = _mcp_answers(env, tmp_path, night["night_id"], pid, str(live))
    assert any(MARK in a for a in mcp_answers)  # the tools did return the carrier texts

    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.name == "report.md" for p in files)
    found = {
        str(p.relative_to(state)): leaks(p.read_bytes(), CANARIES)
        for p in files
        if leaks(p.read_bytes(), CANARIES)
    }
    assert found == {}
    assert leaks(db_bytes(state / "state" / "skillopt.db"), CANARIES) == []
    assert leaks(live.read_bytes(), CANARIES) == []
    assert leaks(sent.encode(), CANARIES) == []
    assert leaks("\n".join(outputs).encode(), CANARIES) == []
    assert leaks("\n".join(mcp_answers).encode(), CANARIES) == []


def _mcp_answers(env: dict, tmp_path: Path, night_id: int, pid: str, live: str) -> list[str]:
    """Every read tool, resource and prompt of the real MCP server, as JSON text."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "skillopt_sleep", "mcp"],
        env={k: v for k, v in env.items() if k in ("HOME", "SKILLOPT_SLEEP_HOME", "PATH")},
        cwd=str(tmp_path),
    )
    calls: list[tuple[str, dict]] = [
        ("sleep_status", {}),
        ("list_proposals", {}),
        ("get_proposal", {"id": pid}),
        ("get_night", {"id": night_id}),
        ("list_tasks", {"limit": 500}),
        ("search_sessions", {"query": MARK, "limit": 100}),
        ("get_skill", {"target": live}),
    ]
    answers: list[str] = []

    async def main() -> None:
        with open(tmp_path / "mcp-stderr.log", "a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    for name, args in calls:
                        res = await session.call_tool(name, args)
                        assert not res.is_error, (name, res.content)
                        answers.append(json.dumps(res.structured_content))
                        answers.append(json.dumps([c.model_dump() for c in res.content]))
                    for uri in (
                        f"skillopt://proposals/{pid}",
                        "skillopt://reports/latest",
                        "skillopt://status",
                    ):
                        got = await session.read_resource(uri)  # type: ignore[arg-type]
                        answers.append(json.dumps([c.model_dump() for c in got.contents]))
                    prompt = await session.get_prompt("review_last_night")
                    answers.append(json.dumps([m.model_dump() for m in prompt.messages]))

    anyio.run(main)
    answers.append((tmp_path / "mcp-stderr.log").read_text("utf-8"))
    return answers
