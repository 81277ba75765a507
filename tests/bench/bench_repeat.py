"""Benchmark of a repeat night on the 2,000-session corpus: what a night with nothing new
costs after the nights before it. Not a timed test: it returns numbers;
``tests/bench/run_all.py`` writes them into ``docs/benchmarks.md``.

The world: the harvest benchmark's corpus (:func:`~skillopt_sleep.testing.corpus_gen.
generate_corpus`, 2,000 Claude Code and Codex sessions in 50 projects, seed 14, size scale
0.25, its 30 days ending an hour before the run; the night looks back 31 days, so it holds
them all) plus the demo's requests corrected in two more projects (to pnpm in one, to yarn
in the other: no check can be derived from the corpus's own follow-ups, so alone it trains
nothing), in a HOME of its own. The night is the default one: every project's sessions, Claude Code's user
memory file (one block per project), the shipped training settings, the simulator as target
and optimizer (its optimizer proposes the edits the failures suggest, then a harmful and a
useless one, which the gate rejects). Raised from their defaults: ``max_tasks`` to
:data:`MAX_TASKS` (the corpus's recurring requests alone fill the default 60) and
``read_calls`` and ``max_calls_per_night`` to :data:`READ_CALLS` and :data:`MAX_CALLS`, so
the first night reads every follow-up (by default it reads 100 a night and leaves the rest
to the next nights, which then have something to do).

Measured, by role (the simulator's count of the model calls it answered): the first night;
the catch-up nights, each run only while the night before left follow-ups unread or stopped
on the night's call cap (none with these settings); then the repeat night, with nothing new.

Run with ``python -m tests.bench.bench_repeat`` (a temporary HOME and store).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SESSIONS, SEED, SIZE_SCALE = 2000, 14, 0.25
#: the most catch-up nights before the repeat night (a night that still leaves work after
#: these is reported as such)
MAX_CATCH_UP = 6
#: mining's task cap for the bench's nights (the default is 60)
MAX_TASKS = 1000
#: the follow-ups a night may read and the night's call cap (defaults 100 and 400), raised so
#: the first night does all its work and the next one has nothing new
READ_CALLS, MAX_CALLS = 1000, 4000


def _night(run_night: Any, store: Any, settings: Any, sim: Any) -> dict[str, Any]:
    sim.reset()
    t0 = time.perf_counter()
    result = run_night(store, settings)
    return {
        "status": str(result.status),
        # the model calls the simulator answered (a night with no task records no cost)
        "calls": sum(sim.stats.by_role.values()),
        "night_calls": result.cost.calls,
        "cached_calls": result.cost.cached_calls,
        "by_role": dict(sim.stats.by_role),
        "unread": result.summary.unread or 0,
        "stopped": result.summary.stopped,
        "blocks": len(result.summary.blocks) or 1,
        "seconds": time.perf_counter() - t0,
    }


def run_benchmark(
    root: Path, sessions: int = SESSIONS, size_scale: float = SIZE_SCALE
) -> dict[str, Any]:
    from skillopt_sleep import paths
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.simulator import serve
    from skillopt_sleep.store import Store
    from skillopt_sleep.testing.corpus_gen import generate_corpus
    from skillopt_sleep.testing.sessions import write_conversations
    from tests.helpers.night import PERSONA, YARN_CONVERSATIONS

    home = root / "repeat-home"
    home.mkdir(parents=True, exist_ok=True)
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)  # the user memory file the night trains is this HOME's
    try:
        end = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(hours=1)
        t0 = time.perf_counter()
        made = generate_corpus(home, sessions, SEED, size_scale=size_scale, end=end)
        generated = time.perf_counter() - t0
        projects = [(root / "src" / "web").resolve(), (root / "src" / "api").resolve()]
        for project, conversations in zip(
            projects, (DEMO_CONVERSATIONS, YARN_CONVERSATIONS), strict=True
        ):
            project.mkdir(parents=True)
            write_conversations(home, project, conversations)
        (home / ".claude" / "CLAUDE.md").write_text("# My rules\n", encoding="utf-8")
        persona = root / "persona.toml"
        persona.write_text(PERSONA, encoding="utf-8")
        store = Store(paths.db_path())
        with serve(persona) as sim:
            overrides = demo_settings(home, projects[0], sim.url)
            for key in ("project", "epochs", "edit_budget"):  # every project, shipped training
                del overrides[key]
            overrides["document"] = {"kind": "memory", "agent": "claude_code"}
            # the corpus's own requests fill the default 60 tasks (the reader takes some of
            # their follow-ups for corrections, and corrected tasks come first, the most
            # asked first): room for the two projects' corrected requests too
            overrides["max_tasks"] = MAX_TASKS
            # one night reads every follow-up (by default 100 a night: the corpus's ~350
            # readings would take four nights, each with something left to read)
            overrides["read_calls"] = READ_CALLS
            overrides["max_calls_per_night"] = MAX_CALLS
            # the corpus's 30 days end an hour ago: none of its sessions leaves the lookback
            # between the nights
            overrides["lookback_days"] = 31
            settings = load_settings(Path("/nonexistent/config.toml"), **overrides)
            first = _night(run_night, store, settings, sim)
            catch_up: list[dict[str, Any]] = []
            last = first
            while (last["unread"] or last["stopped"]) and len(catch_up) < MAX_CATCH_UP:
                last = _night(run_night, store, settings, sim)
                catch_up.append(last)
            repeat = _night(run_night, store, settings, sim)
        store.close()
    finally:
        if old_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = old_home
    out = {
        "corpus": {
            "sessions": made["sessions"],
            "claude_sessions": made["claude_sessions"],
            "codex_sessions": made["codex_sessions"],
            "files": made["files"],
            "bytes": made["bytes"],
            "seed": SEED,
            "size_scale": size_scale,
            "corrected_projects": len(projects),
            "max_tasks": MAX_TASKS,
            "read_calls": READ_CALLS,
            "max_calls_per_night": MAX_CALLS,
            "generated_seconds": generated,
        },
        "first": first,
        "catch_up": catch_up,
        "repeat": repeat,
    }
    print(
        f"first night: {first['calls']} calls {first['by_role']}; catch-up nights: "
        + (", ".join(f"{n['calls']} {n['by_role']}" for n in catch_up) or "none")
        + f"; repeat night: {repeat['calls']} calls {repeat['by_role']}"
    )
    return out


if __name__ == "__main__":
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    with tempfile.TemporaryDirectory(prefix="bench-repeat-") as d:
        os.environ["SKILLOPT_SLEEP_HOME"] = str(Path(d) / "skillopt-home")
        print(json.dumps(run_benchmark(Path(d)), indent=2, default=str))
