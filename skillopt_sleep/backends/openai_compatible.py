"""OpenAI-compatible Chat Completions backend (OpenAI, Ollama, vLLM, LM Studio, the simulator).

``POST {base_url}/chat/completions`` (``base_url`` default ``https://api.openai.com/v1``) with
``{"model", "messages": [system?, user], "max_tokens", "temperature"?}``, non-streaming
(``temperature`` from the config; omitted when ``None``). The key comes from
``config.api_key`` or ``$config.api_key_env`` (default ``OPENAI_API_KEY``) as
``Authorization: Bearer``; loopback servers get a placeholder when none is set.
``request.tools`` are not sent (HTTP backends answer in text only). A call whose placement is
a skill lists it by its description and offers the ``Skill`` tool (``{"skill": name}``): the
skill's body goes to the model only as that tool's result, in a loop of at most
``MAX_TOOL_ROUNDS`` model calls (:func:`~skillopt_sleep.backends.base.skill_loop`). Tool calls
of every answer are reported by name.
"""

from __future__ import annotations

import json
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

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAICompatibleBackend(_http.HttpBackend):
    name = "openai_compatible"
    key_env = "OPENAI_API_KEY"
    default_base_url = DEFAULT_BASE_URL

    def __init__(self, config: BackendConfig, *, base_delay: float | None = None):
        super().__init__(config, base_delay=base_delay)
        self._token_field = "max_tokens"

    def complete(self, request: CompletionRequest) -> Completion:
        key = self.key()
        model = self.pick_model(request.model)
        system, prompt, skill = framed(request)
        messages: list[dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        headers = {"Authorization": f"Bearer {key}"}
        headers |= _http.sample_headers(request.sample)
        started = time.monotonic()
        limit = request.max_tokens or self.config.max_tokens
        tools = [SKILL_TOOL_SPEC] if skill else None

        def answer(data: dict[str, Any], results: list[tuple[ToolCall, str, bool]]) -> None:
            # the model asked for a tool: its answer, each call's result, then ask again
            messages.append(data["choices"][0]["message"])
            messages.extend(
                {"role": "tool", "tool_call_id": call.id, "content": text}
                for call, text, _error in results
            )

        answers = skill_loop(
            skill, lambda: self._post(model, messages, limit, headers, tools), _calls, answer
        )
        parts = [_completion(data, model, self.name) for data in answers]
        return merged(parts, time.monotonic() - started)

    def check(self) -> None:
        self.pick_model("")  # before any connection
        self._http.check("/models", {"Authorization": f"Bearer {self.key()}"})

    def _post(
        self,
        model: str,
        messages: list[dict[str, Any]],
        max_tokens: int,
        headers: dict[str, str],
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": model,
            "messages": messages,
            self._token_field: max_tokens,
        }
        if self.config.temperature is not None:
            payload["temperature"] = self.config.temperature
        if tools:
            payload["tools"] = tools
        try:
            return self._http.post("/chat/completions", payload, headers, model=model)
        except BackendResponseError as exc:
            # Newer OpenAI models reject max_tokens and ask for max_completion_tokens.
            if self._token_field == "max_tokens" and "max_completion_tokens" in str(exc):
                self._token_field = "max_completion_tokens"
                return self._post(model, messages, max_tokens, headers, tools)
            raise


def _completion(data: dict[str, Any], model: str, backend: str) -> Completion:
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise BackendResponseError(
            f"answer has no choices[0].message: {str(data)[:120]}", backend=backend
        ) from None
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    calls = [
        str((c.get("function") or {}).get("name", ""))
        for c in message.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    usage = data.get("usage") or {}
    tokens = (usage.get("prompt_tokens"), usage.get("completion_tokens"))
    return _http.completion_of(data, str(content or ""), calls, tokens, model)


#: the skill-loading tool offered when a call lists a skill (OpenAI function format)
SKILL_TOOL_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SKILL_TOOL,
        "description": SKILL_TOOL_DESCRIPTION,
        "parameters": SKILL_TOOL_SCHEMA,
    },
}


def _calls(data: dict[str, Any]) -> list[ToolCall]:
    """The tool calls of an answer (arguments that are no JSON object count as ``{}``)."""
    try:
        calls = data["choices"][0]["message"].get("tool_calls") or []
    except (KeyError, IndexError, TypeError, AttributeError):
        return []
    out = []
    for i, c in enumerate(calls):
        if not isinstance(c, dict):
            continue
        fn = c.get("function")
        fn = fn if isinstance(fn, dict) else {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except (TypeError, ValueError):
            args = {}
        out.append(
            ToolCall(
                str(c.get("id") or f"call_{i}"),
                str(fn.get("name", "")),
                args if isinstance(args, dict) else {},
            )
        )
    return out
