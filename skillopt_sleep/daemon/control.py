"""The daemon's local control channel, and the client helpers the CLI and MCP server use.

A Unix socket ``daemon.sock`` in the state dir, mode 0600 (created under a 0177 umask, so it is
never briefly open to others). When the state dir path is too long for a socket address
(~104 bytes), the socket lives in a 0700 per-user folder in the temp dir, named by a hash of
the state dir; client and server derive the same path.

Protocol: one JSON object per line each way, one request per connection::

    {"cmd": "ping" | "status" | "ingest-now" | "run-now" | "stop", ...args}
    -> {"ok": true, ...} | {"ok": false, "error": "a night is running (started …)"}

Client helpers (:func:`ingest_now`, :func:`run_now`, :func:`daemon_status`) ask the daemon
when one answers and otherwise do the work in this process (``ingest_now`` / ``run_now``) or
report ``running: False`` (``daemon_status``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillopt_sleep import paths
from skillopt_sleep.daemon.client import (  # re-exported: the client API lives here too
    HAS_UNIX_SOCKETS,
    NoDaemon,
    request,
    socket_path,
)
from skillopt_sleep.daemon.process import running_pid
from skillopt_sleep.errors import NightError, SkilloptError

log = logging.getLogger("skillopt_sleep.daemon")


# ---------------------------------------------------------------------------- client
def daemon_status(timeout: float = 3.0) -> dict[str, Any]:
    """The daemon's live status, or ``{"running": False}`` (with the pid when it runs but does
    not answer)."""
    try:
        reply = request("status", timeout=timeout)
        return dict(reply.get("status") or {}, running=True)
    except NoDaemon:
        pid = running_pid()
        if pid:
            return {"running": True, "pid": pid, "responding": False}
        return {"running": False}


def ingest_now(store: Any = None, settings: Any = None) -> dict[str, Any]:
    """Ingest new bytes now: through the daemon when it runs, else in this process."""
    try:
        reply = request("ingest-now", timeout=600)
        if not reply.get("ok"):
            raise SkilloptError(reply.get("error") or "the daemon refused")
        return dict(reply, via="daemon")
    except NoDaemon:
        pass
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.sources.ingest import harvest
    from skillopt_sleep.store import open_store

    own = store is None
    store = store or open_store()
    try:
        report = harvest(store, settings or load_settings())
    finally:
        if own:
            store.close()
    data = report.model_dump() if hasattr(report, "model_dump") else getattr(report, "__dict__", {})
    return {"ok": True, "via": "in-process", "report": data}


def run_now(
    settings: Any = None,
    *,
    wait: bool = True,
    trigger: str = "cli",
    store: Any = None,
    progress: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Run a night now: the daemon runs it when it is up (``wait`` for the result or return
    once it started), else it runs in this process. Raises NightError with the reason when a
    night is already running."""
    try:
        reply = request("run-now", timeout=timeout if wait else 30, wait=wait, trigger=trigger)
    except NoDaemon:
        reply = None
    if reply is not None:
        if not reply.get("ok"):
            raise NightError(reply.get("error") or "the daemon refused")
        return dict(reply, via="daemon")
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.store import open_store

    own = store is None
    store = store or open_store()
    try:
        result = run_night(store, settings or load_settings(), trigger=trigger, progress=progress)
    finally:
        if own:
            store.close()
    return {"ok": True, "via": "in-process", "result": result.__dict__}


# ---------------------------------------------------------------------------- server
Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ControlServer:
    """Accepts connections on the control socket; each request is handled in its own thread
    (a ``run-now --wait`` may take the whole night)."""

    def __init__(self, handler: Handler, path: Path | None = None):
        self.handler = handler
        self.path = path or socket_path()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()

    def start(self) -> ControlServer:
        if not HAS_UNIX_SOCKETS:  # pragma: no cover
            log.warning("no Unix sockets on this platform: control channel disabled")
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.parent != paths.state_dir():
            os.chmod(self.path.parent, 0o700)
        try:
            self.path.unlink()  # a stale socket from a crashed daemon (we hold the daemon lock)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(16)
        sock.settimeout(0.5)
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="control", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._closing.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._closing.is_set():
                    return
                continue
            threading.Thread(
                target=self._handle, args=(conn,), name="control-conn", daemon=True
            ).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            buf = b""
            while b"\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                buf += chunk
            conn.settimeout(None)
            try:
                req = json.loads(buf.split(b"\n", 1)[0] or b"{}")
                if not isinstance(req, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                reply: dict[str, Any] = {"ok": False, "error": f"bad request: {exc}"}
            else:
                try:
                    reply = self.handler(req)
                except SkilloptError as exc:
                    reply = {"ok": False, "error": str(exc)}
                except Exception as exc:  # a bug; keep serving
                    log.exception("control request %r failed", req.get("cmd"))
                    reply = {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}"}
            conn.sendall(json.dumps(reply, default=str).encode() + b"\n")
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._closing.set()
        if self._sock is not None:
            self._sock.close()
        if self._thread is not None:
            self._thread.join(timeout=2)
        try:
            self.path.unlink()
        except (FileNotFoundError, OSError):
            pass
