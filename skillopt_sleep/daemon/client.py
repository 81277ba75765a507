"""The client side of the daemon's control socket: where the socket lives and one request.

Shared by :mod:`.control` (the server and the client helpers) and :mod:`.process` (``stop``
asks the daemon through it), so neither imports the other. The protocol is described in
:mod:`.control`.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from skillopt_sleep import paths

MAX_SOCKET_PATH = 100
HAS_UNIX_SOCKETS = hasattr(socket, "AF_UNIX")


class NoDaemon(Exception):
    """No daemon answers on the control socket."""


def socket_path() -> Path:
    path = paths.state_dir() / "daemon.sock"
    if len(str(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha1(str(paths.state_dir().resolve()).encode()).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"skillopt-sleep-{uid}"
    return folder / f"{digest}.sock"


def request(cmd: str, *, timeout: float | None = 5.0, **args: Any) -> dict[str, Any]:
    """Send one request; returns the reply. Raises NoDaemon when nobody answers."""
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
        buf = b""
        while b"\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    except TimeoutError:
        raise NoDaemon(f"the daemon did not answer {cmd!r} within {timeout}s") from None
    except OSError as exc:
        raise NoDaemon(str(exc)) from None
    finally:
        sock.close()
    if not buf:
        raise NoDaemon("the daemon closed the connection")
    return json.loads(buf.split(b"\n", 1)[0])
