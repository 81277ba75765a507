"""OpenAI-compatible Chat Completions backend (OpenAI, Ollama, vLLM, LM Studio, the simulator).

``POST {base_url}/chat/completions`` (``base_url`` default ``https://api.openai.com/v1``) with
``{"model", "messages": [system?, user], "max_tokens"}``, non-streaming. The key comes from
``config.api_key`` or ``$config.api_key_env`` (default ``OPENAI_API_KEY``) as
``Authorization: Bearer``; loopback servers get a placeholder when none is set.
``request.tools`` are not sent (HTTP backends answer in text only); tool calls present in
the answer are still reported by name.
"""

from __future__ import annotations

import json
import time
from typing import Any

from skillopt_sleep.backends import _http
from skillopt_sleep.backends.base import SKILL_TOOL, Backend, SkillOffer, framed
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import BackendResponseError
from skillopt_sleep.models import Completion, CompletionRequest, Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAICompatibleBackend(Backend):
    name = "openai_compatible"
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
        started = time.monotonic()
        limit = request.max_tokens or self.config.max_tokens
        tools = [SKILL_TOOL_SPEC] if skill else None
        data = self._post(model, messages, limit, headers, tools)
        call = _skill_call(data, skill)
        if skill is not None and call is not None:
            # the model asked for the skill: its body, then the answer (as an agent would)
            first = _completion(data, model, 0.0, self.name)
            messages += [
                data["choices"][0]["message"],
                {"role": "tool", "tool_call_id": call, "content": skill.result},
            ]
            data = self._post(model, messages, limit, headers, tools)
            done = _completion(data, model, time.monotonic() - started, self.name)
            done.usage.input_tokens += first.usage.input_tokens
            done.usage.output_tokens += first.usage.output_tokens
            return done
        return _completion(data, model, time.monotonic() - started, self.name)

    def check(self) -> None:
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
        "description": "Load a listed skill: returns its instructions.",
        "parameters": {
            "type": "object",
            "properties": {"skill": {"type": "string", "description": "the skill's name"}},
            "required": ["skill"],
        },
    },
}


def _skill_call(data: dict[str, Any], skill: SkillOffer | None) -> str | None:
    """The id of the answer's call of :data:`SKILL_TOOL` for ``skill``, or None."""
    if skill is None:
        return None
    try:
        calls = data["choices"][0]["message"].get("tool_calls") or []
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    for c in calls:
        fn = (c or {}).get("function") or {}
        if fn.get("name") != SKILL_TOOL:
            continue
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = {}
        if isinstance(args, dict) and args.get("skill") == skill.name:
            return str(c.get("id") or "call")
    return None
