"""Compatibility entry point: the MCP server lives in :mod:`skillopt_sleep.mcp`."""

from skillopt_sleep.mcp import build_server, serve_stdio

__all__ = ["build_server", "serve_stdio"]
