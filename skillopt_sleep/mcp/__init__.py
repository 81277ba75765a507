"""The skillopt-sleep MCP server (``skillopt-sleep mcp``): agents read status, review, adopt,
reject and roll back proposals, and start nights.

* :mod:`.server` — :func:`build_server` (tools, resources, the review prompt)
* :mod:`.ops`    — what each tool does, over the store (synchronous, one-line errors)
* :mod:`.models` — the tools' pydantic outputs
* :mod:`.http`   — the 127.0.0.1 streamable-HTTP transport with its 0600 bearer token
* :mod:`.auth`   — the bearer-token verifier the server installs for HTTP

Imports of the ``mcp`` SDK are absolute, so this package never shadows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["build_server", "serve_stdio"]


def build_server(store_path: Path | str | None = None, settings_loader: Any = None, **kwargs: Any):
    from skillopt_sleep.mcp.server import build_server as _build

    return _build(store_path, settings_loader, **kwargs)


def serve_stdio(store_path: Path | str | None = None, settings_loader: Any = None) -> None:
    """Run the server over stdin/stdout until the client closes it."""
    build_server(store_path, settings_loader).run("stdio")
