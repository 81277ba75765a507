"""AnthropicBackend against the simulator and small loopback fakes (never the network)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends.anthropic import API_VERSION, SKILL_TOOL_SPEC, AnthropicBackend
from skillopt_sleep.backends.base import MAX_TOOL_ROUNDS
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import (
    BackendAuthError,
    BackendModelError,
    BackendResponseError,
    BackendTimeout,
    BackendUnreachable,
)
from skillopt_sleep.models import CompletionRequest, Placement
from skillopt_sleep.night import prompts
from skillopt_sleep.simulator import Simulator, serve
from skillopt_sleep.simulator.persona import persona_from_dict
from tests.helpers.net import closed_port

REQ = CompletionRequest(system="Always mention `--frozen-lockfile`.", prompt="install dependencies")


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with serve("demo", api_key="sekret-key") as running:
        yield running


def backend(url: str, **kw) -> AnthropicBackend:
    kw.setdefault("api_key", "sekret-key")
    kw.setdefault("model", "claude-sim")
    return AnthropicBackend(BackendConfig(name="anthropic", base_url=url, **kw), base_delay=0.01)


def test_registry_builds_it() -> None:
    b = get_backend(BackendConfig(name="anthropic", base_url="http://127.0.0.1:1"))
    assert isinstance(b, AnthropicBackend) and b.name == "anthropic"


def test_completes_against_the_simulator(sim: Simulator) -> None:
    out = backend(sim.url).complete(REQ)
    assert out.text == "Run `npm install` in the project root. Also: `--frozen-lockfile`."
    assert out.model == "claude-sim" and out.usage.output_tokens > 1 and out.seconds > 0
    assert sim.stats.requests[-1]["endpoint"] == "/messages"


def test_trailing_v1_in_base_url_is_tolerated(sim: Simulator) -> None:
    assert backend(sim.url + "/v1/").complete(REQ).text.startswith("Run `npm install`")


def test_optimizer_roles_through_the_backend(sim: Simulator) -> None:
    b = backend(sim.url)
    judge = prompts.judge_prompt(
        task="t", rubric="Use `pnpm` instead of `npm`.", answer="npm install"
    )
    text = b.complete(CompletionRequest(prompt=judge, purpose="judge")).text
    assert prompts.extract_json(text) == {"score": 0.0}
    assert sim.stats.by_role["judge"] == 1


def test_key_from_default_env(sim: Simulator, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sekret-key")
    assert backend(sim.url, api_key=None).complete(REQ).text


def test_missing_key_for_remote_url_is_an_auth_error() -> None:
    with pytest.raises(BackendAuthError) as err:
        backend("https://api.example.invalid", api_key=None).complete(REQ)
    assert "ANTHROPIC_API_KEY" in err.value.fix


def test_closed_port_is_unreachable_quickly() -> None:
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(BackendUnreachable, match=f"cannot reach http://127.0.0.1:{port}"):
        backend(f"http://127.0.0.1:{port}", max_retries=3).complete(REQ)
    assert time.monotonic() - started < 3


def test_wrong_key_is_auth_error(sim: Simulator) -> None:
    with pytest.raises(BackendAuthError, match="401") as err:
        backend(sim.url, api_key="bad-sekret").complete(REQ)
    assert "bad-sekret" not in str(err.value)
    assert sim.stats.total == 1


def test_unknown_model_is_model_error(tmp_path) -> None:
    persona = tmp_path / "p.toml"
    persona.write_text('models = ["claude-ok"]\n')
    with serve(persona) as sim:
        with pytest.raises(BackendModelError, match="claude-nope"):
            backend(sim.url, model="claude-nope").complete(REQ)
        assert sim.stats.total == 1


def test_500_then_200_is_retried(sim: Simulator) -> None:
    sim.fail_next(2, 500)
    assert backend(sim.url, max_retries=2).complete(REQ).text
    assert [r["status"] for r in sim.stats.requests] == [500, 500, 200]


def test_no_retries_means_one_attempt(sim: Simulator) -> None:
    sim.fail_next(1, 529)
    with pytest.raises(BackendResponseError, match="529"):
        backend(sim.url, max_retries=0).complete(REQ)


def test_timeout_is_backend_timeout() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        with pytest.raises(BackendTimeout):
            backend(
                f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.2, max_retries=0
            ).complete(REQ)
    finally:
        listener.close()


def test_request_shape_headers_and_tool_use() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(
            200,
            json={
                "model": "claude-sim",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "tool_use", "name": "Bash", "input": {}},
                    {"type": "text", "text": "b"},
                ],
                "usage": {"input_tokens": 7, "output_tokens": 3},
            },
        )

    b = backend("http://127.0.0.1:9")
    b._http.client = httpx.Client(transport=httpx.MockTransport(handler))
    out = b.complete(REQ)
    assert (out.text, out.tool_calls, out.usage.input_tokens) == ("ab", ["Bash"], 7)
    req = seen[0]
    assert str(req.url) == "http://127.0.0.1:9/v1/messages"
    assert req.headers["x-api-key"] == "sekret-key"
    assert req.headers["anthropic-version"] == API_VERSION
    body = json.loads(req.content)
    assert body["system"] == REQ.system and body["max_tokens"] == 1024
    assert body["messages"] == [{"role": "user", "content": REQ.prompt}]


def test_malformed_answer_is_a_response_error() -> None:
    b = backend("http://127.0.0.1:9")
    b._http.client = httpx.Client(
        transport=httpx.MockTransport(lambda req: httpx.Response(200, json={"type": "message"}))
    )
    with pytest.raises(BackendResponseError, match="content"):
        b.complete(REQ)


# == a skill loads through the Skill tool, as Claude Code loads one ============================

SKILL_RULE = "Use `pnpm` instead of `npm`."
SKILL = Placement(
    agent="claude_code",
    scope="user",
    path="skills/deps/SKILL.md",
    mode="skill",
    text=f"---\nname: deps\ndescription: Installing the project's dependencies\n---\n\n"
    f"# deps\n\n- {SKILL_RULE}\n",
)
ASK = CompletionRequest(prompt="how do I install the dependencies?", placement=SKILL)


def _skill_sim(load: str):
    persona = persona_from_dict(
        {
            "name": "skills",
            "default_answer": "ok",
            "answers": [{"match": "install", "text": "Run `npm install`."}],
            "skills": {"match": load},
        }
    )
    return serve(persona, full_log=True)


def test_a_listed_skill_is_sent_only_as_the_result_of_a_skill_tool_call() -> None:
    with _skill_sim("always") as sim:
        out = backend(sim.url).complete(ASK)
        log = list(sim.stats.requests)
    first, second = (r["body"] for r in log)
    # the simulator reads the plain client's tool definition and sees the skill load
    assert [r["tools"] for r in log] == [["Skill"], ["Skill"]]
    assert [r["skills_loaded"] for r in log] == [[], ["deps"]] and log[0]["tool"] == "Skill"
    # first request: the skill listed by its description, the Skill tool offered, no body
    assert "deps: Installing the project's dependencies" in first["system"]
    assert first["tools"] == [SKILL_TOOL_SPEC] and SKILL_TOOL_SPEC["name"] == "Skill"
    assert SKILL_RULE not in json.dumps(first)
    # the model called Skill: the body comes back as that call's tool_result, nowhere else
    call, result = second["messages"][1], second["messages"][2]
    [use] = [b for b in call["content"] if b["type"] == "tool_use"]
    assert (call["role"], use["name"], use["input"]) == ("assistant", "Skill", {"skill": "deps"})
    assert result["role"] == "user"
    assert result["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": use["id"],
            "content": result["content"][0]["content"],
        }
    ]
    assert SKILL_RULE in result["content"][0]["content"]
    assert "Base directory for this skill:" in result["content"][0]["content"]
    assert SKILL_RULE not in json.dumps(second["messages"][:2]) + second["system"]
    # the answer follows the loaded rule; the two calls' usage is summed
    assert out.text == "Run `pnpm install`." and out.tool_calls == ["Skill"]
    assert out.usage.input_tokens > 0 and out.usage.output_tokens > 1


def test_a_skill_the_model_does_not_load_never_reaches_it() -> None:
    with _skill_sim("never") as sim:
        out = backend(sim.url).complete(ASK)
        [only] = [r["body"] for r in sim.stats.requests]
    assert only["tools"] == [SKILL_TOOL_SPEC] and SKILL_RULE not in json.dumps(only)
    assert out.text == "Run `npm install`." and out.tool_calls == []


def test_the_tool_loop_is_bounded_and_unknown_skills_are_errors() -> None:
    bodies: list[dict] = []

    def handler(req: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(req.content))
        n = len(bodies)
        return httpx.Response(
            200,
            json={
                "model": "claude-sim",
                "content": [
                    {"type": "text", "text": f"try {n}"},
                    {
                        "type": "tool_use",
                        "id": f"t{n}",
                        "name": "Skill",
                        "input": {"skill": "nope"},
                    },
                ],
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        )

    b = backend("http://127.0.0.1:9")
    b._http.client = httpx.Client(transport=httpx.MockTransport(handler))
    out = b.complete(ASK)
    assert len(bodies) == MAX_TOOL_ROUNDS  # a model that never stops calling tools
    assert out.text == f"try {MAX_TOOL_ROUNDS}" and out.tool_calls == ["Skill"] * MAX_TOOL_ROUNDS
    assert out.usage.input_tokens == 10 * MAX_TOOL_ROUNDS
    [error] = bodies[1]["messages"][-1]["content"]
    assert error["is_error"] is True and "Unknown skill: nope" in error["content"]
    assert SKILL_RULE not in json.dumps(bodies)  # a wrong name never gets the body
