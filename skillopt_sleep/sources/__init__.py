"""Harvesters, one per agent, behind :class:`skillopt_sleep.sources.base.Source`."""

from __future__ import annotations

import importlib

from skillopt_sleep.errors import UnknownNameError
from skillopt_sleep.sources.base import ParseResult, Source

#: name -> "module:Class", imported on first use (start-up imports no harvester);
#: the names are :data:`skillopt_sleep.config.KNOWN_SOURCES`.
REGISTRY: dict[str, str] = {
    "claude_code": "skillopt_sleep.sources.claude_code:ClaudeCodeSource",
    "codex": "skillopt_sleep.sources.codex:CodexSource",
    "copilot_cli": "skillopt_sleep.sources.copilot_cli:CopilotCliSource",
    "copilot_vscode": "skillopt_sleep.sources.copilot_vscode:CopilotVSCodeSource",
    "devin": "skillopt_sleep.sources.devin:DevinSource",
    "cursor": "skillopt_sleep.sources.cursor:CursorSource",
    "opencode": "skillopt_sleep.sources.opencode:OpenCodeSource",
    "pi": "skillopt_sleep.sources.pi:PiSource",
    "openclaw": "skillopt_sleep.sources.openclaw:OpenClawSource",
}


def get_source(name: str) -> Source:
    """Instantiate the harvester registered as ``name``; UnknownNameError when there is none."""
    target = REGISTRY.get(name)
    if target is None:
        raise UnknownNameError("source", name, tuple(REGISTRY))
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)()


__all__ = ["REGISTRY", "ParseResult", "Source", "get_source"]
