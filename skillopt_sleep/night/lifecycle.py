"""A night's life: the one-night-at-a-time lock, "is a night running?", interrupted-night
recovery, the typed statuses and triggers, and the ``nights`` row from begin to finish.

The night lock (a file lock under the state folder) is held for a night's whole life and
released by the kernel when its process dies, so a free lock proves that no night runs. A
``running`` row while the lock is free is a night whose process stopped (kill -9, a crash):
:func:`recover` marks it ``interrupted`` (a write, done when a night or the daemon starts);
reads (``status``) only show it so, with :func:`seen_as`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from filelock import FileLock, Timeout

from skillopt_sleep import paths
from skillopt_sleep.config import Settings
from skillopt_sleep.night.log import NightLog
from skillopt_sleep.results import NightStatus, Trigger, night_label
from skillopt_sleep.store import NightRow, Store, now_iso

#: ``error`` of a night whose process stopped without finishing it
STOPPED = "the process running it stopped"


@dataclass(frozen=True)
class RunningNight:
    """A night that holds the lock now. The row fields are None when its row is not
    written yet (the night just took the lock)."""

    night_id: int | None
    started_at: str | None
    pid: int | None
    trigger: str | None

    def since(self) -> str:
        """`` (night 3, started 2026-…)`` for messages; "" when unknown."""
        if self.night_id is None:
            return ""
        return f" (night {self.night_id}, started {self.started_at})"


def night_lock() -> FileLock:
    """The one-night-at-a-time lock shared by the CLI, the daemon and the MCP server."""
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    return FileLock(str(paths.state_dir() / "night.lock"))


def lock_free() -> bool:
    """Whether nobody holds the night lock (probed without waiting; in a state folder this
    user cannot write, through the lock file opened read-only)."""
    probe = night_lock()
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return False
    except OSError:
        return _lock_free_read_only(paths.state_dir() / "night.lock")
    probe.release()
    return True


def _lock_free_read_only(path: Path) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: a read-only folder runs no night
        return True
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no lock file: no night ever ran here
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # filelock's lock on Unix is flock
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def pid_alive(pid: int | None) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a worker orphaned by a killed
    daemon, under a PID 1 that does not reap, still answers ``kill(pid, 0)``)."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return bool(psutil.pid_exists(pid))


def running(store: Store) -> RunningNight | None:
    """The night running now (in any process), or None: the lock is probed; the newest
    ``running`` row gives its details."""
    if lock_free():
        return None
    rows = store.nights.running()
    if not rows:
        return RunningNight(None, None, None, None)
    r = rows[0]
    return RunningNight(r.id, r.started_at, r.pid, r.trigger)


def _stale(rows: list[NightRow], *, lock_free_now: bool) -> list[NightRow]:
    """Of ``running`` rows, those no process runs any more: all of them when no other
    process holds the lock, else those whose pid is dead (or a zombie)."""
    if lock_free_now:
        return rows
    return [r for r in rows if not pid_alive(r.pid)]


def _interrupt(store: Store, rows: list[NightRow]) -> int:
    marked: list[int] = []
    with store.write():
        for row in rows:
            if store.nights.interrupt(row.id, finished_at=now_iso(), error=STOPPED):
                marked.append(row.id)
    for night_id in marked:  # the night's own log (when it kept one) says how it ended
        if paths.night_log_path(night_id).is_file():
            log = NightLog(night_id)
            log.line(f"night {night_label(night_id)} {NightStatus.INTERRUPTED}: {STOPPED}")
            log.close()
    return len(marked)


def recover(store: Store, *, lock_held: bool = False) -> int:
    """Mark ``running`` nights no process runs any more ``interrupted``: every one when the
    night lock is free (it is held while marking, so no night starts meanwhile) or held by
    the caller (``lock_held``), else those whose pid is dead or a zombie. A row that finished
    meanwhile is left alone. Returns how many were marked."""
    if not store.nights.running():
        return 0
    if lock_held:
        return _interrupt(store, store.nights.running())
    probe = night_lock()
    try:
        probe.acquire(timeout=0)
    except Timeout:  # a night runs in another process: only rows whose process is gone
        return _interrupt(store, _stale(store.nights.running(), lock_free_now=False))
    try:
        return _interrupt(store, store.nights.running())
    finally:
        probe.release()


def seen_as(rows: list[NightRow]) -> list[NightRow]:
    """``rows`` (night rows) as :func:`recover` would leave them, without writing: a stale
    ``running`` night shows ``interrupted``. For reads (status)."""
    running_rows = [r for r in rows if r.status == "running"]
    free = bool(running_rows) and lock_free()
    stale = {r.id for r in _stale(running_rows, lock_free_now=free)}
    return [
        dataclasses.replace(r, status=str(NightStatus.INTERRUPTED), error=r.error or STOPPED)
        if r.id in stale
        else r
        for r in rows
    ]


def begin(store: Store, settings: Settings, trigger: Trigger | str, dry_run: bool = False) -> int:
    """Record a night as running in this process (call it holding the lock); returns its id."""
    return store.nights.add(
        started_at=now_iso(),
        status=str(NightStatus.RUNNING),
        trigger=str(trigger),
        pid=os.getpid(),
        dry_run=int(dry_run),
        project=str(settings.project or ""),
    )


def finish(store: Store, night_id: int, status: NightStatus | str, **fields: Any) -> None:
    """Record how a night ended (``finished_at`` now) with more columns (``error``,
    ``seconds``, ``summary`` JSON text, scores, cost, ``proposal_id``…)."""
    store.nights.set(night_id, status=str(status), finished_at=now_iso(), **fields)


def record(store: Store, night_id: int, **fields: Any) -> None:
    """Record columns of a running night (``target_path``, ``summary``…)."""
    store.nights.set(night_id, **fields)
