"""``skillopt-sleep mcp``: the SDK's own client against the server run as a subprocess.

Every store here is prepared by a real night: the demo conversations written in Claude Code's
and Codex's on-disk formats, harvested, mined, replayed against the bundled simulator on
127.0.0.1, gated and staged (``night.run.run_night``). Nothing leaves the loopback interface.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
import pytest
import tomlkit
from mcp import ClientSession, StdioServerParameters, stdio_client

from skillopt_sleep.config import load_settings
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.night.run import night_lock, run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.clis import agent_binary

#: slow: an MCP server process per test (stdio or HTTP)
pytestmark = pytest.mark.slow

TOOLS = {
    "sleep_status",
    "list_proposals",
    "get_proposal",
    "adopt_proposal",
    "reject_proposal",
    "lift_refusal",
    "rollback",
    "run_night",
    "get_night",
    "list_tasks",
    "search_sessions",
    "get_skill",
}
EXISTING = "---\nname: learned\ndescription: my own notes\n---\n\n# Notes\n\nKeep commits small.\n"


@dataclass
class Env:
    root: Path
    home: Path
    sk_home: Path
    project: Path
    target: Path
    night_id: int
    proposal_id: str

    @property
    def db(self) -> Path:
        return self.sk_home / "state" / "skillopt.db"

    def environ(self) -> dict[str, str]:
        return {
            "SKILLOPT_SLEEP_HOME": str(self.sk_home),
            "HOME": str(self.home),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
        }


def prepare(root: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    """A skillopt home whose store holds one real, succeeded night with a staged proposal."""
    home, sk_home, project = root / "home", root / "skillopt-home", root / "webapp"
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True)
    write_conversations(home, project, DEMO_CONVERSATIONS)
    settings = demo_settings(home, project, "http://unused")
    target = Path(settings["document"]["path"])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(EXISTING.encode())
    with monkeypatch.context() as mp, serve("demo") as sim:
        mp.setenv("SKILLOPT_SLEEP_HOME", str(sk_home))
        store = Store(sk_home / "state" / "skillopt.db")
        try:
            result = run_night(
                store,
                load_settings(root / "none.toml", **demo_settings(home, project, sim.url)),
                env={},
                home=home,
            )
        finally:
            store.close()
    assert result.status == "succeeded", result
    return Env(root, home, sk_home, project, target, result.night_id, result.proposal_id)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return prepare(tmp_path / "a", monkeypatch)


@asynccontextmanager
async def connect(env: Env, *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "skillopt_sleep", "mcp", *args],
        env=env.environ(),
        cwd=str(env.root),
    )
    with open(env.root / "mcp-stderr.log", "a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def ok(
    session: ClientSession, name: str, args: dict[str, Any] | None = None
) -> dict[str, Any]:
    res = await session.call_tool(name, args or {})
    assert not res.is_error, f"{name}({args}) failed: {res.content[0].text}"
    assert res.structured_content is not None
    return res.structured_content


async def fails(session: ClientSession, name: str, args: dict[str, Any] | None = None) -> str:
    res = await session.call_tool(name, args or {})
    text = res.content[0].text if res.content else ""
    assert res.is_error, f"{name}({args}) should have failed, got {res.structured_content}"
    assert text and "\n" not in text, f"not a one-line reason: {text!r}"
    return text


def run(body) -> None:
    anyio.run(body)


# ---------------------------------------------------------------------------- listing
def test_lists_tools_resources_and_the_prompt(env: Env) -> None:
    async def body() -> None:
        async with connect(env) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == TOOLS
            for t in tools.values():
                assert t.description and len(t.description) < 400
                assert t.output_schema and t.output_schema.get("type") == "object"
            assert tools["sleep_status"].annotations.read_only_hint is True
            assert tools["adopt_proposal"].annotations.destructive_hint is True
            assert set(tools["adopt_proposal"].input_schema["required"]) == {"id", "base_hash"}
            templates = (await s.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["skillopt://proposals/{id}"]
            uris = {str(r.uri) for r in (await s.list_resources()).resources}
            assert "skillopt://reports/latest" in uris
            prompts = (await s.list_prompts()).prompts
            assert [(p.name, p.title) for p in prompts] == [
                ("review_last_night", "Review last night's proposal")
            ]

    run(body)


# ---------------------------------------------------------------------------- every tool
def test_every_tool_against_a_real_night(env: Env) -> None:
    pid = env.proposal_id

    async def body() -> None:
        async with connect(env) as s:
            st = await ok(s, "sleep_status")
            assert st["database"] == str(env.db)
            assert (
                st["last_night"]["id"] == env.night_id and st["last_night"]["status"] == "succeeded"
            )
            # the night's rules, and their copy for codex (whose sessions asked the tasks too)
            assert [p["id"] for p in st["pending_proposals"]] == [pid, f"{pid}-codex"]
            assert st["counts"]["sessions"] == len(DEMO_CONVERSATIONS) and st["counts"]["tasks"] > 0
            assert st["night_running"] is False
            assert set(st["harvest"]) == {"claude_code", "codex"}

            props = (await ok(s, "list_proposals"))["proposals"]
            assert [(p["id"], p["status"]) for p in props] == [
                (pid, "staged"),
                (f"{pid}-codex", "staged"),
            ]
            assert (await ok(s, "list_proposals", {"status": "adopted"}))["proposals"] == []

            p = await ok(s, "get_proposal", {"id": pid})
            assert p["target_path"] == str(env.target)
            assert p["val_before"] < p["val_after"]
            assert "+- Use `pnpm` instead of `npm`." in p["diff"]
            statuses = {e["status"] for e in p["edits"]}
            assert {"applied", "rejected"} <= statuses
            applied = [e for e in p["edits"] if e["status"] == "applied"]
            assert applied[0]["text"] == "Use `pnpm` instead of `npm`." and applied[0]["rationale"]
            assert p["val_tasks"] and all(t["after"] >= t["before"] for t in p["val_tasks"])
            assert p["test_tasks"] and p["cost"]["calls"] > 0
            assert p["report_uri"] == f"skillopt://proposals/{pid}"
            copies = p["summary"]["copies"]
            assert [(c["agent"], c["status"], c["proposal_id"]) for c in copies] == [
                ("codex", "staged", f"{pid}-codex")
            ]
            assert copies[0]["after"] > copies[0]["before"]

            n = await ok(s, "get_night", {"id": env.night_id})
            assert n["status"] == "succeeded" and n["proposal_id"] == pid and n["running"] is False
            assert n["summary"]["train"] >= 1

            tasks = await ok(s, "list_tasks")
            assert tasks["total"] == st["counts"]["tasks"]
            assert any("install" in t["intent"] for t in tasks["tasks"])
            assert any("pnpm" in c for t in tasks["tasks"] for c in t["corrections"])
            assert (await ok(s, "list_tasks", {"limit": 1}))["tasks"].__len__() == 1
            assert (await ok(s, "list_tasks", {"project": str(env.project)}))["total"] == tasks[
                "total"
            ]
            assert (await ok(s, "list_tasks", {"project": "/nowhere"}))["total"] == 0

            hits = (await ok(s, "search_sessions", {"query": "pnpm"}))["hits"]
            assert {h["agent"] for h in hits} == {"claude_code", "codex"}
            assert all("[pnpm]" in h["snippet"] for h in hits)
            codex = (await ok(s, "search_sessions", {"query": "pnpm", "agent": "codex"}))["hits"]
            assert codex and {h["agent"] for h in codex} == {"codex"}
            assert len((await ok(s, "search_sessions", {"query": "pnpm", "limit": 2}))["hits"]) == 2
            assert (await ok(s, "search_sessions", {"query": "pnpm", "project": "/nowhere"}))[
                "hits"
            ] == []
            # FTS syntax characters are searched as words rather than failing
            assert (await ok(s, "search_sessions", {"query": 'use "pnpm'}))["hits"]

            sk = await ok(s, "get_skill")
            assert sk["target"] == str(env.target) and sk["text"] == EXISTING
            assert sk["rules"] == [] and sk["managed_block"] is False
            assert (await ok(s, "get_skill", {"target": str(env.target)}))["sha256"] == p[
                "base_hash"
            ]

            md = (await s.read_resource(f"skillopt://proposals/{pid}")).contents[0].text
            assert f"# skillopt-sleep proposal {pid}" in md and "status: staged" in md
            latest = (await s.read_resource("skillopt://reports/latest")).contents[0].text
            assert f"proposal {pid}" in latest
            prompt = await s.get_prompt("review_last_night")
            text = prompt.messages[0].content.text
            assert "adopt_proposal" in text and f"proposal {pid}" in text

            # the write tools: reject here, adopt/rollback in their own tests
            rej = await ok(s, "reject_proposal", {"id": pid, "reason": "not now"})
            # the rules' staged copy for codex is withdrawn with them (no means no)
            assert rej == {
                "proposal_id": pid,
                "status": "rejected",
                "reason": "not now",
                "withdrawn": [f"{pid}-codex"],
                "rule": None,
            }
            assert env.target.read_bytes() == EXISTING.encode()
            # the refusal taken back: staged again with the copy it withdrew; nothing live
            lifted = await ok(s, "lift_refusal", {"id": pid})
            assert lifted == {
                "proposal_id": pid,
                "status": "staged",
                "was": "rejected",
                "copies": {f"{pid}-codex": "staged"},
            }
            assert env.target.read_bytes() == EXISTING.encode()
            assert "there is no refusal to lift" in await fails(s, "lift_refusal", {"id": pid})
            started = await ok(s, "run_night", {"dry_run": True})
            # a dry run takes no night number: its id is negative
            assert started["via"] == "in-process" and started["night_id"] == -1
            assert (await ok(s, "get_night", {"id": started["night_id"]}))["trigger"] == "mcp"

    run(body)


# ---------------------------------------------------------------------------- adopt / rollback
def test_adopt_via_mcp_writes_exactly_what_the_cli_adopt_writes(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    twin = prepare(tmp_path / "b", monkeypatch)  # an identical copy, adopted with the CLI
    staged = (env.sk_home / "state" / "proposals" / env.proposal_id / "document").read_bytes()

    async def body() -> None:
        async with connect(env) as s:
            p = await ok(s, "get_proposal", {"id": env.proposal_id})
            a = await ok(s, "adopt_proposal", {"id": env.proposal_id, "base_hash": p["base_hash"]})
            assert a["target_path"] == str(env.target) and a["backup_path"]
            assert Path(a["backup_path"]).read_bytes() == EXISTING.encode()
            sk = await ok(s, "get_skill")
            assert sk["rules"] == ["Use `pnpm` instead of `npm`."] and sk["managed_block"]
            assert (await ok(s, "list_proposals", {"status": "adopted"}))["proposals"][0][
                "id"
            ] == env.proposal_id
            # adopting twice is refused
            assert "not staged" in await fails(
                s, "adopt_proposal", {"id": env.proposal_id, "base_hash": p["base_hash"]}
            )

    run(body)

    proc = subprocess.run(
        [sys.executable, "-m", "skillopt_sleep", "adopt", twin.proposal_id],
        env=twin.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    twin_staged = (
        twin.sk_home / "state" / "proposals" / twin.proposal_id / "document"
    ).read_bytes()
    assert env.target.read_bytes() == staged and twin.target.read_bytes() == twin_staged
    # the two worlds differ only in where their project is (its section of the file names it)
    assert staged.replace(str(env.project).encode(), b"<project>") == twin_staged.replace(
        str(twin.project).encode(), b"<project>"
    )
    assert staged.startswith(EXISTING.encode()) and b"- Use `pnpm` instead of `npm`." in staged

    async def undo() -> None:
        async with connect(env) as s:
            r = await ok(s, "rollback", {"target": str(env.target)})
            assert r["proposal_id"] == env.proposal_id and r["restored_previous"] is True
            assert env.target.read_bytes() == EXISTING.encode()
            assert "nothing to roll back" in await fails(s, "rollback", {"target": str(env.target)})
            assert "nothing to roll back" in await fails(s, "rollback")

    run(undo)


def test_a_proposals_rules_are_adopted_or_refused_by_their_number(env: Env) -> None:
    pid = env.proposal_id

    async def body() -> None:
        async with connect(env) as s:
            p = await ok(s, "get_proposal", {"id": pid})
            [rule] = p["rules"]
            assert rule["n"] == 1 and rule["change"] == "adds" and rule["evidence"]
            assert rule["val_after"] > rule["val_before"] and rule["tokens"] > 0
            base = {"id": pid, "base_hash": p["base_hash"]}
            assert "has no rule 2" in await fails(s, "adopt_proposal", {**base, "rules": [2]})
            assert env.target.read_bytes() == EXISTING.encode()
            got = await ok(s, "reject_proposal", {"id": pid, "rule": 1, "reason": "not this"})
            # its only rule refused: the proposal is rejected, and its copy refuses it too
            assert got["status"] == "rejected" and got["rule"]["rule"] == rule["rule"]
            assert got["rule"]["remaining"] == 0 and got["rule"]["copies"] == [f"{pid}-codex"]
            again = await ok(s, "get_proposal", {"id": pid})
            assert again["rules"][0]["status"] == "refused"
            assert again["rules"][0]["reason"] == "not this"

    run(body)


def test_rollback_via_mcp_takes_ids_undoes_one_file_and_names_the_copies(env: Env) -> None:
    """The same service call as the CLI: a proposal's or a copy's id, one file per rollback,
    the copies still adopted named in the result, ``all_agents`` for every file."""
    pid, copy = env.proposal_id, f"{env.proposal_id}-codex"
    agents_md = env.home / ".codex" / "AGENTS.md"

    async def body() -> None:
        async with connect(env) as s:
            for p in (pid, copy):
                base = (await ok(s, "get_proposal", {"id": p}))["base_hash"]
                await ok(s, "adopt_proposal", {"id": p, "base_hash": base})
            adopted = agents_md.read_bytes()
            assert b"pnpm" in adopted and env.target.read_bytes() != EXISTING.encode()

            r = await ok(s, "rollback", {"target": pid})
            assert (r["proposal_id"], r["target_path"]) == (pid, str(env.target))
            assert r["still_adopted"] == [{"proposal_id": copy, "target_path": str(agents_md)}]
            assert r["copies_rolled_back"] == [] and r["still_staged"] == []
            assert env.target.read_bytes() == EXISTING.encode()
            assert agents_md.read_bytes() == adopted  # the copy's own file stays adopted
            statuses = {p["id"]: p["status"] for p in (await ok(s, "list_proposals"))["proposals"]}
            assert (statuses[pid], statuses[copy]) == ("rolled_back", "adopted")
            assert "not adopted: nothing to roll back" in await fails(
                s, "rollback", {"target": pid}
            )

            # all_agents through the rules' id rolls back the copy they left adopted
            r = await ok(s, "rollback", {"target": pid, "all_agents": True})
            assert r["proposal_id"] == copy and r["target_path"] == str(agents_md)
            assert r["restored_previous"] is False and not agents_md.exists()
            assert r["still_adopted"] == []
            assert "no proposal 'p999-codex'" in await fails(
                s, "rollback", {"target": "p999-codex"}
            )

    run(body)


# ---------------------------------------------------------------------------- errors
def test_every_error_is_a_one_line_tool_error_and_the_server_keeps_serving(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "SKILLOPT_SLEEP_HOME", str(env.sk_home)
    )  # night_lock() below: the server's lock
    pid = env.proposal_id
    before = env.target.read_bytes()
    outside = env.root / "elsewhere.md"
    outside.write_text("not managed\n")

    async def body() -> None:
        async with connect(env) as s:
            base = (await ok(s, "get_proposal", {"id": pid}))["base_hash"]
            # unknown ids
            assert "no proposal 'p999'" in await fails(s, "get_proposal", {"id": "p999"})
            assert "no proposal 'p999'" in await fails(
                s, "adopt_proposal", {"id": "p999", "base_hash": base}
            )
            assert "no proposal 'p999'" in await fails(s, "reject_proposal", {"id": "p999"})
            assert "no night 999" in await fails(s, "get_night", {"id": 999})
            from mcp.shared.exceptions import MCPError

            with pytest.raises(MCPError, match="no proposal 'p999'"):
                await s.read_resource("skillopt://proposals/p999")
            # stale base_hash, and a live file changed since the proposal was made
            assert "base_hash does not match" in await fails(
                s, "adopt_proposal", {"id": pid, "base_hash": "0" * 64}
            )
            env.target.write_bytes(before + b"\nedited by hand\n")
            assert "changed since proposal" in await fails(
                s, "adopt_proposal", {"id": pid, "base_hash": base}
            )
            env.target.write_bytes(before)
            # targets outside the managed roots
            for target in (str(outside), "/etc/passwd", "relative.md"):
                assert "outside the managed targets" in await fails(
                    s, "get_skill", {"target": target}
                )
                assert "outside the managed targets" in await fails(
                    s, "rollback", {"target": target}
                )
            # nothing adopted yet
            assert "nothing to roll back" in await fails(s, "rollback", {"target": str(env.target)})
            # bad arguments
            assert "bad arguments for get_night: id" in await fails(s, "get_night", {"id": "x"})
            assert "bad arguments for list_tasks: limit" in await fails(
                s, "list_tasks", {"limit": 0}
            )
            assert "bad arguments for get_proposal: id" in await fails(s, "get_proposal", {})
            assert "bad arguments for adopt_proposal: base_hash" in await fails(
                s, "adopt_proposal", {"id": pid}
            )
            assert "bad arguments for list_proposals: status" in await fails(
                s, "list_proposals", {"status": "bogus"}
            )
            assert "bad arguments for search_sessions: query" in await fails(
                s, "search_sessions", {"query": ""}
            )
            assert "unknown agent 'vim'" in await fails(
                s, "search_sessions", {"query": "npm", "agent": "vim"}
            )
            assert "absolute path" in await fails(
                s, "run_night", {"dry_run": True, "project": "webapp"}
            )
            assert "absolute path" in await fails(s, "list_tasks", {"project": "webapp"})
            assert "absolute path" in await fails(
                s, "search_sessions", {"query": "npm", "project": "."}
            )
            assert "not a directory" in await fails(s, "run_night", {"project": str(outside)})
            assert "Unknown tool" in await fails(s, "no_such_tool")
            # a night already running (the lock the CLI and the daemon take)
            lock = night_lock()
            lock.acquire(timeout=5)
            try:
                assert "a night is running" in await fails(s, "run_night", {"dry_run": True})
                assert (await ok(s, "sleep_status"))["night_running"] is True
            finally:
                lock.release()
            # after all that the server still serves and nothing was written
            st = await ok(s, "sleep_status")
            # the night's rules, and their copy for codex (whose sessions asked the tasks too)
            assert [p["id"] for p in st["pending_proposals"]] == [pid, f"{pid}-codex"] and st[
                "night_running"
            ] is False
            assert st["last_night"]["id"] == env.night_id  # no night was started

    run(body)
    assert env.target.read_bytes() == before
    assert outside.read_text() == "not managed\n"


# ---------------------------------------------------------------------------- run_night
def test_run_night_returns_at_once_and_get_night_follows_it(env: Env) -> None:
    with serve("demo") as sim:
        config = env.sk_home / "config" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(tomlkit.dumps(demo_settings(env.home, env.project, sim.url)), "utf-8")

        async def body() -> None:
            async with connect(env) as s:
                t0 = time.monotonic()
                started = await ok(s, "run_night", {})
                assert started["night_id"] == env.night_id + 1 and started["via"] == "in-process"
                assert started["status"] == "running"
                first = time.monotonic() - t0
                night = started
                while True:
                    night = await ok(s, "get_night", {"id": started["night_id"]})
                    if not night["running"]:
                        break
                    await anyio.sleep(0.1)
                # p1 was staged, not adopted: the same rule is learned again, and the night
                # points at the staged proposal that already says so instead of a duplicate
                assert night["status"] == "succeeded", night
                assert night["proposal_id"] == env.proposal_id
                props = {p["id"]: p["status"] for p in (await ok(s, "list_proposals"))["proposals"]}
                # codex's copy too: the same copy, certified again, is not staged twice
                assert props == {env.proposal_id: "staged", f"{env.proposal_id}-codex": "staged"}
                assert night["seconds"] is not None and first < 10
                assert "harvesting sessions" in night["progress"]
                assert any(line.startswith("epoch 1/1") for line in night["progress"])
                dry = await ok(s, "run_night", {"dry_run": True, "project": str(env.project)})
                while (night := await ok(s, "get_night", {"id": dry["night_id"]}))["running"]:
                    await anyio.sleep(0.05)
                assert night["status"] == "planned" and night["project"] == str(env.project)

        run(body)
        assert sim.stats.by_role  # the background night called the simulator


# ---------------------------------------------------------------------------- HTTP
def _http_server(env: Env) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillopt_sleep", "mcp", "--transport", "http", "--port", "0"],
        env=env.environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise AssertionError(f"the HTTP server exited {proc.returncode}")
        found = re.search(r"listening on (http://\S+/mcp)", line)
        if found:
            return proc, found.group(1)
    proc.kill()
    raise AssertionError("the HTTP server did not announce its URL")


def _other_address() -> str | None:
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


def test_http_transport_needs_the_token_and_listens_on_loopback_only(env: Env) -> None:
    proc, url = _http_server(env)
    try:
        port = int(url.split(":")[2].split("/")[0])
        assert url == f"http://127.0.0.1:{port}/mcp"
        token_file = env.sk_home / "state" / "mcp-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32

        listening = [
            c
            for c in psutil.Process(proc.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert [(c.laddr.ip, c.laddr.port) for c in listening] == [("127.0.0.1", port)]
        other = _other_address()
        if other:
            with pytest.raises(OSError):
                socket.create_connection((other, port), timeout=2).close()

        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        with httpx.Client(timeout=10, trust_env=False) as http:
            assert http.post(url, json=init, headers=headers).status_code == 401
            assert (
                http.post(
                    url, json=init, headers={**headers, "Authorization": "Bearer wrong"}
                ).status_code
                == 401
            )
            assert http.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
            good = http.post(
                url, json=init, headers={**headers, "Authorization": f"Bearer {token}"}
            )
            assert good.status_code == 200, good.text

        async def body() -> None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with client, streamable_http_client(url, http_client=client) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    assert {t.name for t in (await s.list_tools()).tools} == TOOLS
                    st = await ok(s, "sleep_status")
                    assert [p["id"] for p in st["pending_proposals"]] == [
                        env.proposal_id,
                        f"{env.proposal_id}-codex",
                    ]
                    assert "no proposal" in await fails(s, "get_proposal", {"id": "nope"})

        run(body)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # a port already taken: one line and exit 1, not a traceback
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "skillopt_sleep",
                "mcp",
                "--transport",
                "http",
                "--port",
                str(busy),
            ],
            env=env.environ(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{busy}: Address already in use; choose another "
        "--port (0 = any free port)"
    ], res.stderr
    # the token is reused on the next start, never rewritten
    proc2, _ = _http_server(env)
    try:
        assert (env.sk_home / "state" / "mcp-token").read_text().strip() == token
    finally:
        proc2.terminate()
        proc2.wait(timeout=10)


# ---------------------------------------------------------------------------- real agents
BIN = Path(__file__).resolve().parents[1] / "node_modules" / ".bin"
AGENT_PERSONA = """
name = "mcp-agent"
models = []
default_answer = "I can only check the sleep status. You asked: {prompt}"

[[answers]]
match = "sleep status"
text = "I checked the skillopt-sleep status."
tool = [%s]
tool_input = {}
"""
#: What each agent calls the server's sleep_status tool (Claude Code: mcp__<server>__<tool>).
AGENT_TOOL_NAMES = [
    "mcp__skillopt-sleep__sleep_status",
    "mcp__skillopt_sleep__sleep_status",
    "sleep_status",
]


def agent_persona(root: Path) -> Path:
    path = root / "mcp-agent.toml"
    path.write_text(AGENT_PERSONA % ", ".join(f'"{n}"' for n in AGENT_TOOL_NAMES), "utf-8")
    return path


def mcp_server_entry(env: Env) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "skillopt_sleep", "mcp"],
        "env": {"SKILLOPT_SLEEP_HOME": str(env.sk_home)},
    }


def agent_env(env: Env, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(env.home),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        **extra,
    }


@pytest.mark.cli
def test_claude_code_calls_sleep_status_and_its_transcript_holds_the_result(env: Env) -> None:
    import json

    claude = agent_binary("claude")
    config = env.root / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"skillopt-sleep": mcp_server_entry(env)}}))
    with serve(agent_persona(env.root), api_key="sim-key") as sim:
        proc = subprocess.run(
            [
                claude,
                "-p",
                "what is the sleep status?",
                "--output-format",
                "json",
                "--mcp-config",
                str(config),
                "--strict-mcp-config",
                "--allowedTools",
                "mcp__skillopt-sleep__sleep_status",
            ],
            cwd=env.project,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            env=agent_env(
                env,
                ANTHROPIC_BASE_URL=sim.url,
                ANTHROPIC_API_KEY="sim-key",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                DISABLE_AUTOUPDATER="1",
                ENABLE_TOOL_SEARCH="false",
            ),
        )  # offer MCP tools directly, not deferred
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = json.loads(proc.stdout)
        assert out["result"] == "I checked the skillopt-sleep status."
        tools = [r["tool"] for r in sim.stats.requests if r["endpoint"] == "/messages"]
        assert "mcp__skillopt-sleep__sleep_status" in tools, str(
            [r.get("tools") for r in sim.stats.requests]
        )
    transcript = next((env.home / ".claude" / "projects").glob(f"*/{out['session_id']}.jsonl"))
    results = []
    for line in transcript.read_text("utf-8").splitlines():
        rec = json.loads(line)
        content = (rec.get("message") or {}).get("content")
        if rec.get("type") == "user" and isinstance(content, list):
            results += [c for c in content if c.get("type") == "tool_result"]
    assert results, "no tool result in the transcript"
    text = json.dumps(results)
    assert env.proposal_id in text and "pending_proposals" in text and str(env.db) in text
    assert not any(r.get("is_error") for r in results)


@pytest.mark.cli
def test_codex_calls_sleep_status_and_its_rollout_holds_the_result(env: Env) -> None:
    import json

    codex = agent_binary("codex")
    codex_home = env.home / "codex"
    codex_home.mkdir()
    with serve(agent_persona(env.root), api_key="sim-key") as sim:
        server = mcp_server_entry(env)
        (codex_home / "config.toml").write_text(
            'model = "sim"\nmodel_provider = "sim"\n\n[model_providers.sim]\nname = "Simulator"\n'
            f'base_url = "{sim.url}/v1"\nwire_api = "responses"\nenv_key = "SIM_API_KEY"\n\n'
            "[mcp_servers.skillopt-sleep]\n"
            f"command = {json.dumps(server['command'])}\nargs = {json.dumps(server['args'])}\n"
            f"env = {{ SKILLOPT_SLEEP_HOME = {json.dumps(str(env.sk_home))} }}\n"
            # a cold start (no .pyc yet, a loaded CI machine) can exceed Codex's 10 s default;
            # `required`: Codex 0.169 otherwise sends the first turn without the tools of a
            # server still starting (seen on a loaded machine)
            "startup_timeout_sec = 120\nrequired = true\n",
            "utf-8",
        )
        proc = subprocess.run(
            [codex, "exec", "--skip-git-repo-check", "what is the sleep status?"],
            cwd=env.project,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            env=agent_env(env, CODEX_HOME=str(codex_home), SIM_API_KEY="sim-key"),
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        offered = [r.get("tools") for r in sim.stats.requests]
        called = [r["tool"] for r in sim.stats.requests if r.get("tool")]
        # Codex offers MCP tools as one Responses-API "namespace" tool; the simulator answers
        # {"type": "function_call", "namespace": "mcp__skillopt_sleep", "name": "sleep_status"}
        assert called, f"no tool was called; offered: {offered}; codex said: {proc.stderr[-3000:]}"
        assert proc.stdout.strip() == "I checked the skillopt-sleep status.", proc.stdout
    rollout = next((codex_home / "sessions").rglob("rollout-*.jsonl"))
    text = rollout.read_text("utf-8")
    assert "sleep_status" in text
    outputs = [json.loads(line) for line in text.splitlines()]
    results = [
        r
        for r in outputs
        if r.get("type") == "response_item"
        and r["payload"].get("type")
        in ("function_call_output", "mcp_tool_call_output", "custom_tool_call_output")
    ]
    assert results, "no tool output in the rollout"
    blob = json.dumps(results)
    assert env.proposal_id in blob and "pending_proposals" in blob


# ---------------------------------------------------------------------------- notice
def test_sleep_status_says_a_proposal_is_ready_until_someone_looks(env: Env) -> None:
    pid = env.proposal_id

    async def body() -> None:
        async with connect(env) as s:
            st = await ok(s, "sleep_status")
            notice = st["notice"]
            assert notice and "ready, not yet reviewed" in notice
            assert f"{pid} for {env.target}" in notice and "get_proposal" in notice
            assert [p["seen"] for p in st["pending_proposals"]] == [False, False]
            as_resource = (await s.read_resource("skillopt://status")).contents[0].text
            assert f"{pid} for {env.target}" in as_resource
            await ok(s, "get_proposal", {"id": pid})  # the agent looked at it
            st = await ok(s, "sleep_status")
            seen = {p["id"]: p["seen"] for p in st["pending_proposals"]}
            assert seen == {pid: True, f"{pid}-codex": False}
            assert f"{pid} for" not in st["notice"] and f"{pid}-codex for" in st["notice"]
            md = await s.read_resource(f"skillopt://proposals/{pid}-codex")
            assert md.contents[0].text
            assert (await ok(s, "sleep_status"))["notice"] is None
        # another session (a new server process) remembers what was seen
        async with connect(env) as s:
            assert (await ok(s, "sleep_status"))["notice"] is None

    run(body)
