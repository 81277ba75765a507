"""Benchmark of mining: ``mine()`` over one project of 1k, 2k, 4k, 8k and 16k distinct
prompts, with the candidate index (mining/candidates.py) and with the all-pairs comparison it
replaced (``cluster_all_pairs``). Not a timed test: it prints numbers.

Run with ``pytest tests/bench/bench_mining.py -m bench -s`` (or ``python
tests/bench/bench_mining.py``). It is skipped unless the ``bench`` marker is selected.

The prompts are generated (tests/helpers/mining.py): about 30 % of the requests asked 2–5
times in other words (reordered, filler, a qualifier, a plural, a typo …), the rest once;
~250 common words and 4,000 project names with a long tail. Sixteen prompts per session,
each answered, one project. CPU seconds of ``mine()`` (store reads, splitting sessions into
intents, clustering, tasks) are measured, and the pairs the clustering scored. The all-pairs
path runs up to ``BENCH_MINING_OLD_MAX`` prompts (4,000 by default: it is quadratic); above
that its seconds are extrapolated from the largest measured size (marked ``~``). Both paths
must give the same tasks. Then 1 % new prompts are harvested and mined again: the next night
(incremental: only the new prompts are compared). ``run(report)`` appends one dict per size
to ``report``. About 80 s on two shared cores.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

SIZES = (1000, 2000, 4000, 8000, 16000)
OLD_MAX = int(os.environ.get("BENCH_MINING_OLD_MAX", "4000"))
NOW = dt.datetime(2025, 6, 30, tzinfo=dt.UTC)
PER_SESSION = 16
NEW = 100  # the next night adds n / NEW prompts


def _store(tmp: Path, n: int) -> Any:
    from skillopt_sleep.store import Store
    from tests.helpers.mining import prompts, save_sessions

    texts = prompts(n + n // NEW, seed=n, names=4000)
    random.Random(n).shuffle(texts)  # a request's variants in different sessions
    store = Store(tmp / f"mining-{n}.db")
    save_sessions(store, texts[:n], per_session=PER_SESSION, first_day=1, last_day=27)
    return store, texts[n:]


def _mine(store: Any, all_pairs: bool) -> tuple[float, int, int, list[tuple[str, int]]]:
    from skillopt_sleep.config import Settings
    from skillopt_sleep.mining import mine as mining

    counts: Counter = Counter()
    original = mining._cluster
    if all_pairs:
        mining._cluster = lambda intents, threshold, *_: mining.cluster_all_pairs(  # type: ignore[assignment]
            intents, threshold, counts
        )
    try:
        started = time.process_time()
        report = mining.mine(store, Settings(lookback_days=60), now=NOW)
        seconds = time.process_time() - started
    finally:
        mining._cluster = original  # type: ignore[assignment]
    tasks = [(t.id, len(t.occurrences)) for t in report.tasks]
    compared = counts["compared"] if all_pairs else report.pairs_compared
    return seconds, compared, report.clusters, tasks


def run(report: list, sizes: tuple[int, ...] = SIZES, old_max: int = OLD_MAX) -> None:
    """Mine each size both ways, then once more after 1 % new prompts (incremental);
    append ``{"prompts", "clusters", "after_s", "before_s", "before_estimated", "speedup",
    "compared_after", "compared_before", "same_tasks", "new_prompts", "next_night_s",
    "compared_next_night"}`` per size to ``report`` and print the table."""
    from tests.helpers.mining import save_sessions

    rows: list[dict[str, Any]] = []
    last_old: tuple[int, float] | None = None
    with tempfile.TemporaryDirectory(prefix="bench-mining-") as d:
        for n in sizes:
            store, new = _store(Path(d), n)
            row: dict[str, Any] = {"prompts": n, "before_s": None, "compared_before": None}
            row["same_tasks"] = None
            old_tasks = None
            if n <= old_max:
                before, compared_old, _, old_tasks = _mine(store, all_pairs=True)
                row.update(before_s=before, before_estimated=False, compared_before=compared_old)
                last_old = (n, before)
            elif last_old is not None:
                row.update(before_s=last_old[1] * (n / last_old[0]) ** 2, before_estimated=True)
            store.mining.clear()
            after, compared, clusters, tasks = _mine(store, all_pairs=False)
            row.update(after_s=after, compared_after=compared, clusters=clusters)
            if old_tasks is not None:
                row["same_tasks"] = old_tasks == tasks
            if row["before_s"] is not None:
                row["speedup"] = row["before_s"] / row["after_s"]
            save_sessions(store, new, per_session=PER_SESSION, first_day=28, last_day=28, key="n")
            nxt, compared_next, _, _ = _mine(store, all_pairs=False)
            row.update(new_prompts=len(new), next_night_s=nxt, compared_next_night=compared_next)
            store.close()
            rows.append(row)
    print("\nmining one project (CPU seconds of mine(); ~ = extrapolated, quadratic):")
    print(
        "prompts  all-pairs s  index s  speed-up  pairs all-pairs  pairs index  same tasks"
        "  | +1 % next night s  pairs"
    )
    for row in rows:
        before = row["before_s"]
        mark = "~" if row.get("before_estimated") else " "
        same = row["same_tasks"]
        print(
            f"{row['prompts']:>7}  {mark}{before if before is not None else float('nan'):10.2f}"
            f"  {row['after_s']:7.2f}  {row.get('speedup', float('nan')):7.1f}x"
            f"  {row['compared_before'] or 0:>15,}  {row['compared_after']:>11,}"
            f"  {'-' if same is None else same!s:>10}"
            f"  | {row['next_night_s']:17.2f}  {row['compared_next_night']:,}"
        )
    report.extend(rows)


@pytest.mark.bench
def test_bench_mining(request: pytest.FixtureRequest) -> None:
    if "bench" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("benchmark: select it with -m bench")
    rows: list[dict[str, Any]] = []
    run(rows)
    assert all(r["same_tasks"] for r in rows if r["same_tasks"] is not None), rows


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    with tempfile.TemporaryDirectory(prefix="bench-mining-home-") as home:
        os.environ["SKILLOPT_SLEEP_HOME"] = home
        run([])
