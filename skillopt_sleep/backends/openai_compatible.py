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
    Backend,
    ToolCall,
    framed,
    merged,
    skill_loop,
)
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import BackendResponseError
from skillopt_sleep.models import Completion, CompletionRequest, Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAICompatibleBackend(Backend):
    name = "openai_compatible"
    skill_tools = (SKILL_TOOL,)
    #: First retry delay in seconds (doubles each retry); tests set it small.
    base_delay = 0.5

    def __init__(self, config: BackendConfig, *, base_delay: float | None = None):
        super().__init__(config)
        self.base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        delay = self.base_delay if base_delay is None else base_delay
        self._http = _http.HttpCaller(
            config, self.name, self.base_url, key_env="OPENAI_API_KEY", base_delay=delay
        )
        self._token_field = "max_tokens"

    def __repr__(self) -> str:
        return f"OpenAICompatibleBackend(base_url={self.base_url!r}, model={self.model!r})"

    def complete(self, request: CompletionRequest) -> Completion:
        key = _http.resolve_key(self.config, "OPENAI_API_KEY", self.base_url, self.name)
        model = _http.pick_model(request.model, self.config, self.base_url, self.name)
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
        parts = [_completion(data, model, 0.0, self.name) for data in answers]
        return merged(parts, time.monotonic() - started)

    def check(self) -> None:
        _http.pick_model("", self.config, self.base_url, self.name)  # before any connection
        key = _http.resolve_key(self.config, "OPENAI_API_KEY", self.base_url, self.name)
        self._http.check("/models", {"Authorization": f"Bearer {key}"})

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

    def close(self) -> None:
        self._http.close()


def _completion(data: dict[str, Any], model: str, seconds: float, backend: str) -> Completion:
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
    return Completion(
        text=str(content or ""),
        tool_calls=[c for c in calls if c],
        usage=Usage(
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        ),
        seconds=seconds,
        model=str(data.get("model") or model),
        raw=data,
    )


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
