"""The streamable-HTTP transport: 127.0.0.1 only, bearer token stored 0600 in the state dir.

The token is created on first use at ``<state dir>/mcp-token`` (``secrets.token_urlsafe``) and
checked with the SDK's bearer-auth middleware (the verifier is :mod:`.auth`); a request without
it, or with another token, gets ``401``. The SDK's DNS-rebinding protection (Host / Origin must
be loopback) stays on.
"""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING

from skillopt_sleep import loopback, paths
from skillopt_sleep.mcp.auth import HOST

if TYPE_CHECKING:
    from skillopt_sleep.service import Service

PATH = "/mcp"


TOKEN = loopback.TokenFile("mcp-token", "the MCP token")
token_path = TOKEN.path
ensure_token = TOKEN.ensure


def listen_socket(port: int) -> socket.socket:
    """A socket bound to ``127.0.0.1:port`` (0 = any free port); ConfigError when the port
    cannot be had."""
    return loopback.listen_socket(port, "choose another --port (0 = any free port)")


def serve_http(port: int, service: Service | None = None) -> None:
    """Run the server on ``http://127.0.0.1:<port>/mcp`` until interrupted (port 0 = any free
    port; the chosen URL is printed to stderr as ``listening on http://127.0.0.1:N/mcp``)."""
    import anyio
    import uvicorn

    paths.make_private()

    from skillopt_sleep.mcp.server import build_server

    tpath = token_path()
    token = ensure_token(tpath)
    server = build_server(service, http_token=token)
    app = server.streamable_http_app(streamable_http_path=PATH, host=HOST)
    config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)
    sock = listen_socket(port)

    async def announce() -> None:
        while not userver.started:
            if userver.should_exit:
                return
            await anyio.sleep(0.05)
        sock = userver.servers[0].sockets[0]
        host, real_port = sock.getsockname()[:2]
        print(
            f"listening on http://{host}:{real_port}{PATH} (bearer token in {tpath})",
            file=sys.stderr,
            flush=True,
        )

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(announce)
            await userver.serve(sockets=[sock])
            tg.cancel_scope.cancel()

    anyio.run(main)
