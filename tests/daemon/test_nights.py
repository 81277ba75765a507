"""Nights through the daemon: run-now, the cron schedule, catch-up, one at a time, crashes."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time

import psutil
import pytest

from skillopt_sleep import daemon_client
from skillopt_sleep.errors import NightError
from skillopt_sleep.results import Trigger
from skillopt_sleep.service import Service
from tests.helpers.daemon import DaemonHarness, GatedProxy, db_rows, wait_for

#: slow: nights in a real daemon process
pytestmark = pytest.mark.slow


def _nights() -> list[tuple]:
    return db_rows("select id, status, trigger, proposal_id from nights order by id")


def _hms(delta_seconds: float) -> str:
    return (dt.datetime.now() + dt.timedelta(seconds=delta_seconds)).strftime("%H:%M:%S")


def test_run_now_stages_a_proposal_and_a_second_is_refused(
    harness: DaemonHarness, sim_proxy: GatedProxy
) -> None:
    harness.write_demo_sessions()
    live = harness.write_live_skill()
    harness.night_config(sim_proxy.url)
    harness.start()
    first = Service().run_night(wait=False, trigger=Trigger.MCP)
    assert first.via == "daemon" and first.night_id is not None
    wait_for(lambda: sim_proxy.seen > 0, 30, what="the night to call the model")
    with pytest.raises(NightError, match=r"a night is running \(started 20"):
        Service().run_night(wait=True, trigger=Trigger.CLI)
    # the in-process CLI path shares the same lock
    cli = harness.cli("run", check=False)
    assert cli.returncode == 1 and "a night is running (started" in cli.stderr
    sim_proxy.open()
    wait_for(lambda: _nights() and _nights()[0][1] != "running", 60, what="the night to finish")
    ((nid, status, trigger, proposal),) = _nights()
    assert (status, trigger) == ("succeeded", "mcp") and proposal
    assert db_rows("select status from proposals where id = ?", (proposal,)) == [("staged",)]
    assert harness.skill.read_bytes() == live  # staged, never written live

    # and a waited run-now returns the result (once the first worker process has exited)
    wait_for(
        lambda: not daemon_client.daemon_status().model_dump()["night"]["running"],
        30,
        what="the worker to exit",
    )
    reply = Service().run_night(wait=True, trigger=Trigger.CLI)
    assert reply.via == "daemon" and reply.result is not None
    assert reply.result.status in ("succeeded", "no_change")
    assert len(_nights()) == 2


def test_plain_cli_run_goes_through_the_running_daemon(
    harness: DaemonHarness, sim_proxy: GatedProxy
) -> None:
    harness.write_demo_sessions()
    harness.night_config(sim_proxy.url)
    sim_proxy.open()
    harness.start()
    proc = harness.cli("run", "--json", timeout=120)
    result = json.loads(proc.stdout)
    assert result["via"] == "daemon" and result["status"] == "succeeded"
    ((nid, status, trigger, proposal),) = _nights()
    assert (nid, status, trigger, proposal) == (
        result["night_id"],
        "succeeded",
        "cli",
        result["proposal_id"],
    )
    human = harness.cli("run", timeout=120)
    assert "(run by the daemon)" in human.stdout
    # a settings variable in the caller's environment: the daemon would not see it, so the
    # night runs in this process (and fails on the unknown model, as it must)
    env = dict(harness.env, SKILLOPT_SLEEP_TARGET__MODEL="no-such-model")
    proc = subprocess.run(
        [sys.executable, "-m", "skillopt_sleep", "run"],
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        cwd=str(harness.project),
    )
    assert "run by the daemon" not in proc.stdout


def test_a_plain_run_is_not_handed_to_a_daemon_with_another_config(
    harness: DaemonHarness, sim_proxy: GatedProxy, tmp_path
) -> None:
    harness.write_demo_sessions()
    default = harness.night_config(sim_proxy.url)
    other = tmp_path / "other.toml"
    other.write_text(default.read_text())
    sim_proxy.open()
    started = harness.cli("--config", str(other), "start")
    assert "started (pid" in started.stdout
    proc = harness.cli("run", timeout=120, check=False)
    assert (
        f"the daemon runs with another config ({other.resolve()}): running the night here"
        in proc.stderr
    )
    assert "run by the daemon" not in proc.stdout and proc.returncode == 0, proc.stderr
    [(nid, status, trigger, _)] = _nights()
    assert (status, trigger) == ("succeeded", "cli")
    assert (
        daemon_client.daemon_status().model_dump()["last_daemon_night"] is None
    )  # the daemon ran nothing


def test_scheduler_triggered_night(harness: DaemonHarness, sim_proxy: GatedProxy) -> None:
    harness.write_demo_sessions()
    harness.night_config(sim_proxy.url, schedule=_hms(4))
    sim_proxy.open()
    harness.start()
    status = daemon_client.daemon_status().model_dump()
    assert not status["next_night"]["pending"]
    assert _nights() == []  # the first start never "catches up"
    wait_for(lambda: _nights() and _nights()[0][1] != "running", 60, what="the scheduled night")
    ((nid, status_, trigger, proposal),) = _nights()
    assert (status_, trigger) == ("succeeded", "schedule") and proposal
    st = daemon_client.daemon_status().model_dump()
    assert st["last_scheduled"]["trigger"] == "schedule"
    assert st["next_night"]["pending"] is False


def test_missed_night_catch_up_runs_exactly_once(
    harness: DaemonHarness, sim_proxy: GatedProxy
) -> None:
    harness.write_demo_sessions()
    sim_proxy.open()
    harness.night_config(sim_proxy.url, schedule=_hms(3 * 3600), misfire_grace_seconds=5)
    harness.start()
    harness.cli("stop")
    assert _nights() == []
    # "the clock moved past the scheduled time while the daemon was stopped"
    harness.night_config(sim_proxy.url, schedule=_hms(-120), misfire_grace_seconds=5)
    harness.start()
    wait_for(lambda: _nights() and _nights()[0][1] != "running", 60, what="the catch-up night")
    assert [(n[1], n[2]) for n in _nights()] == [("succeeded", "catch-up")]
    harness.cli("stop")
    harness.start()  # a second restart the same day
    st = daemon_client.daemon_status().model_dump()
    assert st["next_night"]["pending"] is False
    time.sleep(3)  # give a wrongly-repeated catch-up the chance to show (bounded)
    assert len(_nights()) == 1


def test_kill9_during_night_marks_it_interrupted(
    harness: DaemonHarness, sim_proxy: GatedProxy
) -> None:
    harness.write_demo_sessions()
    live = harness.write_live_skill()
    harness.night_config(sim_proxy.url)
    pid = harness.start()
    wait_for(
        lambda: db_rows("select count(*) from sessions") == [(11,)], 20, what="sessions ingested"
    )
    sessions_before = db_rows("select id, n_messages from sessions order by id")
    reply = Service().run_night(wait=False, trigger=Trigger.DAEMON)
    assert reply.via == "daemon"
    worker = daemon_client.daemon_status().night.pid
    wait_for(lambda: sim_proxy.seen > 0, 30, what="the night to call the model")
    assert _nights()[0][1] == "running"
    harness.kill9(pid)
    # the worker dies with the daemon (parent-death signal), releasing the night lock
    wait_for(
        lambda: (
            not psutil.pid_exists(worker) or psutil.Process(worker).status() == psutil.STATUS_ZOMBIE
        ),
        30,
        what="the night worker to die",
    )
    harness.start()
    try:
        wait_for(lambda: _nights()[0][1] == "interrupted", 20, what="the night marked interrupted")
    except AssertionError:
        from skillopt_sleep import paths

        log = (paths.state_dir() / "night.log").read_text()[-3000:]
        dlog = (paths.state_dir() / "daemon.log").read_text()[-3000:]
        rows = db_rows("select id, status, pid, error from nights")
        raise AssertionError(f"{rows}\n{log}\n{dlog}") from None
    assert db_rows("select count(*) from proposals") == [(0,)]
    assert harness.skill.read_bytes() == live
    assert db_rows("select id, n_messages from sessions order by id") == sessions_before
    # a new night can run afterwards
    wait_for(
        lambda: not daemon_client.daemon_status().model_dump()["night"]["running"],
        30,
        what="no night running",
    )
    sim_proxy.open()
    reply = Service().run_night(wait=True, trigger=Trigger.DAEMON)
    assert reply.result is not None and reply.result.status == "succeeded"
    assert harness.skill.read_bytes() == live


@pytest.mark.parametrize("same_config", [True, False])
def test_mcp_run_night_goes_to_the_daemon_only_with_the_same_config(
    harness: DaemonHarness, sim_proxy: GatedProxy, tmp_path, same_config
) -> None:
    """An agent's `run_night` through the MCP server (a real stdio client): handed to the
    running daemon when it was started with the server's config file, run in the server's
    own process when the daemon runs with another one."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    harness.write_demo_sessions()
    default = harness.night_config(sim_proxy.url)
    sim_proxy.open()
    if same_config:
        harness.start()
    else:
        other = tmp_path / "other.toml"
        other.write_text(default.read_text())
        assert "started (pid" in harness.cli("--config", str(other), "start").stdout

    async def body() -> dict:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "skillopt_sleep", "mcp"],
            env=harness.env,
            cwd=str(harness.project),
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                res = await s.call_tool("run_night", {})
                assert not res.is_error, res.content[0].text
                started = res.structured_content
                # as an agent does: poll get_night while the session (and with it a night
                # run in the server's own process) lives
                with anyio.fail_after(120):
                    while True:
                        got = await s.call_tool("get_night", {"id": started["night_id"]})
                        assert not got.is_error, got.content[0].text
                        if not got.structured_content["running"]:
                            return started
                        await anyio.sleep(0.2)

    started = anyio.run(body)
    assert started["via"] == ("daemon" if same_config else "in-process")
    wait_for(lambda: _nights() and _nights()[0][1] != "running", 30, what="the night's row")
    [(nid, status, trigger, _)] = _nights()
    assert nid == started["night_id"] and status == "succeeded" and trigger == "mcp"
    if same_config:  # the daemon records the worker's result once it has exited
        wait_for(
            lambda: daemon_client.daemon_status().model_dump()["last_daemon_night"],
            30,
            what="the daemon's record",
        )
    ran = daemon_client.daemon_status().model_dump()["last_daemon_night"]
    if same_config:
        assert ran and ran["ok"] and ran["result"]["night_id"] == nid
    else:
        assert ran is None  # the daemon ran nothing: the MCP server did


def test_a_daemon_night_harvests_once(harness: DaemonHarness, sim_proxy: GatedProxy) -> None:
    """The worker harvests under the ingest lock and tells run_night not to harvest again:
    one harvest pass (one ``harvest_runs`` row) per enabled source per night."""
    from skillopt_sleep import paths
    from skillopt_sleep.config import load_settings

    harness.write_demo_sessions()
    harness.night_config(sim_proxy.url)
    sim_proxy.open()
    harness.start()
    enabled = sorted(n for n, c in load_settings().sources.items() if c.enabled)
    assert enabled  # the demo config harvests Claude Code and Codex
    # the daemon's first job is a full pass (one row per source): let it finish first
    wait_for(
        lambda: (daemon_client.daemon_status().model_dump().get("last_ingest") or {}).get("full"),
        30,
        what="the daemon's first full pass",
    )
    before = db_rows("select max(id) from harvest_runs")[0][0] or 0
    reply = Service().run_night(wait=True, trigger=Trigger.CLI)
    assert reply.via == "daemon", reply
    assert reply.result is not None and reply.result.status in ("succeeded", "no_change"), reply
    night_runs = db_rows("select source from harvest_runs where id > ? order by source", (before,))
    assert [r[0] for r in night_runs] == enabled
    night_log = (paths.state_dir() / "night.log").read_text("utf-8")
    assert "harvest: skipped (harvested before the night)" in night_log
    # the worker also wrote the night's own log
    own = paths.night_log_path(reply.result.night_id).read_text("utf-8")
    assert f"night {reply.result.night_id} started (cli)" in own
    assert "harvest: skipped (harvested before the night)" in own


def test_the_log_line_of_a_finished_night_names_every_proposal_it_staged():
    from skillopt_sleep.daemon.nights import finished_line
    from skillopt_sleep.results import BlockResult, NightCost, NightResult, NightSummary

    def line(summary: NightSummary, proposal_id: str | None) -> str:
        result = NightResult(
            night_id=4,
            status="succeeded",
            target_path="/h/.claude/CLAUDE.md",
            summary=summary,
            proposal_id=proposal_id,
            cost=NightCost(),
            seconds=1.0,
        )
        return finished_line(result.model_dump(mode="json"))

    blocks = [
        BlockResult(section="/src/web", status="succeeded", proposal_id="p4"),
        BlockResult(section="/src/api", status="no_change"),
        BlockResult(section=None, status="succeeded", proposal_id="p5"),
    ]
    assert (
        line(NightSummary(blocks=blocks), "p4") == "night 4 finished: succeeded, proposals p4, p5"
    )
    assert line(NightSummary(), "p4") == "night 4 finished: succeeded, proposal p4"
    assert line(NightSummary(), None) == "night 4 finished: succeeded"
