"""``skillopt-sleep mcp``: run the MCP server (stdio by default, or HTTP on 127.0.0.1)."""

from __future__ import annotations

from enum import Enum

import typer


class Transport(str, Enum):
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
        from skillopt_sleep.cli import _state
        from skillopt_sleep.config import load_settings

        config = _state["config"]

        def settings_loader(**overrides):
            return load_settings(config, **overrides)

        settings_loader.config_path = config  # type: ignore[attr-defined]  # which daemon may run nights

        if transport is Transport.http:
            from skillopt_sleep.mcp.http import serve_http

            serve_http(port, None, settings_loader)
        else:
            from skillopt_sleep.mcp import serve_stdio

            serve_stdio(None, settings_loader)
