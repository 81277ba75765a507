"""One dispatch policy for every face: with a daemon running, the CLI's ``run`` and an agent's
MCP ``run_night`` hand a night to the daemon, or run it themselves, for the same reasons.

Everything is real: the daemon (``skillopt-sleep start``), the CLI (``python -m
skillopt_sleep run``), the MCP server under the SDK's own stdio client, and the simulator on
loopback behind the gated proxy.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from skillopt_sleep import daemon_client
from tests.helpers.daemon import DaemonHarness, GatedProxy, db_rows, wait_for

OVERRIDE = "SKILLOPT_SLEEP_EPOCHS"


def _mcp_run_night(harness: DaemonHarness, env: dict[str, str]) -> dict[str, Any]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def body() -> dict[str, Any]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "skillopt_sleep", "mcp"],
            env=env,
            cwd=str(harness.project),
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                res = await s.call_tool("run_night", {})
                assert not res.is_error, res.content[0].text
                assert res.structured_content is not None
                return dict(res.structured_content)

    return anyio.run(body)


def _cli_run(harness: DaemonHarness, env: dict[str, str]) -> dict[str, Any]:
    saved = harness.env
    harness.env = env
    try:
        proc = harness.cli("run", "--json", timeout=180)
    finally:
        harness.env = saved
    return json.loads(proc.stdout)


def _settled() -> bool:
    rows = db_rows("select status from nights")
    return bool(rows) and all(status != "running" for (status,) in rows)


def _daemon_idle() -> bool:
    return not daemon_client.daemon_status().night.running


@pytest.mark.slow  # a real daemon process
def test_cli_and_mcp_take_the_same_dispatch_decision(
    harness: DaemonHarness, sim_proxy: GatedProxy
) -> None:
    harness.write_demo_sessions()
    harness.night_config(sim_proxy.url)
    sim_proxy.open()
    harness.start()  # without any SKILLOPT_SLEEP_* settings variable

    # a settings variable the daemon does not have: both faces run the night themselves
    overridden = dict(harness.env, **{OVERRIDE: "1"})
    cli = _cli_run(harness, overridden)
    assert cli["via"] == "here" and cli["status"] in ("succeeded", "no_change"), cli
    assert OVERRIDE in cli["reason"] and "other SKILLOPT_SLEEP_* settings" in cli["reason"]
    mcp = _mcp_run_night(harness, overridden)
    assert mcp["via"] == "in-process", mcp
    assert mcp["reason"] == cli["reason"]
    wait_for(_settled, 120, what="the MCP server's night to finish")
    assert daemon_client.daemon_status().last_daemon_night is None  # the daemon ran none

    # the same config and environment as the daemon: both hand the night to it
    cli = _cli_run(harness, harness.env)
    assert cli["via"] == "daemon" and cli["status"] in ("succeeded", "no_change"), cli
    wait_for(_daemon_idle, 30, what="the daemon's worker to exit")
    mcp = _mcp_run_night(harness, harness.env)
    assert mcp["via"] == "daemon", mcp
    assert mcp["reason"] == cli["reason"]
    wait_for(_settled, 120, what="the daemon's night to finish")
    triggers = [t for (t,) in db_rows("select trigger from nights order by id")]
    assert triggers == ["cli", "mcp", "cli", "mcp"]
