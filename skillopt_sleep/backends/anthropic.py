"""Anthropic Messages API backend.

``POST {base_url}/v1/messages`` (``base_url`` default ``https://api.anthropic.com``; a
trailing ``/v1`` is tolerated) with headers ``x-api-key`` and ``anthropic-version`` and body
``{"model", "max_tokens", "temperature"?, "system"?, "messages": [{"role": "user", "content":
prompt}]}`` (``temperature`` from the config; omitted when ``None``),
non-streaming. The key comes from ``config.api_key`` or ``$config.api_key_env`` (default
``ANTHROPIC_API_KEY``); loopback servers get a placeholder when none is set. The answer text
is the concatenation of its ``text`` blocks; ``tool_use`` blocks are reported by name.

A call whose placement is a skill lists it by its description in ``system`` (Claude Code's
listing) and offers the ``Skill`` tool (input ``{"skill": name}``); the skill's body reaches
the model only as the ``tool_result`` of that tool's ``tool_use``, as Claude Code sends it, in
a loop of at most ``MAX_TOOL_ROUNDS`` model calls
(:func:`~skillopt_sleep.backends.base.skill_loop`); the answer is the last call's text, with
the usage of every call summed.
"""

from __future__ import annotations

import time
from typing import Any

from skillopt_sleep.backends import _http
from skillopt_sleep.backends.base import (
    SKILL_TOOL,
    SKILL_TOOL_DESCRIPTION,
    SKILL_TOOL_SCHEMA,
    ToolCall,
    framed,
    merged,
    skill_loop,
)
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import BackendResponseError
from skillopt_sleep.models import Completion, CompletionRequest

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


class AnthropicBackend(_http.HttpBackend):
    name = "anthropic"
    key_env = "ANTHROPIC_API_KEY"
    default_base_url = DEFAULT_BASE_URL

    def base_url_of(self, config: BackendConfig) -> str:
        return super().base_url_of(config).removesuffix("/v1")

    def complete(self, request: CompletionRequest) -> Completion:
        key = self.key()
        model = self.pick_model(request.model)
        system, prompt, skill = framed(request)
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        payload: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens or self.config.max_tokens,
            "messages": messages,
        }
        if self.config.temperature is not None:
            payload["temperature"] = self.config.temperature
        if system:
            payload["system"] = system
        if skill is not None:
            payload["tools"] = [SKILL_TOOL_SPEC]
        headers = {"x-api-key": key, "anthropic-version": API_VERSION}
        headers |= _http.sample_headers(request.sample)
        started = time.monotonic()

        def answer(data: dict[str, Any], results: list[tuple[ToolCall, str, bool]]) -> None:
            # the model asked for a tool: its turn, then every call's result in one user turn
            messages.append({"role": "assistant", "content": data["content"]})
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": call.id,
                            "content": text,
                            **({"is_error": True} if error else {}),
                        }
                        for call, text, error in results
                    ],
                }
            )

        answers = skill_loop(
            skill,
            lambda: self._http.post("/v1/messages", payload, headers, model=model),
            _calls,
            answer,
        )
        parts = [_completion(data, model, self.name) for data in answers]
        return merged(parts, time.monotonic() - started)

    def check(self) -> None:
        self.pick_model("")  # before any connection
        self._http.check("/v1/models", {"x-api-key": self.key(), "anthropic-version": API_VERSION})


def _completion(data: dict[str, Any], model: str, backend: str) -> Completion:
    blocks = data.get("content")
    if not isinstance(blocks, list):
        raise BackendResponseError(
            f"answer has no content list: {str(data)[:120]}", backend=backend
        )
    text = "".join(
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )
    calls = [
        str(b.get("name", ""))
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    usage = data.get("usage") or {}
    tokens = (usage.get("input_tokens"), usage.get("output_tokens"))
    return _http.completion_of(data, text, calls, tokens, model)


#: the skill-loading tool offered when a call lists a skill (Messages API tool format)
SKILL_TOOL_SPEC: dict[str, Any] = {
    "name": SKILL_TOOL,
    "description": SKILL_TOOL_DESCRIPTION,
    "input_schema": SKILL_TOOL_SCHEMA,
}


def _calls(data: dict[str, Any]) -> list[ToolCall]:
    """The ``tool_use`` blocks of an answer (an input that is no object counts as ``{}``)."""
    blocks = data.get("content")
    return [
        ToolCall(
            str(b.get("id") or f"toolu_{i}"),
            str(b.get("name", "")),
            b["input"] if isinstance(b.get("input"), dict) else {},
        )
        for i, b in enumerate(blocks if isinstance(blocks, list) else [])
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
