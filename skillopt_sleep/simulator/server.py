"""The loopback HTTP server of the simulator (stdlib ``ThreadingHTTPServer``).

Routes (a leading ``/v1`` is optional on every API route):

* ``POST /v1/messages`` (Anthropic Messages), ``POST /v1/messages/count_tokens``
* ``POST /v1/responses`` (OpenAI Responses), ``POST /v1/chat/completions`` (OpenAI Chat)
* ``GET /v1/models`` (a list in a shape both Anthropic and OpenAI clients accept)
* ``GET /_sim/stats`` (JSON of :meth:`Stats.snapshot`), ``POST /_sim/reset`` (zero the stats),
  ``POST /_sim/fail`` with ``{"count": N, "status": 500}`` (fail the next N model calls),
  ``POST /_sim/stall`` with ``{"count": N, "seconds": S}`` (hold the next N model calls for S
  seconds, then drop the connection without an answer: a hanging model API)

Latency: every model call waits ``latency`` seconds plus a jitter of up to ``jitter`` seconds
before it is answered (the persona's ``[server]`` values, or ``Simulator(latency=…,
jitter=…, seed=…)``). The jitter is drawn from a hash of the seed and the request body, so
the same request always waits the same time whatever order threads send it in. Each model
call's record has ``started`` and ``finished`` (``time.monotonic()`` on the server), and
:class:`Stats` counts ``in_flight`` and ``max_in_flight`` model calls: a client's
concurrency measured where the requests arrive.

With ``api_key`` set, API routes need it as ``x-api-key`` or ``Authorization: Bearer``;
otherwise 401 in the API's own error shape. A model the persona does not list gives 404
(``not_found_error`` / ``model_not_found``). The ``/_sim`` routes never need a key.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from skillopt_sleep.simulator import wire
from skillopt_sleep.simulator.brain import Brain, Turn, skill_loaded, tokens
from skillopt_sleep.simulator.persona import Persona, load_persona

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_API = {"/messages": "anthropic", "/responses": "responses", "/chat/completions": "chat"}


@dataclass
class Stats:
    """Counts of requests by ``endpoint`` (path without ``/v1``) and by ``role`` (target /
    reflect / judge / consolidate; model calls only), and the last ``keep`` request records
    ``{"endpoint", "method", "status", "role", "model", "stream", "prompt", "tools",
    "tool", "prompt_chars", "prompt_tail"}`` (``prompt``: first 200 chars of the user's
    prompt, ``prompt_tail`` its last 200, ``prompt_chars`` its length; ``tools``: names offered;
    ``tool``: the tool call answered, if any). A request that lists skills of the user's
    (built-in ones aside) also has ``skills`` (their names) and ``skills_loaded`` (those a tool
    call of the conversation loaded). With ``full`` each record also holds the whole prompt
    as ``prompt_full``, the whole context the rule language sees before the listing is taken
    out (:meth:`Turn.all_text`) as ``context_full`` and the request body (parsed JSON) as
    ``body`` (for tests that read what a client really sent)."""

    keep: int = 200
    full: bool = False
    #: model calls being answered now, and the most at once since the last reset
    in_flight: int = 0
    max_in_flight: int = 0
    by_endpoint: Counter[str] = field(default_factory=Counter)
    by_role: Counter[str] = field(default_factory=Counter)
    requests: deque[dict[str, Any]] = field(default_factory=deque)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, **rec: Any) -> None:
        with self.lock:
            self.by_endpoint[rec["endpoint"]] += 1
            if rec.get("role"):
                self.by_role[rec["role"]] += 1
            self.requests.append(rec)
            while len(self.requests) > self.keep:
                self.requests.popleft()

    def enter(self) -> None:
        """A model call arrived (see :attr:`in_flight`)."""
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def reset(self) -> None:
        with self.lock:
            self.max_in_flight = self.in_flight
            self.by_endpoint.clear()
            self.by_role.clear()
            self.requests.clear()

    @property
    def total(self) -> int:
        return sum(self.by_endpoint.values())

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "by_endpoint": dict(self.by_endpoint),
                "by_role": dict(self.by_role),
                "requests": list(self.requests),
                "total": sum(self.by_endpoint.values()),
                "max_in_flight": self.max_in_flight,
            }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # headers and body are two writes: with Nagle's algorithm the body waits for the client's
    # delayed ACK (~40 ms a call on Linux loopback, most of a simulated night's wall time)
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing ---------------------------------------------------------------------
    def _body(self) -> dict[str, Any]:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "zstd":
            import zstandard

            raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        value = json.loads(raw or b"{}")
        if not isinstance(value, dict):
            raise ValueError("request body must be a JSON object")
        return value

    def _json(self, status: int, data: dict[str, Any]) -> None:
        payload = json.dumps(data, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("request-id", "req_sim")
        self.end_headers()
        self._left()
        self.wfile.write(payload)

    def _stream(self, events: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in events:
            self.wfile.write(event)
            self.wfile.flush()

    def _error(self, api: str, status: int, message: str, kind: str, code: str | None) -> None:
        if api == "anthropic":
            self._json(status, wire.anthropic_error(kind, message))
        else:
            self._json(status, wire.openai_error(message, kind, code))

    def _authorized(self) -> bool:
        key = self.server.sim.api_key
        if not key:
            return True
        bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        return key in (self.headers.get("x-api-key"), bearer)

    def _path(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        return path.removeprefix("/v1") or "/"

    # -- routes -----------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        sim, path = self.server.sim, self._path()
        if path == "/_sim/stats":
            return self._json(200, sim.stats.snapshot())
        if path == "/models":
            anthropic = "anthropic-version" in self.headers or "x-api-key" in self.headers
            sim.stats.record(endpoint="/models", method="GET", status=200)
            if not self._authorized():
                return self._unauthorized("anthropic" if anthropic else "chat")
            return self._json(200, sim.models_payload())
        if path == "/":
            return self._json(200, {"simulator": True, "persona": sim.persona.name})
        self._json(
            404, wire.openai_error(f"no route GET {path}", "invalid_request_error", "not_found")
        )

    def do_POST(self) -> None:
        sim, path = self.server.sim, self._path()
        if path == "/_sim/reset":
            sim.reset()
            return self._json(200, {"ok": True})
        if path == "/_sim/fail":
            spec = self._body()
            sim.fail_next(int(spec.get("count", 1)), int(spec.get("status", 500)))
            return self._json(200, {"ok": True})
        if path == "/_sim/stall":
            spec = self._body()
            sim.stall_next(int(spec.get("count", 1)), float(spec.get("seconds", 30.0)))
            return self._json(200, {"ok": True})
        if path == "/messages/count_tokens":
            body = self._body()
            text = wire.parse_anthropic(body).all_text()
            return self._json(200, {"input_tokens": tokens(text)})
        api = _API.get(path)
        if api is None:
            self._body()
            return self._json(
                404,
                wire.openai_error(f"no route POST {path}", "invalid_request_error", "not_found"),
            )
        self._model_call(api, path)

    def _unauthorized(self, api: str) -> None:
        self._error(
            api,
            401,
            "invalid x-api-key" if api == "anthropic" else "Incorrect API key provided.",
            "authentication_error" if api == "anthropic" else "invalid_request_error",
            "invalid_api_key",
        )

    def _model_call(self, api: str, path: str) -> None:
        sim = self.server.sim
        sim.stats.enter()
        self._in_flight = True
        try:
            self._answer(api, path)
        finally:
            self._left()

    def _left(self) -> None:
        """The call stops counting as in flight once, before its response's last bytes go
        out: a client's next call on the same connection can then never overlap it."""
        if getattr(self, "_in_flight", False):
            self._in_flight = False
            self.server.sim.stats.leave()

    def _answer(self, api: str, path: str) -> None:
        sim = self.server.sim
        rec: dict[str, Any] = {
            "endpoint": path,
            "method": "POST",
            "role": None,
            "started": time.monotonic(),
        }
        try:
            body = self._body()
        except (ValueError, OSError) as exc:
            sim.stats.record(**rec, status=400)
            return self._error(api, 400, f"invalid JSON body: {exc}", "invalid_request_error", None)
        turn = getattr(wire, f"parse_{api}")(body)
        turn.sample = wire.sample_of(self.headers.get(wire.SAMPLE_HEADER))
        self._describe(rec, turn, body)
        if self._refused(api, turn, rec):
            return None
        delay = sim.delay(body)
        if delay:
            sim.closing.wait(delay)
        rec["finished"] = time.monotonic()
        try:
            reply = sim.brain.respond(turn)
        except Exception as exc:  # a brain bug must still answer in the API's shape
            sim.stats.record(**rec, status=500)
            return self._error(
                api,
                500,
                f"simulator error: {exc!r}",
                "api_error" if api == "anthropic" else "server_error",
                None,
            )
        out = reply.text + (json.dumps(reply.tool_input) + reply.tool if reply.tool else "")
        usage = (tokens(turn.all_text()), tokens(out))
        rid = sim.next_id()
        rec.update(role=reply.role, tool=reply.tool)
        sim.stats.record(**rec, status=200)
        if not turn.stream:
            render = (
                wire.anthropic_message if api == "anthropic" else getattr(wire, f"{api}_object")
            )
            return self._json(200, render(reply, turn, rid, usage))
        if api == "chat":
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return self._stream(wire.chat_sse(reply, turn, rid, usage, include))
        self._stream(getattr(wire, f"{api}_sse")(reply, turn, rid, usage))

    def _describe(self, rec: dict[str, Any], turn: Turn, body: dict[str, Any]) -> None:
        """What the request log keeps of a call: its model, prompt, tools, skills (the
        whole prompt and body too in a full log)."""
        rec.update(
            model=turn.model,
            stream=turn.stream,
            prompt=turn.prompt[:200],
            prompt_tail=turn.prompt[-200:],
            prompt_chars=len(turn.prompt),
            tools=turn.tools,
            sample=turn.sample,
        )
        listed = [skill for skill in turn.skills if not skill.builtin]
        if listed:
            rec["skills"] = [skill.name for skill in listed]
            rec["skills_loaded"] = [skill.name for skill in listed if skill_loaded(turn, skill)]
        if self.server.sim.stats.full:
            rec["prompt_full"] = turn.prompt
            rec["context_full"] = turn.all_text()
            rec["body"] = body

    def _refused(self, api: str, turn: Turn, rec: dict[str, Any]) -> bool:
        """Answer (and log) a call that gets no model answer: a stall, a missing key, an
        unknown model or a scheduled failure. True when the call is done."""
        sim = self.server.sim
        stall = sim.take_stall()
        if stall is not None:
            # hang: no status line, no byte; then drop the connection (bounded, so this
            # handler thread always ends by itself, and at once when the simulator closes)
            sim.stats.record(**rec, status=0, stalled=True)
            sim.closing.wait(stall)
            self.close_connection = True
            return True
        if not self._authorized():
            sim.stats.record(**rec, status=401)
            self._unauthorized(api)
            return True
        if not sim.persona.accepts(turn.model):
            sim.stats.record(**rec, status=404)
            if api == "anthropic":
                self._error(api, 404, f"model: {turn.model}", "not_found_error", None)
            else:
                self._error(
                    api,
                    404,
                    f"The model `{turn.model}` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    "model_not_found",
                )
            return True
        failure = sim.take_failure()
        if failure:
            sim.stats.record(**rec, status=failure)
            server_error = "api_error" if api == "anthropic" else "server_error"
            self._error(api, failure, "simulated server error", server_error, None)
            return True
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    sim: Simulator


class Simulator:
    """A running simulator. Attributes: ``url`` (``http://127.0.0.1:PORT``, no ``/v1``),
    ``port``, ``persona``, ``brain``, ``api_key``, ``stats`` (:class:`Stats`)."""

    def __init__(
        self,
        persona: Persona | str | Path | None = None,
        *,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        full_log: bool = False,
        latency: float | None = None,
        jitter: float | None = None,
        seed: int | None = None,
    ):
        if host not in LOOPBACK:
            raise ValueError(f"the simulator binds loopback only, not {host!r}")
        self.persona = load_persona(persona)
        #: seconds each model call waits, plus up to ``jitter`` (see the module doc)
        self.latency = self.persona.latency if latency is None else float(latency)
        self.jitter = self.persona.jitter if jitter is None else float(jitter)
        self.seed = self.persona.seed if seed is None else int(seed)
        if not (0 <= self.latency <= 600 and 0 <= self.jitter <= 600):
            raise ValueError("latency and jitter must be 0..600 seconds")
        self.brain = Brain(self.persona)
        self.api_key = api_key
        self.stats = Stats(full=full_log)
        self._lock = threading.Lock()
        self._failures = [self.persona.fail_status] * self.persona.fail_first
        self._stalls: list[float] = []
        #: set by :meth:`close`; releases stalled requests at once
        self.closing = threading.Event()
        self._ids = 0
        self._httpd = _Server((host, port), _Handler)
        self._httpd.sim = self
        self.port: int = self._httpd.server_address[1]
        self.url = f"http://{'[::1]' if host == '::1' else '127.0.0.1'}:{self.port}"
        self._thread: threading.Thread | None = None

    def models_payload(self) -> dict[str, Any]:
        names = list(self.persona.models) or ["sim"]
        data = [
            {
                "id": n,
                "object": "model",
                "type": "model",
                "display_name": n,
                "created": 0,
                "created_at": "2025-01-01T00:00:00Z",
                "owned_by": "simulator",
            }
            for n in names
        ]
        return {
            "object": "list",
            "data": data,
            "has_more": False,
            "first_id": names[0],
            "last_id": names[-1],
        }

    def delay(self, body: dict[str, Any]) -> float:
        """Seconds the model call with ``body`` waits: ``latency`` plus its jitter, a
        fraction of ``jitter`` from a hash of ``seed`` and the body (deterministic)."""
        if not self.jitter:
            return self.latency
        blob = json.dumps([self.seed, body], sort_keys=True, ensure_ascii=False, default=str)
        digest = hashlib.sha256(blob.encode("utf-8", "surrogatepass")).digest()
        return self.latency + self.jitter * int.from_bytes(digest[:8], "big") / 2**64

    def fail_next(self, count: int, status: int = 500) -> None:
        """Make the next ``count`` model calls answer HTTP ``status`` (error JSON)."""
        with self._lock:
            self._failures = [status] * count

    def take_failure(self) -> int | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def stall_next(self, count: int, seconds: float = 30.0) -> None:
        """Make the next ``count`` model calls hang: the request is read, nothing is sent for
        ``seconds`` (at most 600), then the connection is closed without an answer. A stalled
        request is recorded with ``status`` 0 and ``stalled`` True."""
        with self._lock:
            self._stalls = [max(0.0, min(float(seconds), 600.0))] * count

    def take_stall(self) -> float | None:
        with self._lock:
            return self._stalls.pop(0) if self._stalls else None

    def next_id(self) -> str:
        with self._lock:
            self._ids += 1
            return f"sim{self._ids:06d}"

    def reset(self) -> None:
        """Zero the stats and cancel pending failures and stalls."""
        self.stats.reset()
        with self._lock:
            self._failures = []
            self._stalls = []

    def start(self) -> Simulator:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            args=(0.05,),
            name=f"simulator:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def close(self) -> None:
        self.closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)


@contextlib.contextmanager
def serve(
    persona: Persona | str | Path | None = None,
    api_key: str | None = None,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    full_log: bool = False,
    latency: float | None = None,
    jitter: float | None = None,
    seed: int | None = None,
) -> Iterator[Simulator]:
    """Run a simulator in a background thread: ``with serve(p) as sim: sim.url``
    (``full_log``: keep each request's whole prompt in ``sim.stats``; ``latency`` /
    ``jitter`` / ``seed``: override the persona's, see the module doc)."""
    sim = Simulator(
        persona,
        api_key=api_key,
        host=host,
        port=port,
        full_log=full_log,
        latency=latency,
        jitter=jitter,
        seed=seed,
    ).start()
    try:
        yield sim
    finally:
        sim.close()


def wait_ready(url: str, timeout: float = 5.0) -> None:  # pragma: no cover - helper
    """Poll ``GET {url}/`` until it answers (for subprocess use)."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url + "/", timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
