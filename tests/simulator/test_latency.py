"""The simulator's latency: each model call waits ``latency`` plus a jitter drawn from the
seed and the request (the same request always waits the same time), records when it
arrived and was answered, and the stats count the most calls in flight at once."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from skillopt_sleep.simulator import Simulator, serve
from skillopt_sleep.simulator.persona import persona_from_dict


def _ask(url: str, text: str) -> float:
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    started = time.monotonic()
    res = httpx.post(url + "/v1/chat/completions", json=body, timeout=10)
    assert res.status_code == 200, res.text
    return time.monotonic() - started


def test_latency_and_a_jitter_that_depends_on_the_seed_and_the_request_only() -> None:
    with serve("demo", latency=0.05, jitter=0.1, seed=7) as sim:
        a = {"messages": [{"role": "user", "content": "run the tests"}]}
        b = {"messages": [{"role": "user", "content": "lint"}]}
        assert sim.delay(a) == sim.delay(dict(a))  # the same request: the same wait
        waits = {sim.delay({"messages": [{"role": "user", "content": str(i)}]}) for i in range(50)}
        assert len(waits) == 50 and all(0.05 <= w < 0.15 for w in waits)
        assert sim.delay(a) != sim.delay(b)
        took = _ask(sim.url, "run the tests")
        [rec] = sim.stats.snapshot()["requests"]
        assert rec["finished"] - rec["started"] >= 0.05 and took >= 0.05
    with serve("demo", latency=0.05, jitter=0.1, seed=8) as other:
        assert other.delay(a) != sim.delay(a)  # another seed: other waits
    with serve("demo") as plain:  # the default: no wait at all
        assert plain.delay(a) == 0.0


def test_the_persona_sets_latency_and_bad_values_are_refused() -> None:
    persona = persona_from_dict({"server": {"latency": 0.2, "jitter": 0.1, "seed": 3}})
    with serve(persona) as sim:
        assert (sim.latency, sim.jitter, sim.seed) == (0.2, 0.1, 3)
    with pytest.raises(ValueError, match="latency"):
        persona_from_dict({"server": {"latency": -1}})
    with pytest.raises(ValueError, match="latency"):
        Simulator("demo", jitter=601)


def test_calls_in_flight_together_are_counted() -> None:
    with serve("demo", latency=0.2) as sim:
        _ask(sim.url, "one at a time")
        assert sim.stats.max_in_flight == 1
        threads = [threading.Thread(target=_ask, args=(sim.url, f"together {i}")) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        snap = sim.stats.snapshot()
        assert snap["max_in_flight"] >= 2 and sim.stats.in_flight == 0
        sim.stats.reset()
        assert sim.stats.max_in_flight == 0
