"""The skillopt-sleep MCP server (``skillopt-sleep mcp``): agents read status, review, adopt,
reject and roll back proposals, and start nights — each tool one call of the application
service (:class:`skillopt_sleep.service.Service`).

* :mod:`.server` — :func:`build_server` (tools, resources, the review prompt)
* :mod:`.models` — the tools' pydantic outputs (the service's typed results, plus the
  MCP-only night views)
* :mod:`.http`   — the 127.0.0.1 streamable-HTTP transport with its 0600 bearer token
* :mod:`.auth`   — the bearer-token verifier the server installs for HTTP

Imports of the ``mcp`` SDK are absolute, so this package never shadows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillopt_sleep.mcp.server import SleepServer
    from skillopt_sleep.service import Service

__all__ = ["build_server", "serve_stdio"]


def build_server(service: Service | None = None, **kwargs: Any) -> SleepServer:
    from skillopt_sleep.mcp.server import build_server as _build

    return _build(service, **kwargs)


def serve_stdio(service: Service | None = None) -> None:
    """Run the server over stdin/stdout until the client closes it."""
    from skillopt_sleep import paths

    paths.make_private()
    build_server(service).run("stdio")
