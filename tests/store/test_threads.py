"""One writer: threads sharing a store never interleave each other's transactions, and an
SQLite error of our own making is never reported as a damaged database."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from skillopt_sleep.store import CachedResponse, Store, machine_failure
from tests.helpers.store import db_rows, ensure_night

THREADS = 8
PUTS = 60


def _response(i: int) -> CachedResponse:
    return CachedResponse(
        text=f"answer {i}", tool_calls="[]", input_tokens=i, output_tokens=1, seconds=0.0
    )


def test_worker_threads_write_and_read_while_the_main_thread_holds_transactions(
    tmp_path: Path,
) -> None:
    """Eight threads put and get cache entries and add rollouts while the main thread runs
    write transactions with nested savepoints, one of them rolled back: every write lands
    once, the rolled-back one never, and no thread sees an error."""
    store = Store(tmp_path / "s.db")
    ensure_night(store, 1)
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS + 1)

    def worker(w: int) -> None:
        try:
            start.wait()
            for i in range(PUTS):
                key = f"w{w}-{i}"
                store.cache.put(key, _response(i))
                got = store.cache.get(key)
                assert got is not None and got.text == f"answer {i}", (key, got)
                store.rollouts.add(night_id=1, task_id=key, phase="stress", score=1.0)
        except BaseException as exc:  # collected: the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    start.wait()
    for i in range(40):
        with store.write():
            store.nights.add(started_at=f"2026-12-01T00:00:{i % 60:02d}+00:00", status="done")
            with store.write():  # nested: a savepoint in this thread's transaction
                store.cache.put(f"main-{i}", _response(i))
        try:
            with store.write():
                store.cache.put(f"gone-{i}", _response(i))
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
    for t in threads:
        t.join()

    assert errors == []
    keys = {r["key"] for r in db_rows(store, "rollout_cache")}
    assert len(keys) == THREADS * PUTS + 40
    assert not any(k.startswith("gone-") for k in keys)
    assert len(db_rows(store, "rollouts", "phase = ?", ["stress"])) == THREADS * PUTS
    assert len(db_rows(store, "nights")) == 40 + 1  # and the rollouts' night
    assert store.db.execute("pragma integrity_check").fetchone()[0] == "ok"
    store.close()


def test_only_failures_of_the_machine_or_the_file_are_reported_as_such(tmp_path: Path) -> None:
    # our bug: a savepoint released twice (what interleaved transactions used to do)
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("RELEASE SAVEPOINT nowhere")
    except sqlite3.OperationalError as exc:
        assert "no such savepoint" in str(exc)
        assert machine_failure(exc) is None
    else:
        raise AssertionError("RELEASE of an unknown savepoint did not fail")

    # the file: not a database at all
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database " * 200)
    try:
        sqlite3.connect(bad).execute("select * from sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        hint = machine_failure(exc)
        assert hint is not None and "move skillopt.db aside" in hint
    else:
        raise AssertionError("a file that is no database was read")

    # the machine: a read-only database
    ro = tmp_path / "ro.db"
    sqlite3.connect(ro).execute("create table t (x)")
    try:
        sqlite3.connect(f"file:{ro}?mode=ro", uri=True).execute("insert into t values (1)")
    except sqlite3.OperationalError as exc:
        hint = machine_failure(exc)
        assert hint is not None and "read-only" in hint and "aside" not in hint
    else:
        raise AssertionError("a read-only database was written")
