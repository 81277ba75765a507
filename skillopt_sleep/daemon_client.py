"""The daemon as its clients see it: its files, whether it runs and with which settings, and
one request over its control socket.

The daemon (:mod:`skillopt_sleep.daemon`) holds ``daemon.lock`` (an OS file lock, released by
the kernel when its process dies, even on ``kill -9``) for its whole life and writes
``daemon.pid`` (JSON) once it holds it::

    {"pid": 123, "started_at": "2026-…", "ready": true, "argv": [...],
     "config": "/abs/config.toml" or "", "settings_env": {"SKILLOPT_SLEEP_EPOCHS": "<sha256>"}}

"Running" means the lock is held; the pidfile only says by whom and with what, so a stale
pidfile after a crash never counts. ``settings_env`` holds the sha256 of each
``SKILLOPT_SLEEP_*`` settings variable the daemon was started with (hashes: a value may be a
key), so a client can tell whether a night the daemon runs is the night it would run itself.

The control socket is ``daemon.sock`` in the state dir, or, when that path is too long for a
socket address (~104 bytes), a 0700 per-user folder in the temp dir named by a hash of the
state dir. Protocol: one JSON object per line each way, one request per connection
(``{"cmd": "ping" | "status" | "ingest-now" | "run-now" | "stop", …}`` →
``{"ok": true, …}`` | ``{"ok": false, "error": "<one line>"}``).

This module is the application layer's view of the daemon; the daemon's own process code
(start, stop, the control server) lives in :mod:`skillopt_sleep.daemon` and builds on it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from skillopt_sleep import paths
from skillopt_sleep.config import environment_overrides
from skillopt_sleep.night.lifecycle import pid_alive
from skillopt_sleep.results import DaemonStatus

MAX_SOCKET_PATH = 100
HAS_UNIX_SOCKETS = hasattr(socket, "AF_UNIX")


class NoDaemon(Exception):
    """No daemon answers on the control socket (the message says why)."""


# ---------------------------------------------------------------------------- files
def pid_path() -> Path:
    return paths.state_dir() / "daemon.pid"


def lock_path() -> Path:
    return paths.state_dir() / "daemon.lock"


def socket_path() -> Path:
    path = paths.state_dir() / "daemon.sock"
    if len(str(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha1(str(paths.state_dir().resolve()).encode()).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"skillopt-sleep-{uid}"
    return folder / f"{digest}.sock"


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file's content; None when absent, unreadable or not an object."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_pidfile() -> dict[str, Any] | None:
    return read_json(pid_path())


# ---------------------------------------------------------------------------- liveness
def instance_lock() -> FileLock:
    """The daemon's single-instance lock (held by the daemon for its whole life)."""
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    return FileLock(str(lock_path()))


def lock_held() -> bool:
    """True when some process (maybe this one) holds the daemon lock."""
    probe = instance_lock()
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return True
    probe.release()
    return False


def running_pid() -> int | None:
    """The running daemon's pid, or None. A stale pidfile (crash) is ignored; while the lock
    is held but the pidfile not yet written (a daemon starting up) this waits up to 3 s."""
    if not lock_held():
        return None
    pid = (read_pidfile() or {}).get("pid")
    if isinstance(pid, int) and pid_alive(pid):
        return pid
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        time.sleep(0.05)
        pid = (read_pidfile() or {}).get("pid")
        if isinstance(pid, int) and pid_alive(pid):
            return pid
        if not lock_held():
            return None
    return None


# ---------------------------------------------------------------------------- identity
def settings_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{name: sha256(value)}`` of the ``SKILLOPT_SLEEP_*`` settings variables in ``env``
    (default: this process's environment). What the daemon records, and clients compare."""
    env = os.environ if env is None else env
    return {
        name: hashlib.sha256(env[name].encode("utf-8", "surrogateescape")).hexdigest()
        for name in environment_overrides(env)
    }


def config_key(config: Path | None) -> str:
    """The config file a process runs with, as the daemon records it: an absolute resolved
    path; None means the default file (:func:`paths.config_file`)."""
    return str(Path(config).expanduser().resolve()) if config else str(paths.config_file())


@dataclass(frozen=True)
class DaemonIdentity:
    """The running daemon and what it runs nights with."""

    pid: int
    config: str  # as :func:`config_key` gives it
    settings_env: dict[str, str] = field(default_factory=dict)


def running_daemon() -> DaemonIdentity | None:
    """The running daemon's identity, or None when no daemon runs."""
    pid = running_pid()
    if pid is None:
        return None
    info = read_pidfile() or {}
    env = info.get("settings_env")
    return DaemonIdentity(
        pid=pid,
        config=str(info.get("config") or paths.config_file()),
        settings_env=dict(env) if isinstance(env, dict) else {},
    )


# ---------------------------------------------------------------------------- requests
def read_line(sock: socket.socket) -> bytes:
    """What ``sock`` sends until its first newline (the control protocol's one JSON line a
    message) or until it closes; what arrived with the newline is included."""
    buf = b""
    while b"\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def request(cmd: str, *, timeout: float | None = 5.0, **args: Any) -> dict[str, Any]:
    """Send one request; returns the reply (a JSON object). Raises NoDaemon when nobody
    answers within ``timeout`` seconds (None: wait as long as it takes)."""
    if not HAS_UNIX_SOCKETS:  # pragma: no cover - Windows: no control channel yet
        raise NoDaemon("no control socket on this platform")
    path = socket_path()
    if not path.exists():
        raise NoDaemon(f"no socket at {path}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise NoDaemon(str(exc)) from None
        sock.sendall(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
        buf = read_line(sock)
    except TimeoutError:
        raise NoDaemon(f"the daemon did not answer {cmd!r} within {timeout}s") from None
    except OSError as exc:
        raise NoDaemon(str(exc)) from None
    finally:
        sock.close()
    if not buf:
        raise NoDaemon("the daemon closed the connection")
    reply = json.loads(buf.split(b"\n", 1)[0])
    if not isinstance(reply, dict):
        raise NoDaemon(f"the daemon answered {cmd!r} with something else than an object")
    return reply


def daemon_status(timeout: float = 3.0) -> DaemonStatus:
    """The daemon's live status; ``running=False`` when none runs, ``responding=False`` (with
    its pid) when one runs but does not answer within ``timeout`` seconds."""
    try:
        reply = request("status", timeout=timeout)
    except NoDaemon as exc:
        pid = running_pid()
        if pid:
            return DaemonStatus(running=True, pid=pid, responding=False, error=str(exc))
        return DaemonStatus(running=False)
    return DaemonStatus.model_validate(dict(reply.get("status") or {}, running=True))
