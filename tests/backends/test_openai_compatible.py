"""OpenAICompatibleBackend against the simulator and small loopback fakes (never the network)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends.base import MAX_TOOL_ROUNDS
from skillopt_sleep.backends.openai_compatible import SKILL_TOOL_SPEC, OpenAICompatibleBackend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import (
    BackendAuthError,
    BackendModelError,
    BackendResponseError,
    BackendTimeout,
    BackendUnreachable,
)
from skillopt_sleep.models import CompletionRequest, Placement
from skillopt_sleep.simulator import Simulator, serve
from tests.helpers.net import closed_port

REQ = CompletionRequest(system="Use `pnpm` instead of `npm`.", prompt="how do I run the tests?")


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with serve("demo", api_key="sekret-key") as running:
        yield running


def backend(url: str, **kw) -> OpenAICompatibleBackend:
    kw.setdefault("api_key", "sekret-key")
    kw.setdefault("model", "sim-model")
    return OpenAICompatibleBackend(
        BackendConfig(name="openai_compatible", base_url=url, **kw), base_delay=0.01
    )


def test_registry_builds_it() -> None:
    b = get_backend(BackendConfig(name="openai_compatible", base_url="http://127.0.0.1:1/v1"))
    assert isinstance(b, OpenAICompatibleBackend) and b.name == "openai_compatible"


def test_completes_against_the_simulator(sim: Simulator) -> None:
    out = backend(sim.url + "/v1").complete(REQ)
    assert out.text == "Run `pnpm test` to run the suite."
    assert out.model == "sim-model" and out.tool_calls == []
    assert out.usage.input_tokens > 1 and out.usage.output_tokens == 34 // 4 + 1
    assert out.seconds > 0
    rec = sim.stats.requests[-1]
    assert rec["endpoint"] == "/chat/completions" and rec["stream"] is False
    assert rec["model"] == "sim-model"


def test_key_from_named_env_var_and_default_env(sim: Simulator, monkeypatch) -> None:
    monkeypatch.setenv("MY_KEY", "sekret-key")
    assert backend(sim.url + "/v1", api_key=None, api_key_env="MY_KEY").complete(REQ).text
    monkeypatch.setenv("OPENAI_API_KEY", "sekret-key")
    assert backend(sim.url + "/v1", api_key=None).complete(REQ).text


def test_loopback_without_key_sends_a_placeholder() -> None:
    with serve("demo") as sim:
        out = backend(sim.url + "/v1", api_key=None, model="").complete(REQ)
        assert out.text and sim.stats.requests[-1]["model"] == "sim"


def test_missing_key_for_remote_url_is_an_auth_error_with_hint() -> None:
    b = backend("https://api.example.invalid/v1", api_key=None, api_key_env="SOME_KEY")
    with pytest.raises(BackendAuthError) as err:
        b.complete(REQ)
    assert "SOME_KEY" in err.value.fix


def test_closed_port_is_unreachable_quickly() -> None:
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(BackendUnreachable) as err:
        backend(f"http://127.0.0.1:{port}/v1", max_retries=2).complete(REQ)
    assert time.monotonic() - started < 3
    assert f"cannot reach http://127.0.0.1:{port}/v1" in str(err.value)
    assert err.value.fix == "is the server running?"


def test_wrong_key_is_auth_error_not_retried_and_key_not_leaked(sim: Simulator) -> None:
    with pytest.raises(BackendAuthError) as err:
        backend(sim.url + "/v1", api_key="wrong-sekret").complete(REQ)
    assert "wrong-sekret" not in str(err.value) and "API key" in err.value.fix
    assert sim.stats.total == 1


def test_unknown_model_is_model_error_not_retried(tmp_path) -> None:
    persona = tmp_path / "p.toml"
    persona.write_text('models = ["only-this"]\n')
    with serve(persona) as sim:
        with pytest.raises(BackendModelError, match="nope"):
            backend(sim.url + "/v1", model="nope").complete(REQ)
        assert sim.stats.total == 1
        assert backend(sim.url + "/v1", model="only-this").complete(REQ).text


def test_500_then_200_is_retried(sim: Simulator) -> None:
    sim.fail_next(1, 500)
    out = backend(sim.url + "/v1", max_retries=2).complete(REQ)
    assert out.text == "Run `pnpm test` to run the suite."
    assert [r["status"] for r in sim.stats.requests] == [500, 200]


def test_persistent_5xx_is_a_response_error_after_retries(sim: Simulator) -> None:
    sim.fail_next(5, 503)
    with pytest.raises(BackendResponseError, match="503"):
        backend(sim.url + "/v1", max_retries=2).complete(REQ)
    assert sim.stats.total == 3


def test_timeout_is_backend_timeout() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections but never answers
    try:
        port = listener.getsockname()[1]
        with pytest.raises(BackendTimeout):
            backend(f"http://127.0.0.1:{port}/v1", timeout=0.2, max_retries=1).complete(REQ)
    finally:
        listener.close()


def _mocked(handler) -> OpenAICompatibleBackend:
    b = backend("http://127.0.0.1:9/v1", max_retries=2)
    b._http.client = httpx.Client(transport=httpx.MockTransport(handler))
    return b


def test_malformed_json_is_a_response_error() -> None:
    b = _mocked(lambda req: httpx.Response(200, text="<html>not json"))
    with pytest.raises(BackendResponseError, match="malformed JSON"):
        b.complete(REQ)
    b = _mocked(lambda req: httpx.Response(200, json={"choices": []}))
    with pytest.raises(BackendResponseError, match="choices"):
        b.complete(REQ)


def test_429_is_retried_and_tool_calls_reported() -> None:
    seen: list[dict] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(json.loads(req.content))
        assert req.headers["authorization"] == "Bearer sekret-key"
        if len(seen) == 1:
            return httpx.Response(429, headers={"retry-after": "0"}, json={"error": {}})
        return httpx.Response(
            200,
            json={
                "model": "x",
                "choices": [
                    {"message": {"content": None, "tool_calls": [{"function": {"name": "Bash"}}]}}
                ],
            },
        )

    out = _mocked(handler).complete(REQ)
    assert out.tool_calls == ["Bash"] and out.text == "" and len(seen) == 2
    assert seen[0]["messages"][0] == {"role": "system", "content": REQ.system}
    assert seen[0]["max_tokens"] == 1024


def test_max_completion_tokens_fallback() -> None:
    seen: list[dict] = []

    def handler(req: httpx.Request) -> httpx.Response:
        body = json.loads(req.content)
        seen.append(body)
        if "max_tokens" in body:
            return httpx.Response(
                400,
                json={
                    "error": {
                        "message": "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens'"
                    }
                },
            )
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    assert _mocked(handler).complete(REQ).text == "ok"
    assert [("max_tokens" in b, "max_completion_tokens" in b) for b in seen] == [
        (True, False),
        (False, True),
    ]


def test_the_skill_tool_loop_is_bounded_and_unknown_skills_are_errors() -> None:
    """The shared loop (backends/base.py) as the Chat Completions API speaks it."""
    rule = "Use `pnpm` instead of `npm`."
    ask = CompletionRequest(
        prompt="how do I install the dependencies?",
        placement=Placement(
            agent="claude_code",
            scope="user",
            path="skills/deps/SKILL.md",
            mode="skill",
            text=f"---\nname: deps\ndescription: Installing dependencies\n---\n\n- {rule}\n",
        ),
    )
    bodies: list[dict] = []

    def handler(req: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(req.content))
        n = len(bodies)
        skill = "nope" if n == 1 else "deps"
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "Skill", "arguments": json.dumps({"skill": skill})},
        }
        message = {"role": "assistant", "content": f"try {n}", "tool_calls": [call]}
        return httpx.Response(
            200,
            json={
                "model": "m",
                "choices": [{"message": message}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1},
            },
        )

    b = backend("http://127.0.0.1:9/v1")
    b._http.client = httpx.Client(transport=httpx.MockTransport(handler))
    out = b.complete(ask)
    assert len(bodies) == MAX_TOOL_ROUNDS and bodies[0]["tools"] == [SKILL_TOOL_SPEC]
    assert out.text == f"try {MAX_TOOL_ROUNDS}" and out.usage.input_tokens == 10 * MAX_TOOL_ROUNDS
    assert rule not in json.dumps(bodies[:2])  # a wrong skill name gets an error, not the body
    assert "Unknown skill: nope" in bodies[1]["messages"][-1]["content"]
    assert bodies[2]["messages"][-1]["tool_call_id"] == "c2"
    assert rule in bodies[2]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("load", "loaded", "answer"),
    [("always", True, "Run `pnpm test` to run the suite."), ("never", False, "Run `npm test`")],
)
def test_a_placed_skill_is_reported_loaded_only_when_the_model_calls_the_skill_tool(
    tmp_path, load: str, loaded: bool, answer: str
) -> None:
    persona = tmp_path / "persona.toml"
    persona.write_text(
        'name = "p"\n[[answers]]\nmatch = "tests"\ntext = "Run `npm test` to run the suite."\n'
        f'[skills]\nmatch = "{load}"\n'
    )
    skill = Placement(
        agent="claude_code",
        scope="user",
        path="skills/learned/SKILL.md",
        mode="skill",
        text="---\nname: learned\ndescription: Rules for tests.\n---\n\n"
        "- Use `pnpm` instead of `npm`.\n",
    )
    with serve(persona, api_key="sekret-key") as running:
        b = backend(running.url + "/v1")
        out = b.complete(CompletionRequest(prompt="how do I run the tests?", placement=skill))
    assert answer in out.text
    assert (out.tool_calls[:1] == ["Skill"]) is loaded
    assert b.skill_loaded(out) is loaded
