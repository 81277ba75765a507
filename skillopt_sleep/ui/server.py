"""Serving the dashboard: the per-install token, the loopback socket, uvicorn.

The token is created on first use at ``<state>/ui-token`` (mode 0600, re-tightened when
looser). :class:`Dashboard` binds ``127.0.0.1:<port>`` (0: any free port) before anything
else, so a port in use is a one-line ConfigError, and serves either in the foreground
(``skillopt-sleep ui``) or in a thread (the daemon, when ``ui.serve`` is set).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from skillopt_sleep import loopback, paths

if TYPE_CHECKING:
    from skillopt_sleep.service import Service

HOST = loopback.HOST


TOKEN = loopback.TokenFile("ui-token", "the dashboard token")
token_path = TOKEN.path
ensure_token = TOKEN.ensure


class Dashboard:
    """The dashboard of ``service`` on ``127.0.0.1:port`` (listening from construction: a
    client that connects before uvicorn runs waits in the backlog)."""

    def __init__(self, service: Service, port: int):
        import uvicorn

        from skillopt_sleep.ui.app import build_app

        self.token = ensure_token()
        sock = loopback.listen_socket(
            port, "choose another port (--port, or ui.port in the config; 0 = any free port)"
        )
        sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
        self.sock = sock
        self.port: int = sock.getsockname()[1]
        app = build_app(service, self.token, self.port)
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    @property
    def login_url(self) -> str:
        """The address to open: it carries the token once, then a cookie does."""
        return f"{self.url}?token={self.token}"

    def serve(self) -> None:
        """Serve until interrupted (Ctrl-C) or :meth:`stop`."""
        paths.make_private()
        self.server.run(sockets=[self.sock])

    def start(self) -> Dashboard:
        """Serve in a daemon thread; returns once the server listens (or failed)."""
        self._thread = threading.Thread(target=self.serve, name="dashboard", daemon=True)
        self._thread.start()
        while not self.server.started and self._thread.is_alive():
            self._thread.join(0.05)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.sock.close()
