"""Mining time at growing numbers of distinct prompts in one project: the runner's stand-in
when ``tests/bench/bench_mining.py`` (the mining benchmark proper) is not in the checkout.

For each size N (1k, 2k, 4k, … 16k): N distinct requests (generated from word lists with a
fixed seed) in Claude Code sessions of 50 requests each, harvested into a fresh store, then
``mining.mine.mine`` timed (wall and CPU of this process). Sizes stop growing once one took more
than ``cap`` seconds or the next would overrun ``budget`` (a quadratic miner takes about four
times as long at twice the size); the sizes not run are listed as such.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

SIZES = (1000, 2000, 4000, 8000, 16000)
VERBS = [
    "fix",
    "add",
    "remove",
    "rename",
    "document",
    "test",
    "refactor",
    "explain",
    "profile",
    "review",
]
THINGS = [
    "parser",
    "cache",
    "router",
    "session",
    "queue",
    "report",
    "widget",
    "loader",
    "writer",
    "builder",
    "scheduler",
    "exporter",
    "importer",
    "validator",
    "formatter",
    "tokenizer",
    "resolver",
    "encoder",
    "decoder",
    "monitor",
]
QUALS = [
    "slow",
    "flaky",
    "broken",
    "missing",
    "duplicated",
    "stale",
    "unsafe",
    "verbose",
    "legacy",
    "async",
]


def _pool(rng: random.Random, n: int = 3000) -> list[str]:
    """Pseudo-words (``kabrot``, ``selmin`` …): content words no two requests share by chance
    often, so distinct requests stay distinct tasks."""
    syll = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syll) for _ in range(3)))
    return sorted(words)


def prompts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    pool = _pool(rng)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        a, b, c = rng.sample(pool, 3)
        p = f"{rng.choice(VERBS)} the {rng.choice(QUALS)} {a} {b} in the {c} {rng.choice(THINGS)}"
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def one_size(root: Path, n: int) -> dict[str, Any]:
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.mining.mine import mine
    from skillopt_sleep.sources.ingest import harvest
    from skillopt_sleep.store import Store
    from skillopt_sleep.testing.sessions import write_claude_session

    home, project = root / f"home-{n}", root / f"project-{n}"
    project.mkdir(parents=True)
    asks = prompts(n)
    for i in range(0, n, 50):
        write_claude_session(home, project, [(p, "Done.", None) for p in asks[i : i + 50]])
    settings = load_settings(
        Path("/nonexistent/config.toml"),
        project=str(project),
        sources={
            "claude_code": {"roots": [str(home / ".claude" / "projects")]},
            "codex": {"enabled": False},
        },
    )
    store = Store(root / f"mine-{n}.db")
    harvest(store, settings, sources=["claude_code"])
    w0, c0 = time.perf_counter(), time.process_time()
    report = mine(store, settings)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    store.close()
    return {
        "prompts": n,
        "prompts_seen": report.prompts,
        "clusters": report.clusters,
        "wall_s": wall,
        "cpu_s": cpu,
    }


def run_benchmark(
    root: Path, sizes: tuple[int, ...] = SIZES, cap: float = 60.0, budget: float = 150.0
) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for i, n in enumerate(sizes):
        if rows:
            last = rows[-1]
            projected = last["wall_s"] * (n / last["prompts"]) ** 2
            left = budget - (time.perf_counter() - started)
            if last["wall_s"] > cap or projected > left:
                for m in sizes[i:]:
                    rows.append({"prompts": m, "not_run": f"projected ≥ {projected:.0f} s"})
                    projected *= 4
                break
        rows.append(one_size(root, n))
    return {"miner": "skillopt_sleep.mining.mine.mine", "rows": rows}
