"""Benchmark of parallel replays: one night with ``target.workers`` 1, 2, 4 and 8 against the
simulator answering every model call after a fixed latency (1 s by default). Not a timed
test: it prints numbers.

Run with ``pytest tests/bench/bench_workers.py -m bench -s`` (or ``python
tests/bench/bench_workers.py``; ``BENCH_LATENCY=0.2`` for a quicker run). It is skipped
unless the ``bench`` marker is selected.

Each night starts from an empty response cache in the same world (the wider test world:
10 scorable tasks; occurrences 10 train, 10 val, 1 test) and must decide what the one-worker night decided.
Printed per worker count: the night's wall time, its model calls (a night with more workers
may make more: val replays of edits made ahead and not used), the most calls the simulator
had in flight at once, and the speed-up over one worker.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

WORKERS = (1, 2, 4, 8)
LATENCY = float(os.environ.get("BENCH_LATENCY", "1.0"))


def run_benchmark(tmp: Path, latency: float = LATENCY) -> dict[int, dict[str, Any]]:
    from skillopt_sleep import paths
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.simulator import serve
    from skillopt_sleep.store import Store
    from tests.helpers.night import (
        WIDER_CONVERSATIONS,
        WIDER_PERSONA,
        api_backend,
        night_settings,
        night_world,
        write_persona,
    )
    from tests.helpers.store import clear_response_cache

    home = tmp / "bench-home"
    home.mkdir(exist_ok=True)
    project, target = night_world(tmp, home, "# Project rules\n", WIDER_CONVERSATIONS)
    persona = write_persona(tmp, WIDER_PERSONA)
    store = Store(paths.db_path())
    out: dict[int, dict[str, Any]] = {}
    with serve(persona, latency=latency) as sim:
        first = True
        for workers in WORKERS:
            backend = api_backend(sim.url, workers)
            settings = night_settings(
                home, project, target, sim.url, target=backend, optimizer=backend
            )
            clear_response_cache(store)
            sim.stats.reset()
            started = time.monotonic()
            result = run_night(store, settings, harvest_first=first)
            wall = time.monotonic() - started
            first = False
            decided = [result.status, result.val_after, result.test_after, result.proposal_id]
            out[workers] = {
                "seconds": wall,
                "calls": result.cost.calls,
                "max_in_flight": sim.stats.max_in_flight,
                "decided": decided,
            }
    store.close()
    base = out[WORKERS[0]]["seconds"]
    print(f"\nworkers at {latency:g} s per model call (one night each, empty cache):")
    print("workers  wall s  calls  in flight  speed-up")
    for workers, row in out.items():
        row["speedup"] = base / row["seconds"]
        print(
            f"{workers:>7}  {row['seconds']:6.1f}  {row['calls']:5d}  {row['max_in_flight']:9d}"
            f"  {row['speedup']:7.2f}x"
        )
    return out


@pytest.mark.bench
def test_bench_workers(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if "bench" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("benchmark: select it with -m bench")
    res = run_benchmark(tmp_path)
    # every worker count decided the same night
    assert len({repr(row["decided"]) for row in res.values()}) == 1, res


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as d:
        os.environ["SKILLOPT_SLEEP_HOME"] = str(Path(d) / "skillopt-home")
        run_benchmark(Path(d))
