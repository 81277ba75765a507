"""Reads never write: ``status`` shows a night left running by a dead process as
interrupted, and leaves the database as it found it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from skillopt_sleep.night import lifecycle
from skillopt_sleep.status import collect_status
from skillopt_sleep.store import Store
from tests.helpers.store import db_rows


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_status_on_a_stale_running_night_reports_it_interrupted_and_writes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    store = Store(db)
    # as left by a night killed with -9: "running", its lock released by the kernel
    nid = store.nights.add(
        started_at="2026-11-30T01:00:00+00:00", status="running", pid=999999, trigger="cli"
    )
    store.close()  # the last connection: the WAL is checkpointed into the file
    before_bytes = _digest(db)
    peek = Store(db)
    before_rows = db_rows(peek, "nights")
    peek.close()
    assert lifecycle.lock_free()

    reader = Store(db)
    data = collect_status(reader).model_dump(mode="json")
    reader.close()  # the last connection again: anything it wrote would reach the file

    assert data["last_night"]["status"] == "interrupted"
    assert data["last_night"]["error"] == lifecycle.STOPPED
    assert data["nights"][0]["status"] == "interrupted"
    assert data["last_error"] == lifecycle.STOPPED
    assert _digest(db) == before_bytes
    after = Store(db)
    assert db_rows(after, "nights") == before_rows
    assert after.nights.get(nid).status == "running"  # the next night marks it
    assert lifecycle.recover(after) == 1
    assert after.nights.get(nid).status == "interrupted"
    after.close()


def test_status_shows_a_running_night_as_running_while_it_holds_the_lock(
    tmp_path: Path,
) -> None:
    import os

    store = Store(tmp_path / "s.db")
    store.nights.add(started_at="2026-11-30T01:00:00+00:00", status="running", pid=os.getpid())
    lock = lifecycle.night_lock()
    with lock.acquire(timeout=0):
        assert collect_status(store).model_dump(mode="json")["nights"][0]["status"] == "running"
    assert collect_status(store).model_dump(mode="json")["nights"][0]["status"] == "interrupted"
    store.close()
