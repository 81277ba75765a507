"""The daemon's side of its control channel: :class:`ControlServer` answers requests on the
control socket (``daemon.sock``, mode 0600, created under a 0177 umask so it is never briefly
open to others). Where the socket lives, the protocol and the client side are
:mod:`skillopt_sleep.daemon_client`.
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
from skillopt_sleep.daemon_client import HAS_UNIX_SOCKETS, read_line, socket_path
from skillopt_sleep.errors import SkilloptError

log = logging.getLogger("skillopt_sleep.daemon")


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
            buf = read_line(conn)
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
