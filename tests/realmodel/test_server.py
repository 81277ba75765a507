"""tests/realmodel/serve.mjs with the real 1.5B model (docs/realmodel.md): both wire formats,
streaming, temperature, the sample header, max_tokens, and the project's own HTTP backends
following a one-line instruction through it. Answers are kept short (2 cores, shared)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from skillopt_sleep.backends.anthropic import AnthropicBackend
from skillopt_sleep.backends.openai_compatible import OpenAICompatibleBackend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.models import CompletionRequest
from tests.helpers import realmodel

# one worker starts the model server (2 GB) and runs them all: the group keeps them together
pytestmark = [pytest.mark.realmodel, pytest.mark.xdist_group("realmodel")]

RULE = "Always use pnpm, never npm."
ASK = "How do I install the dependencies of this Node project? Answer with one command."
POEM = "Write one line of a poem about the sea."


def _chat(url: str, body: dict[str, Any], sample: int | None = None) -> dict[str, Any]:
    headers = {} if sample is None else {"x-skillopt-sample": str(sample)}
    r = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=240)
    r.raise_for_status()
    return r.json()


def _events(url: str, path: str, body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The SSE events of a streamed answer: (event name or None, data parsed or raw)."""
    out: list[tuple[str | None, Any]] = []
    with httpx.stream("POST", f"{url}{path}", json=body, timeout=240) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        event = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                raw = line[6:]
                out.append((event, raw if raw == "[DONE]" else json.loads(raw)))
                event = None
    return out


def _ask(rule: bool, **body: Any) -> dict[str, Any]:
    system = [{"role": "system", "content": RULE}] if rule else []
    return {"messages": [*system, {"role": "user", "content": ASK}], **body}


def test_models_and_health(real_model: str) -> None:
    models = httpx.get(f"{real_model}/v1/models", timeout=30).json()
    assert models["data"][0]["id"] == "qwen2.5-coder-1.5b-instruct"
    health = httpx.get(f"{real_model}/health", timeout=30).json()
    assert health["threads"] in (1, 2) and 8192 <= health["context"] <= 16384


def test_chat_completions_streamed_and_not_agree_at_temperature_zero(real_model: str) -> None:
    body = _ask(True, model="local", max_tokens=24, temperature=0)
    whole = _chat(real_model, body)
    again = _chat(real_model, body, sample=3)  # greedy: the sample index changes nothing
    text = whole["choices"][0]["message"]["content"]
    assert whole["object"] == "chat.completion" and whole["model"] == "local"
    assert again["choices"][0]["message"]["content"] == text and "pnpm" in text
    events = _events(
        real_model,
        "/v1/chat/completions",
        dict(body, stream=True, stream_options={"include_usage": True}),
    )
    chunks = [data for _, data in events[:-1]]
    assert events[-1] == (None, "[DONE]")
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert streamed == text
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] == whole["choices"][0]["finish_reason"]
    assert chunks[-1]["usage"] == whole["usage"]


def test_messages_streamed_and_not_agree_at_temperature_zero(real_model: str) -> None:
    body = {
        "model": "claude-local",
        "max_tokens": 24,
        "temperature": 0,
        "system": [{"type": "text", "text": RULE}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": ASK}]}],
    }
    r = httpx.post(f"{real_model}/v1/messages", json=body, timeout=240)
    whole = r.json()
    assert whole["type"] == "message" and whole["model"] == "claude-local"
    text = whole["content"][0]["text"]
    assert "pnpm" in text
    events = _events(real_model, "/v1/messages", dict(body, stream=True))
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) <= {"content_block_delta", "ping"}  # a ping every 5 s of silence
    streamed = "".join(
        data["delta"]["text"] for name, data in events if name == "content_block_delta"
    )
    assert streamed == text
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == whole["stop_reason"]
    assert delta["usage"]["output_tokens"] == whole["usage"]["output_tokens"]


def test_responses_streamed_and_not_agree_at_temperature_zero(real_model: str) -> None:
    """OpenAI Responses, as Codex sends it: instructions, input items, streamed."""
    body = {
        "model": "codex-local",
        "instructions": RULE,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ASK}]}
        ],
        "max_output_tokens": 24,
        "temperature": 0,
    }
    whole = httpx.post(f"{real_model}/v1/responses", json=body, timeout=240).json()
    assert whole["object"] == "response" and whole["model"] == "codex-local"
    text = whole["output"][0]["content"][0]["text"]
    assert "pnpm" in text
    events = _events(real_model, "/v1/responses", dict(body, stream=True))
    names = [name for name, _ in events]
    assert names[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert names[-1] == f"response.{whole['status']}"
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    streamed = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    assert streamed == text
    assert events[-1][1]["response"]["usage"] == whole["usage"]


def test_the_sample_header_gives_other_samples_each_reproducible(real_model: str) -> None:
    body = {"messages": [{"role": "user", "content": POEM}], "max_tokens": 16, "temperature": 1.0}
    first = _chat(real_model, body, sample=1)["choices"][0]["message"]["content"]
    assert _chat(real_model, body, sample=1)["choices"][0]["message"]["content"] == first
    assert _chat(real_model, body, sample=2)["choices"][0]["message"]["content"] != first


def test_max_tokens_is_honoured(real_model: str) -> None:
    out = _chat(real_model, {"messages": [{"role": "user", "content": POEM}], "max_tokens": 3})
    assert out["usage"]["completion_tokens"] <= 3 and out["choices"][0]["finish_reason"] == "length"
    body = {"max_tokens": 2, "messages": [{"role": "user", "content": POEM}]}
    msg = httpx.post(f"{real_model}/v1/messages", json=body, timeout=240).json()
    assert msg["usage"]["output_tokens"] <= 2 and msg["stop_reason"] == "max_tokens"


def test_the_http_backends_follow_a_one_line_rule_through_it(real_model: str) -> None:
    """The issue's sanity check, small: greedy (the backends' default temperature 0) both
    backends answer with pnpm under the rule and not without it; 3 samples at 0.8 all do."""
    openai = OpenAICompatibleBackend(
        BackendConfig(name="openai_compatible", model="qwen", base_url=f"{real_model}/v1")
    )
    anthropic = AnthropicBackend(BackendConfig(name="anthropic", model="qwen", base_url=real_model))
    warm = OpenAICompatibleBackend(
        BackendConfig(
            name="openai_compatible", model="qwen", base_url=f"{real_model}/v1", temperature=0.8
        )
    )
    try:
        for backend in (openai, anthropic):
            ruled = backend.complete(CompletionRequest(system=RULE, prompt=ASK, max_tokens=40))
            assert "pnpm" in ruled.text, ruled.text
            bare = backend.complete(CompletionRequest(prompt=ASK, max_tokens=40))
            assert "pnpm" not in bare.text, bare.text
        samples = [
            warm.complete(CompletionRequest(system=RULE, prompt=ASK, max_tokens=40, sample=k))
            for k in range(3)
        ]
        assert [("pnpm" in s.text) for s in samples] == [True] * 3, [s.text for s in samples]
    finally:
        for backend in (openai, anthropic, warm):
            backend.close()


def test_the_server_exits_when_its_parent_dies_even_mid_answer(
    real_model_file: Path, tmp_path: Path
) -> None:
    """--parent-pid: a server whose parent is gone stops by itself, also in the middle of an
    answer (no orphan holding 1 GB and a core)."""
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    long = {"messages": [{"role": "user", "content": "Count to 500."}], "max_tokens": 400}

    def ask(url: str) -> None:
        try:
            httpx.post(f"{url}/v1/chat/completions", json=long, timeout=120)
        except httpx.HTTPError:
            pass  # the server went away mid-answer: expected

    try:
        with realmodel.serve(
            real_model_file, tmp_path / "serve.log", threads=1, parent_pid=parent.pid
        ) as server:
            asking = threading.Thread(target=ask, args=(server.base_url,))
            asking.start()
            time.sleep(3)
            assert server.proc.poll() is None
            parent.kill()
            parent.wait()
            server.proc.wait(timeout=15)
            asking.join(30)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
