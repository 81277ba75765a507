"""The HTTP backends send the temperature the config sets (docs/backends.md)."""

from __future__ import annotations

import json

import httpx
import pytest

from skillopt_sleep.backends.anthropic import AnthropicBackend
from skillopt_sleep.backends.openai_compatible import OpenAICompatibleBackend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.models import CompletionRequest

REQ = CompletionRequest(system="Use pnpm.", prompt="install?")
ANSWERS = {
    "openai_compatible": {"choices": [{"message": {"content": "ok"}}]},
    "anthropic": {"content": [{"type": "text", "text": "ok"}]},
}


def _sent(name: str, **config: object) -> dict:
    seen: list[dict] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(json.loads(req.content))
        return httpx.Response(200, json=ANSWERS[name])

    cls = OpenAICompatibleBackend if name == "openai_compatible" else AnthropicBackend
    cfg = BackendConfig(name=name, model="m", base_url="http://127.0.0.1:9", **config)
    backend = cls(cfg)
    backend._http.client = httpx.Client(transport=httpx.MockTransport(handler))
    assert backend.complete(REQ).text == "ok"
    return seen[0]


@pytest.mark.parametrize("name", ["openai_compatible", "anthropic"])
def test_the_default_is_zero_a_set_value_is_sent_and_default_sends_none(name: str) -> None:
    assert _sent(name)["temperature"] == 0.0
    assert _sent(name, temperature=0.7)["temperature"] == 0.7
    assert "temperature" not in _sent(name, temperature="default")
    assert "temperature" not in _sent(name, temperature=None)


def test_a_temperature_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="temperature"):
        BackendConfig(temperature=2.5)
    with pytest.raises(ValueError, match="temperature"):
        BackendConfig(temperature=-0.1)
