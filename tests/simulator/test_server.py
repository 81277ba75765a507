"""The simulator over HTTP: the three APIs (stream and not), auth, models, stats, controls."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from skillopt_sleep.night import prompts
from skillopt_sleep.simulator import Simulator, serve

SKILL = "Use `pnpm` instead of `npm`."


def sse(text: str) -> list[tuple[str | None, dict | str]]:
    """Parse an SSE body into (event name, JSON data or raw string) pairs."""
    out = []
    for chunk in text.strip().split("\n\n"):
        event, data = None, []
        for line in chunk.splitlines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        raw = "\n".join(data)
        out.append((event, raw if raw == "[DONE]" else json.loads(raw)))
    return out


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with serve("demo") as running:
        yield running


def test_binds_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        Simulator(host="0.0.0.0")


def test_anthropic_messages_non_stream_with_content_blocks(sim: Simulator) -> None:
    body = {
        "model": "claude-x",
        "max_tokens": 100,
        "metadata": {"user_id": "u"},
        "system": [{"type": "text", "text": SKILL, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                    {"type": "text", "text": "how do I run the tests?"},
                ],
            }
        ],
    }
    r = httpx.post(sim.url + "/v1/messages", json=body)
    assert r.status_code == 200
    msg = r.json()
    assert msg["type"] == "message" and msg["role"] == "assistant" and msg["model"] == "claude-x"
    assert msg["content"] == [{"type": "text", "text": "Run `pnpm test` to run the suite."}]
    assert msg["stop_reason"] == "end_turn"
    assert msg["usage"]["input_tokens"] > 1 and msg["usage"]["output_tokens"] == 34 // 4 + 1
    assert sim.stats.requests[-1]["prompt"] == "how do I run the tests?"


def test_anthropic_messages_stream_events(sim: Simulator) -> None:
    body = {
        "model": "m",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "install dependencies please"}],
    }
    r = httpx.post(sim.url + "/v1/messages", json=body)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse(r.text)
    names = [e for e, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names[1] == "content_block_start" and "content_block_stop" in names
    assert all(d["type"] == e for e, d in events)
    text = "".join(d["delta"]["text"] for e, d in events if e == "content_block_delta")
    assert text == "Run `npm install` in the project root."
    assert events[0][1]["message"]["content"] == []
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] > 1


def test_anthropic_tool_use_stream_and_tool_result(sim: Simulator) -> None:
    tools = [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]
    body = {
        "model": "m",
        "max_tokens": 100,
        "stream": True,
        "tools": tools,
        "messages": [{"role": "user", "content": "list the files"}],
    }
    events = sse(httpx.post(sim.url + "/v1/messages", json=body).text)
    start = [d for e, d in events if e == "content_block_start"]
    assert start[0]["content_block"]["type"] == "tool_use"
    assert start[0]["content_block"]["name"] == "Bash"
    partial = "".join(d["delta"]["partial_json"] for e, d in events if e == "content_block_delta")
    assert json.loads(partial) == {"command": "ls"}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    body["stream"] = False
    body["messages"] += [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}],
        },
    ]
    msg = httpx.post(sim.url + "/v1/messages", json=body).json()
    assert msg["content"][0]["text"] == "The project files are listed above."


def test_responses_non_stream_and_stream(sim: Simulator) -> None:
    body = {
        "model": "gpt-x",
        "instructions": SKILL,
        "store": False,
        "reasoning": None,
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "be good"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "<environment_context>x</environment_context>"}
                ],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "please lint"}],
            },
        ],
    }
    obj = httpx.post(sim.url + "/v1/responses", json=body).json()
    assert obj["object"] == "response" and obj["status"] == "completed"
    assert obj["output"][0]["content"][0]["text"] == "Run `pnpm run lint`."
    assert (
        obj["usage"]["total_tokens"] == obj["usage"]["input_tokens"] + obj["usage"]["output_tokens"]
    )
    events = sse(httpx.post(sim.url + "/v1/responses", json=dict(body, stream=True)).text)
    names = [e for e, _ in events]
    assert names[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert names[-2:] == ["response.output_item.done", "response.completed"]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    text = "".join(d["delta"] for e, d in events if e == "response.output_text.delta")
    assert text == "Run `pnpm run lint`."
    done = events[-1][1]["response"]
    assert done["status"] == "completed" and done["usage"]["output_tokens"] > 0
    assert done["output"][0]["content"][0]["text"] == text


def test_responses_function_call_and_output(sim: Simulator) -> None:
    body = {
        "model": "m",
        "stream": True,
        "input": "list the files",
        "tools": [{"type": "function", "name": "Bash", "parameters": {}}, {"type": "web_search"}],
    }
    events = sse(httpx.post(sim.url + "/v1/responses", json=body).text)
    item = next(d for e, d in events if e == "response.output_item.done")["item"]
    assert item["type"] == "function_call" and item["name"] == "Bash"
    assert json.loads(item["arguments"]) == {"command": "ls"} and item["call_id"]
    body["stream"] = False
    body["input"] = [
        {"role": "user", "content": "list the files"},
        item,
        {"type": "function_call_output", "call_id": item["call_id"], "output": "a.txt"},
    ]
    obj = httpx.post(sim.url + "/v1/responses", json=body).json()
    assert obj["output"][0]["type"] == "message"


def test_chat_completions_non_stream_and_stream(sim: Simulator) -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": SKILL},
            {"role": "user", "content": "run tests"},
        ],
        "temperature": 0,
    }
    obj = httpx.post(sim.url + "/v1/chat/completions", json=body).json()
    assert obj["object"] == "chat.completion"
    assert obj["choices"][0]["message"]["content"] == "Run `pnpm test` to run the suite."
    assert obj["choices"][0]["finish_reason"] == "stop" and obj["usage"]["prompt_tokens"] > 0
    body.update(stream=True, stream_options={"include_usage": True})
    events = sse(httpx.post(sim.url + "/v1/chat/completions", json=body).text)
    assert events[-1] == (None, "[DONE]")
    chunks = [d for _, d in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Run `pnpm test` to run the suite."
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


def test_chat_tool_calls(sim: Simulator) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "list the files"}],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
    }
    msg = httpx.post(sim.url + "/v1/chat/completions", json=body).json()["choices"][0]
    assert msg["finish_reason"] == "tool_calls"
    call = msg["message"]["tool_calls"][0]
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "ls"}
    events = sse(httpx.post(sim.url + "/v1/chat/completions", json=dict(body, stream=True)).text)
    assert "usage" not in events[-2][1]  # only with stream_options.include_usage
    deltas = [d["choices"][0]["delta"] for _, d in events[:-1]]
    assert [
        d["tool_calls"][0]["function"]["name"]
        for d in deltas
        if "tool_calls" in d and "name" in d["tool_calls"][0]["function"]
    ] == ["bash"]
    body["messages"] += [
        msg["message"],
        {"role": "tool", "tool_call_id": call["id"], "content": "a.txt"},
    ]
    again = httpx.post(sim.url + "/v1/chat/completions", json=body).json()["choices"][0]
    assert again["message"]["content"] == "The project files are listed above."


def test_api_key_required_gives_401_in_each_shape() -> None:
    with serve("demo", api_key="sekret") as sim:
        r = httpx.post(
            sim.url + "/v1/messages",
            json={"model": "m", "messages": []},
            headers={"x-api-key": "wrong"},
        )
        assert r.status_code == 401
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "authentication_error"
        r = httpx.post(sim.url + "/v1/chat/completions", json={"model": "m", "messages": []})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        r = httpx.post(
            sim.url + "/v1/responses",
            json={"model": "m", "input": "hi"},
            headers={"Authorization": "Bearer sekret"},
        )
        assert r.status_code == 200
        r = httpx.post(
            sim.url + "/v1/messages",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            headers={"x-api-key": "sekret"},
        )
        assert r.status_code == 200
        assert sim.stats.by_endpoint["/messages"] == 2


def test_unknown_model_gives_404_in_each_shape(tmp_path) -> None:
    persona = tmp_path / "p.toml"
    persona.write_text('models = ["good"]\n')
    with serve(persona) as sim:
        r = httpx.post(sim.url + "/v1/messages", json={"model": "bad", "messages": []})
        assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
        r = httpx.post(sim.url + "/v1/responses", json={"model": "bad", "input": "x"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
        r = httpx.post(
            sim.url + "/v1/chat/completions",
            json={"model": "good", "messages": [{"role": "user", "content": "x"}]},
        )
        assert r.status_code == 200
        assert [m["id"] for m in httpx.get(sim.url + "/v1/models").json()["data"]] == ["good"]


def test_stats_roles_reset_and_failure_injection(sim: Simulator) -> None:
    judge = prompts.judge_prompt(task="t", rubric="`pnpm`", answer="pnpm i")
    for text in ("hi", judge, prompts.consolidate_prompt(rules=["a"])):
        httpx.post(
            sim.url + "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": text}]},
        )
    stats = httpx.get(sim.url + "/_sim/stats").json()
    assert stats["by_role"] == {"target": 1, "judge": 1, "consolidate": 1}
    assert stats["by_endpoint"] == {"/chat/completions": 3} and stats["total"] == 3
    assert [r["role"] for r in stats["requests"]] == ["target", "judge", "consolidate"]
    httpx.post(sim.url + "/_sim/reset")
    assert sim.stats.total == 0
    httpx.post(sim.url + "/_sim/fail", json={"count": 1, "status": 503})
    r = httpx.post(sim.url + "/v1/messages", json={"model": "m", "messages": []})
    assert r.status_code == 503 and r.json()["error"]["type"] == "api_error"
    r = httpx.post(sim.url + "/v1/messages", json={"model": "m", "messages": []})
    assert r.status_code == 200
    assert [q["status"] for q in sim.stats.requests] == [503, 200]


def test_persona_fail_first_and_bad_json(tmp_path) -> None:
    persona = tmp_path / "p.toml"
    persona.write_text("[server]\nfail_first = 2\n")
    with serve(persona) as sim:
        codes = [
            httpx.post(
                sim.url + "/v1/chat/completions", json={"model": "m", "messages": []}
            ).status_code
            for _ in range(3)
        ]
        assert codes == [500, 500, 200]
        r = httpx.post(
            sim.url + "/v1/chat/completions",
            content=b"{nope",
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 400 and "error" in r.json()


def test_models_and_count_tokens(sim: Simulator) -> None:
    models = httpx.get(sim.url + "/v1/models").json()
    assert models["data"][0]["id"] == "sim" and models["object"] == "list"
    r = httpx.post(
        sim.url + "/v1/messages/count_tokens",
        json={"model": "m", "messages": [{"role": "user", "content": "x" * 40}]},
    )
    assert r.json()["input_tokens"] > 10


def test_runs_as_a_subprocess_and_prints_its_url() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillopt_sleep.simulator", "--port", "0", "--api-key", "k"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        r = httpx.post(
            url + "/v1/chat/completions",
            headers={"Authorization": "Bearer k"},
            json={"model": "m", "messages": [{"role": "user", "content": "lint"}]},
        )
        assert r.json()["choices"][0]["message"]["content"] == "Run `npm run lint`."
    finally:
        proc.terminate()
        proc.wait(timeout=10)
