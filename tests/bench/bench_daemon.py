"""Benchmark of the idle daemon and of live ingestion. Not a timed test: it prints numbers.

Run with ``pytest tests/bench/bench_daemon.py -m bench -s`` (or ``python
tests/bench/bench_daemon.py``). It is skipped unless the ``bench`` marker is selected.

Measured, against baselines taken in the same run on the same machine:

* **idle CPU share and RSS** of a started daemon (watching the Claude Code and Codex roots of a
  sandbox HOME holding 200 transcripts) over a fixed window, against an idle Python process
  that has imported the same package (the cost of merely being a loaded Python program);
* **write-to-indexed latency** (median, p95): from writing a new transcript file to its
  session being in the store, with the default ``debounce_seconds``, against the time the
  ingester itself takes for the same file in-process (``harvest_file``), i.e. what the
  watcher, debounce and hand-off add.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

WINDOW = float(os.environ.get("BENCH_WINDOW", "10"))
WRITES = int(os.environ.get("BENCH_WRITES", "30"))


def _cpu_rss(pid: int, window: float) -> tuple[float, int]:
    import psutil

    proc = psutil.Process(pid)
    procs = [proc] + proc.children(recursive=True)
    t0 = time.monotonic()
    c0 = sum(sum(p.cpu_times()[:2]) for p in procs)
    time.sleep(window)
    c1 = sum(sum(p.cpu_times()[:2]) for p in procs)
    elapsed = time.monotonic() - t0
    rss = sum(p.memory_info().rss for p in procs)
    return (c1 - c0) / elapsed, rss


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def run_benchmark(root: Path) -> dict[str, float]:
    from skillopt_sleep.testing.sessions import write_claude_session, write_codex_session

    home, sk, project = root / "home", root / "sk", root / "proj"
    for p in (home, sk, project):
        p.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(home), SKILLOPT_SLEEP_HOME=str(sk), SKILLOPT_DAEMON_QUIET="1")
    for k in [k for k in env if k.startswith("SKILLOPT_SLEEP_") and k != "SKILLOPT_SLEEP_HOME"]:
        env.pop(k)
    (sk / "config").mkdir(parents=True, exist_ok=True)
    (sk / "config" / "config.toml").write_text(
        f'[sources.claude_code]\nroots = ["{home}/.claude/projects"]\n'
        f'[sources.codex]\nroots = ["{home}/.codex/sessions"]\n',
        encoding="utf-8",
    )
    for i in range(100):
        write_claude_session(home, project, [(f"task {i}", "done", None)] * 5)
        write_codex_session(home, project, [(f"task {i}", "done", None)] * 5)

    # baseline process: Python with the package imported, sleeping
    base = subprocess.Popen(
        [sys.executable, "-c", "import skillopt_sleep.cli, time; time.sleep(3600)"], env=env
    )
    cli = [sys.executable, "-m", "skillopt_sleep"]
    started = subprocess.run(cli + ["start"], env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split("pid ")[1].split(")")[0])
    db = sk / "state" / "skillopt.db"
    try:

        def count() -> int:
            try:
                conn = sqlite3.connect(str(db), timeout=30)
                try:
                    return conn.execute("select count(*) from sessions").fetchone()[0]
                finally:
                    conn.close()
            except sqlite3.Error:
                return 0

        deadline = time.monotonic() + 120
        while count() < 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2)  # let the start-up pass settle
        base_cpu, base_rss = _cpu_rss(base.pid, WINDOW)
        cpu, rss = _cpu_rss(pid, WINDOW)

        # latency: write a new transcript, poll the store until its session is there
        latencies = []
        conn = sqlite3.connect(str(db), timeout=30)
        for i in range(WRITES):
            n = count()
            t0 = time.perf_counter()
            write_claude_session(home, project, [(f"latency probe {i}", "ok", None)])
            while conn.execute("select count(*) from sessions").fetchone()[0] <= n:
                time.sleep(0.002)
                if time.perf_counter() - t0 > 30:
                    raise AssertionError("a write was not indexed within 30s")
            latencies.append(time.perf_counter() - t0)
        conn.close()
    finally:
        subprocess.run(cli + ["stop"], env=env, capture_output=True, timeout=120)
        base.kill()
        base.wait()

    # baseline latency: the ingester itself on the same kind of file, in-process
    from skillopt_sleep.sources import get_source
    from skillopt_sleep.sources.ingest import harvest_file
    from skillopt_sleep.store import Store

    store = Store(root / "direct.db")
    direct = []
    src = get_source("claude_code")
    for i in range(WRITES):
        f = write_claude_session(root / "home2", project, [(f"latency probe {i}", "ok", None)])
        t0 = time.perf_counter()
        harvest_file(store, src, f)
        direct.append(time.perf_counter() - t0)
    store.close()

    med, p95 = statistics.median(latencies), _pct(latencies, 0.95)
    dmed, dp95 = statistics.median(direct), _pct(direct, 0.95)
    res = {
        "window_s": WINDOW,
        "idle_cpu_share": cpu,
        "baseline_cpu_share": base_cpu,
        "idle_rss_mb": rss / 2**20,
        "baseline_rss_mb": base_rss / 2**20,
        "rss_ratio": rss / base_rss,
        "latency_median_s": med,
        "latency_p95_s": p95,
        "direct_median_s": dmed,
        "direct_p95_s": dp95,
        "latency_median_ratio": med / dmed,
        "latency_p95_ratio": p95 / dp95,
    }
    print()
    print(
        f"idle daemon over {WINDOW:.0f}s: CPU {cpu * 100:.3f}% (baseline idle python {base_cpu * 100:.3f}%, "
        f"+{(cpu - base_cpu) * 100:.3f} pts); RSS {rss / 2**20:.1f} MiB "
        f"(baseline {base_rss / 2**20:.1f} MiB, ratio {rss / base_rss:.2f}x)"
    )
    print(
        f"write-to-indexed over {WRITES} writes (debounce 0.5s): median {med * 1000:.0f} ms, "
        f"p95 {p95 * 1000:.0f} ms; direct harvest_file median {dmed * 1000:.1f} ms, "
        f"p95 {dp95 * 1000:.1f} ms (ratio {med / dmed:.0f}x / {p95 / dp95:.0f}x)"
    )
    return res


@pytest.mark.bench
def test_bench_daemon(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if "bench" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("benchmark: select it with -m bench")
    res = run_benchmark(tmp_path)
    assert res["latency_p95_s"] < 30


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="bench-daemon-") as d:
        run_benchmark(Path(d))
