"""Harvesters, one per agent, behind :class:`skillopt_sleep.sources.base.Source`."""

from __future__ import annotations

from skillopt_sleep.errors import UnknownNameError
from skillopt_sleep.sources.base import ParseResult, Source


def get_source(name: str) -> Source:
    """Return the harvester registered as ``name``; UnknownNameError otherwise."""
    from skillopt_sleep.sources import (
        claude_code,
        codex,
        copilot_cli,
        copilot_vscode,
        cursor,
        devin,
        opencode,
    )

    registry: dict[str, type[Source]] = {
        "claude_code": claude_code.ClaudeCodeSource,
        "codex": codex.CodexSource,
        "copilot_cli": copilot_cli.CopilotCliSource,
        "copilot_vscode": copilot_vscode.CopilotVSCodeSource,
        "devin": devin.DevinSource,
        "cursor": cursor.CursorSource,
        "opencode": opencode.OpenCodeSource,
    }
    if name not in registry:
        raise UnknownNameError("source", name, tuple(registry))
    return registry[name]()


__all__ = ["ParseResult", "Source", "get_source"]
