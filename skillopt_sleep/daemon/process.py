"""The daemon's process lifecycle: where its files live, "is it running?", start, stop.

Single instance: the daemon holds ``daemon.lock`` (an OS file lock, released by the kernel
when the process dies, even on ``kill -9``) for its whole life, and writes ``daemon.pid``
(JSON: pid, start time, argv) once it holds it. "Running" means the lock is held; the pidfile
only says by whom, so a stale pidfile after a crash never blocks a new start.

:func:`start_detached` spawns ``python -m skillopt_sleep [--config F] start --foreground
--ready-fd N`` in a new session with a pipe; the child writes ``ready <pid>`` (or ``error
<reason>``) on it once its watchers, scheduler and control socket are up, and the parent
returns only then. :func:`stop_daemon` asks the daemon to stop through the control socket
(falling back to SIGTERM), waits, and kills whatever is left of its process tree.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from skillopt_sleep import daemon_client, paths
from skillopt_sleep.errors import SkilloptError
from skillopt_sleep.files import atomic_write
from skillopt_sleep.night.lifecycle import pid_alive

log = logging.getLogger("skillopt_sleep.daemon")


class DaemonError(SkilloptError):
    """The daemon could not be started or stopped; the message says why."""


# ---------------------------------------------------------------------------- files
# The pidfile, the lock and "is it running?" are the clients' view too: daemon_client.
pid_path = daemon_client.pid_path
lock_path = daemon_client.lock_path
read_json = daemon_client.read_json
read_pidfile = daemon_client.read_pidfile
instance_lock = daemon_client.instance_lock
lock_held = daemon_client.lock_held
running_pid = daemon_client.running_pid


def log_path() -> Path:
    return paths.state_dir() / "daemon.log"


def stderr_path() -> Path:
    """Early output of a detached daemon (before its log is set up), kept for diagnosis."""
    return paths.state_dir() / "daemon.err"


def schedule_state_path() -> Path:
    return paths.state_dir() / "schedule.json"


def write_json_atomic(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, default=str), private=True)


# ---------------------------------------------------------------------------- start
@dataclass
class StartResult:
    pid: int
    already: bool = False


def _cli_argv(config: Path | None, *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "skillopt_sleep"]
    if config:
        argv += ["--config", str(Path(config).expanduser().resolve())]
    return argv + list(extra)


def start_detached(config: Path | None = None, *, timeout: float = 60.0) -> StartResult:
    """Start the daemon in the background; returns once it reports ready.

    Returns ``StartResult(pid, already=True)`` when one is running already. Raises
    DaemonError with the daemon's own reason when it fails to come up.
    """
    pid = running_pid()
    if pid:
        return StartResult(pid, already=True)
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    errfile = open(stderr_path(), "wb")  # noqa: SIM115 (handed to the child, closed below)
    popen_kw: dict[str, Any] = {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.DEVNULL,
        "stderr": errfile,
        "cwd": str(paths.state_dir()),
        "close_fds": True,
    }
    if os.name == "posix":
        r, w = os.pipe()
        proc = subprocess.Popen(
            _cli_argv(config, "start", "--foreground", "--ready-fd", str(w)),
            pass_fds=(w,),
            start_new_session=True,
            **popen_kw,
        )
        os.close(w)
        try:
            msg = _read_ready(r, proc, timeout)
        finally:
            os.close(r)
            errfile.close()
    else:  # pragma: no cover - Windows: no fd passing; poll the pidfile's "ready" flag
        flags = getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(
            subprocess, "CREATE_NEW_PROCESS_GROUP", 0
        )
        proc = subprocess.Popen(
            _cli_argv(config, "start", "--foreground"), creationflags=flags, **popen_kw
        )
        errfile.close()
        msg = _poll_ready(proc, timeout)
    kind, _, rest = msg.partition(" ")
    if kind in ("ready", "already"):
        return StartResult(int(rest.split()[0]), already=kind == "already")
    raise DaemonError(rest or "the daemon did not start")


def _read_ready(fd: int, proc: subprocess.Popen, timeout: float) -> str:
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            return f"error the daemon did not report ready within {timeout:.0f}s (see {log_path()})"
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:  # the child closed its end: it exited (or exec'd something else)
            break
        buf += chunk
    if b"\n" in buf:
        return buf.split(b"\n", 1)[0].decode("utf-8", "replace")
    code = proc.wait(timeout=10)
    return f"error the daemon exited with status {code}: {_tail(stderr_path())}"


def _poll_ready(proc: subprocess.Popen, timeout: float) -> str:  # pragma: no cover - Windows
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = read_pidfile() or {}
        if info.get("ready") and pid_alive(info.get("pid")):
            return f"ready {info['pid']}"
        if proc.poll() is not None:
            return f"error the daemon exited with status {proc.returncode}: {_tail(stderr_path())}"
        time.sleep(0.1)
    return f"error the daemon did not report ready within {timeout:.0f}s"


def _tail(path: Path, n: int = 600) -> str:
    try:
        text = path.read_text("utf-8", "replace").strip()
    except OSError:
        return "no output"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "no output")[-n:]


# ---------------------------------------------------------------------------- stop
@dataclass
class StopResult:
    was_running: bool
    pid: int | None = None
    stopped: bool = False
    how: str = ""  # "asked" | "sigterm" | "killed"
    seconds: float = 0.0
    killed_children: list[int] = field(default_factory=list)


def stop_daemon(timeout: float = 60.0) -> StopResult:
    """Ask the running daemon to finish or checkpoint its current step and exit; wait; then
    kill whatever is left of its process tree (night workers, agent CLIs)."""
    t0 = time.monotonic()
    pid = running_pid()
    if not pid:
        return StopResult(was_running=False)
    try:
        proc = psutil.Process(pid)
        children = proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return StopResult(was_running=True, pid=pid, stopped=True, how="gone")
    how = "asked"
    try:
        daemon_client.request("stop", timeout=5)
    except daemon_client.NoDaemon:
        how = "sigterm"
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=timeout)
    except psutil.TimeoutExpired:
        how = "killed"
        _kill(proc)
    except psutil.NoSuchProcess:
        pass
    killed = []
    for child in children:
        if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
            killed.append(child.pid)
            _kill(child)
    gone = not pid_alive(pid)
    return StopResult(
        was_running=True,
        pid=pid,
        stopped=gone,
        how=how,
        seconds=time.monotonic() - t0,
        killed_children=killed,
    )


def _kill(proc: psutil.Process) -> None:
    try:
        proc.terminate()
        proc.wait(timeout=3)
    except psutil.TimeoutExpired:
        try:
            proc.kill()
            proc.wait(timeout=5)
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            pass
    except psutil.NoSuchProcess:
        pass
