"""Model / agent backends, one module each, behind :class:`~skillopt_sleep.backends.base.Backend`."""

from __future__ import annotations

import importlib

from skillopt_sleep.backends.base import Backend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import UnknownNameError

#: name -> "module:Class", imported on first use (start-up imports no backend);
#: the names are :data:`skillopt_sleep.config.KNOWN_BACKENDS`.
REGISTRY: dict[str, str] = {
    "openai_compatible": "skillopt_sleep.backends.openai_compatible:OpenAICompatibleBackend",
    "anthropic": "skillopt_sleep.backends.anthropic:AnthropicBackend",
    "claude_code": "skillopt_sleep.backends.claude_code:ClaudeCodeBackend",
    "codex": "skillopt_sleep.backends.codex:CodexBackend",
    "copilot": "skillopt_sleep.backends.copilot:CopilotBackend",
    "opencode": "skillopt_sleep.backends.opencode:OpenCodeBackend",
    "pi": "skillopt_sleep.backends.pi:PiBackend",
    "openclaw": "skillopt_sleep.backends.openclaw:OpenClawBackend",
}


def get_backend(config: BackendConfig) -> Backend:
    """Instantiate the backend named by ``config.name``; UnknownNameError when there is none."""
    target = REGISTRY.get(config.name)
    if target is None:
        raise UnknownNameError("backend", config.name, tuple(REGISTRY))
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)(config)


__all__ = ["REGISTRY", "Backend", "get_backend"]
