"""``skillopt-sleep mcp``: run the MCP server (stdio by default, or HTTP on 127.0.0.1)."""

from __future__ import annotations

from enum import StrEnum

import typer


class Transport(StrEnum):
    stdio = "stdio"
    http = "http"


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp_cmd(
        transport: Transport = typer.Option(
            Transport.stdio,
            "--transport",
            help="stdio (for agents' MCP configs) or http (127.0.0.1 only).",
        ),
        port: int = typer.Option(
            8765, "--port", min=0, max=65535, help="HTTP port on 127.0.0.1 (0 = any free port)."
        ),
    ) -> None:
        """Serve the MCP tools agents use to review, adopt, reject and roll back proposals.

        HTTP requires `Authorization: Bearer <token>`; the token is created on first use in
        <state dir>/mcp-token (mode 0600).
        """
        from skillopt_sleep.cli.console import state as _state
        from skillopt_sleep.service import Service

        service = Service(_state["config"])  # nights it runs (or hands to the daemon) use it
        if transport is Transport.http:
            from skillopt_sleep.mcp.http import serve_http

            serve_http(port, service)
        else:
            from skillopt_sleep.mcp import serve_stdio

            serve_stdio(service)
