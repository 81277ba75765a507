"""Benchmark of opening a large store: what ``PRAGMA quick_check`` (run by every
``Store(path)`` open, :func:`skillopt_sleep.store._check_intact`) costs on a store of
``BENCH_STORE_MB`` megabytes (default 1024), against an open that skips it. Not a timed test:
it prints numbers.

Run with ``pytest tests/bench/bench_store_open.py -m bench -s`` (or ``python
tests/bench/bench_store_open.py``). It is skipped unless the ``bench`` marker is selected.

The store is built through :class:`~skillopt_sleep.store.Store` (migrated, full-text index
and its triggers on) with sessions of 200 messages of about 2 KB of varied words each, then
closed (checkpointed). Measured, each the median of ``BENCH_REPEAT`` runs with the file in the
page cache (warm: what a command run after another sees), and once after the cache was
dropped where the machine allows it (cold):

* ``Store(path)`` as every command opens it (quick_check included);
* the same open with the check skipped (the cost of everything else an open does);
* ``PRAGMA quick_check(1)`` alone on an open connection.

Measured here (2 shared cores, 1025 MB built in 234 s): open with the check 2986 ms warm,
without it 0.9 ms; the check alone 1531 ms warm, 8058 ms cold (31 MB: 40 ms warm, 205 ms
cold). Hence ``CHECK_ON_OPEN_BYTES``: read commands check a store on open only up to 32 MB;
a larger one is checked at its first write, daemon start, a night and ``doctor``.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pytest

SIZE_MB = int(os.environ.get("BENCH_STORE_MB", "1024"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))


def build(db: Path, size_mb: int) -> None:
    """A store of about ``size_mb`` MB of messages (with their full-text rows)."""
    from skillopt_sleep.store import Store

    rng = random.Random(7)
    vocab = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 11)))
        for _ in range(50_000)
    ]
    store = Store(db)
    n = 0
    while db.stat().st_size < size_mb * 1024 * 1024:
        sid = f"claude_code:bench-{n}"
        with store.write():
            store.db.table("sessions").insert(
                {
                    "id": sid,
                    "source": "claude_code",
                    "key": f"bench-{n}",
                    "project": "/p",
                    "self_generated": 0,
                }
            )
            store.db.table("messages").insert_all(
                {
                    "session_id": sid,
                    "source": "claude_code",
                    "uid": f"{n}-{i}",
                    "seq": i,
                    "role": "user" if i % 2 == 0 else "assistant",
                    "kind": "prompt" if i % 2 == 0 else "answer",
                    "text": " ".join(rng.choices(vocab, k=300)),
                    "tool_names": "[]",
                }
                for i in range(200)
            )
        n += 1
        if n % 20 == 0:
            store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def _median(fn, repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _drop_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def run(folder: Path) -> dict[str, float]:
    import sqlite3

    from skillopt_sleep import store as store_mod
    from skillopt_sleep.store import Store

    db = folder / "skillopt.db"
    t0 = time.perf_counter()
    build(db, SIZE_MB)
    built = time.perf_counter() - t0
    size = db.stat().st_size / 1024 / 1024
    print(f"\nstore: {size:.0f} MB built in {built:.0f} s")

    def open_close() -> None:
        Store(db).close()

    def open_unchecked() -> None:
        real = store_mod._check_intact
        store_mod._check_intact = lambda *_a, **_k: None  # type: ignore[assignment]
        try:
            Store(db).close()
        finally:
            store_mod._check_intact = real

    conn = sqlite3.connect(str(db))

    def check_only() -> None:
        assert conn.execute("PRAGMA quick_check(1)").fetchone()[0] == "ok"

    open_close()  # warm the cache
    out = {
        "open (with quick_check), warm": _median(open_close),
        "open without quick_check, warm": _median(open_unchecked),
        "quick_check alone, warm": _median(check_only),
    }
    if _drop_caches():
        t0 = time.perf_counter()
        check_only()
        out["quick_check alone, cold"] = time.perf_counter() - t0
    conn.close()
    for k, v in out.items():
        print(f"{k:34} {v * 1000:9.1f} ms")
    return out


@pytest.mark.bench
def test_bench_store_open(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if "bench" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("benchmark: select it with -m bench")
    res = run(tmp_path)
    assert res["quick_check alone, warm"] > 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    with tempfile.TemporaryDirectory(prefix="bench-store-") as d:
        run(Path(d))
    sys.exit(0)
