"""night/lifecycle.py: the lock, "is a night running?", recovery, statuses and triggers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skillopt_sleep.config import load_settings
from skillopt_sleep.errors import NightError
from skillopt_sleep.night import lifecycle
from skillopt_sleep.night.lifecycle import NightStatus, Trigger
from skillopt_sleep.store import Store


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "s.db")
    yield s
    s.close()


def test_statuses_and_triggers_are_their_strings() -> None:
    assert NightStatus.NO_CHANGE == "no_change"
    assert str(NightStatus.INTERRUPTED) == "interrupted"
    assert f"{Trigger.CATCH_UP}" == "catch-up"
    assert Trigger("mcp") is Trigger.MCP


def test_begin_and_finish_write_the_nights_row(store: Store, tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "none.toml")
    nid = lifecycle.begin(store, settings, Trigger.MCP, dry_run=True)
    row = store.nights.get(nid)
    assert row is not None
    assert (row.status, row.trigger, row.pid, row.dry_run) == (
        "running",
        "mcp",
        os.getpid(),
        1,
    )
    lifecycle.finish(store, nid, NightStatus.NO_TASKS, seconds=1.5)
    row = store.nights.get(nid)
    assert row is not None
    assert (row.status, row.seconds) == ("no_tasks", 1.5)
    assert row.finished_at


def test_running_probes_the_lock_not_the_rows(store: Store) -> None:
    nid = store.nights.add(started_at="t0", status="running", pid=os.getpid(), trigger="cli")
    assert lifecycle.running(store) is None  # a free lock: nothing runs, whatever the row says
    with lifecycle.night_lock().acquire(timeout=0):
        now = lifecycle.running(store)
        assert now is not None
        assert (now.night_id, now.started_at) == (nid, "t0")
        assert now.since() == f" (night {nid}, started t0)"


def test_running_before_the_row_exists(store: Store) -> None:
    with lifecycle.night_lock().acquire(timeout=0):
        now = lifecycle.running(store)
        assert now is not None and now.night_id is None and now.since() == ""


def test_recover_with_the_lock_held_elsewhere_marks_only_dead_pids(store: Store) -> None:
    alive = store.nights.add(started_at="t", status="running", pid=os.getpid())
    dead = store.nights.add(started_at="t", status="running", pid=999999)
    with lifecycle.night_lock().acquire(timeout=0):
        assert lifecycle.recover(store) == 1
    assert store.nights.get(alive).status == "running"
    assert store.nights.get(dead).status == "interrupted"
    assert store.nights.get(dead).error == lifecycle.STOPPED
    assert lifecycle.recover(store) == 1  # the lock is free now: nobody runs it
    assert store.nights.get(alive).status == "interrupted"


def test_recover_ends_the_log_of_a_night_that_kept_one(store: Store) -> None:
    """A night killed mid-way: its own log gets the line saying how it ended; a night from
    before logs were kept gets no log."""
    from skillopt_sleep import paths
    from skillopt_sleep.night.log import NightLog, read_night_log

    logged = store.nights.add(started_at="t", status="running", pid=999999)
    older = store.nights.add(started_at="t", status="running", pid=999998)
    log = NightLog(logged)
    log.line(f"night {logged} started (daemon)")
    log.close()
    assert lifecycle.recover(store) == 2
    lines = read_night_log(logged).splitlines()
    assert len(lines) == 2
    assert lines[-1].endswith(f"night {logged} interrupted: {lifecycle.STOPPED}")
    assert not paths.night_log_path(older).exists()


def test_recover_by_the_lock_holder_marks_every_running_row(store: Store) -> None:
    store.nights.add(started_at="t", status="running", pid=os.getpid())
    with lifecycle.night_lock().acquire(timeout=0):
        assert lifecycle.recover(store, lock_held=True) == 1


def test_pid_alive_sees_through_a_zombie() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(200):  # exited but not reaped: a zombie
            if not lifecycle.pid_alive(proc.pid):
                break
            time.sleep(0.02)
        assert not lifecycle.pid_alive(proc.pid)
    finally:
        proc.wait()
    assert lifecycle.pid_alive(os.getpid())
    assert not lifecycle.pid_alive(None)


def test_run_night_refuses_while_another_holds_the_lock(store: Store, tmp_path: Path) -> None:
    from skillopt_sleep.night.run import run_night

    store.nights.add(started_at="t1", status="running", pid=os.getpid(), trigger="daemon")
    settings = load_settings(tmp_path / "none.toml")
    with lifecycle.night_lock().acquire(timeout=0):
        with pytest.raises(NightError, match=r"a night is running \(started t1\)"):
            run_night(store, settings, harvest_first=False)


def test_interrupt_leaves_a_night_that_finished_meanwhile_alone(store: Store) -> None:
    nid = store.nights.add(started_at="t", status="succeeded", pid=999999)
    assert store.nights.interrupt(nid, finished_at="t2", error="x") is False
    assert store.nights.get(nid).status == "succeeded"
