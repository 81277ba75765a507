"""What the loopback servers share (the MCP HTTP transport, the dashboard): their host, their
listening socket and their per-install token file (``<state>/<name>``, mode 0600:
:func:`skillopt_sleep.files.ensure_token`)."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from skillopt_sleep import files, paths
from skillopt_sleep.errors import ConfigError

HOST = "127.0.0.1"


def listen_socket(port: int, hint: str) -> socket.socket:
    """A socket bound to ``127.0.0.1:port`` (0 = any free port). Raises ConfigError with a
    one-line reason, then ``hint``, when the port cannot be had (in use, privileged)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {HOST}:{port}: {exc.strerror or exc}; {hint}"
        ) from None
    return sock


@dataclass(frozen=True)
class TokenFile:
    """A server's secret token: the file ``name`` in the state folder; ``what`` names it in
    errors ("the MCP token")."""

    name: str
    what: str

    def path(self) -> Path:
        return paths.state_dir() / self.name

    def ensure(self, path: Path | None = None) -> str:
        """The token (in ``path``, default :meth:`path`), created (mode 0600) on first use;
        a looser mode is re-tightened."""
        return files.ensure_token(path or self.path(), self.what)
