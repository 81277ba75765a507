"""Anthropic Messages API backend.

``POST {base_url}/v1/messages`` (``base_url`` default ``https://api.anthropic.com``; a
trailing ``/v1`` is tolerated) with headers ``x-api-key`` and ``anthropic-version`` and body
``{"model", "max_tokens", "system"?, "messages": [{"role": "user", "content": prompt}]}``,
non-streaming. The key comes from ``config.api_key`` or ``$config.api_key_env`` (default
``ANTHROPIC_API_KEY``); loopback servers get a placeholder when none is set. The answer text
is the concatenation of its ``text`` blocks; ``tool_use`` blocks are reported by name.
"""

from __future__ import annotations

import time
from typing import Any

from skillopt_sleep.backends import _http
from skillopt_sleep.backends.base import Backend, framed
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import BackendResponseError
from skillopt_sleep.models import Completion, CompletionRequest, Usage

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


class AnthropicBackend(Backend):
    name = "anthropic"
    #: First retry delay in seconds (doubles each retry); tests set it small.
    base_delay = 0.5

    def __init__(self, config: BackendConfig, *, base_delay: float | None = None):
        super().__init__(config)
        base = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.base_url = base.removesuffix("/v1")
        delay = self.base_delay if base_delay is None else base_delay
        self._http = _http.HttpCaller(
            config, self.name, self.base_url, key_env="ANTHROPIC_API_KEY", base_delay=delay
        )

    def __repr__(self) -> str:
        return f"AnthropicBackend(base_url={self.base_url!r}, model={self.model!r})"

    def complete(self, request: CompletionRequest) -> Completion:
        key = _http.resolve_key(self.config, "ANTHROPIC_API_KEY", self.base_url, self.name)
        model = _http.pick_model(request.model, self.config, self.base_url, self.name)
        system, prompt, _skill = framed(request)  # a skill stays listed only (no tool loop)
        payload: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens or self.config.max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }
        if system:
            payload["system"] = system
        headers = {"x-api-key": key, "anthropic-version": API_VERSION}
        started = time.monotonic()
        data = self._http.post("/v1/messages", payload, headers, model=model)
        return _completion(data, model, time.monotonic() - started, self.name)

    def check(self) -> None:
        key = _http.resolve_key(self.config, "ANTHROPIC_API_KEY", self.base_url, self.name)
        self._http.check("/v1/models", {"x-api-key": key, "anthropic-version": API_VERSION})

    def close(self) -> None:
        self._http.close()


def _completion(data: dict[str, Any], model: str, seconds: float, backend: str) -> Completion:
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
    return Completion(
        text=text,
        tool_calls=[c for c in calls if c],
        usage=Usage(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
        ),
        seconds=seconds,
        model=str(data.get("model") or model),
        raw=data,
    )
