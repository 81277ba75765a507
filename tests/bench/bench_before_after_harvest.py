"""Before/after benchmark of ``skillopt-sleep harvest`` as a process (start-up included): this
checkout against another one (``BENCH_BASELINE``), interleaved in the same run, on a generated corpus
(:func:`skillopt_sleep.testing.corpus_gen.generate_corpus`: Claude Code + Codex sessions in
their current formats, ~170 KB per session). Not a timed test: it prints numbers.

Run with ``pytest tests/bench/bench_before_after_harvest.py -m bench -s`` (or ``python
tests/bench/bench_before_after_harvest.py``). It is skipped unless the ``bench`` marker is selected.
``BENCH_SESSIONS`` (default 2000) sets the corpus size; ``BENCH_BASELINE`` names another
checkout's Python (e.g. ``/work/main/.venv/bin/python``) whose harvest is measured in the same
run, interleaved with ours, on the same corpus (each with its own store); ``BENCH_JSON`` a file
the numbers are written to.

Measured per implementation:

* **initial** harvest of the whole corpus into an empty store: wall and CPU seconds, MB/s and
  sessions/s (of wall), bytes the process wrote to disk (``ru_oublock`` × 512) and the size
  of the store it left, against the corpus size (write amplification);
* **no-change** harvest (the same files again): the median wall and CPU of 3 runs, against the
  start-up of the same interpreter doing nothing (``python -c pass``) and of
  ``skillopt-sleep --version``;
* **one new session**: one more Claude Code session file written, then a harvest.

Every run must store the same sessions and messages as the others (checked at the end).
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

SESSIONS = int(os.environ.get("BENCH_SESSIONS", "2000"))
SEED = 7
REPO = Path(__file__).resolve().parents[2]


def _run(python: str, args: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    """One process: wall and CPU seconds, bytes written to disk."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [python, *args], env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "written": (after.ru_oublock - before.ru_oublock) * 512.0,
    }


def _harvest(python: str, env: dict[str, str], cwd: Path) -> dict[str, float]:
    return _run(python, ["-m", "skillopt_sleep", "harvest", "--json"], env, cwd)


def _db(state: Path) -> Path:
    return state / "state" / "skillopt.db"


def _rows(state: Path) -> tuple[int, int, str]:
    """(sessions, messages, a digest of what was stored) of a store."""
    import hashlib

    db = sqlite3.connect(_db(state))
    digest = hashlib.sha256()
    for row in db.execute(
        "select s.id, s.project, s.n_messages, m.uid, m.seq, m.role, m.kind, m.text, "
        "m.tool_names, m.context from sessions s join messages m on m.session_id = s.id "
        "order by s.id, m.seq"
    ):
        digest.update(repr(row).encode())
    n_sessions = db.execute("select count(*) from sessions").fetchone()[0]
    n_messages = db.execute("select count(*) from messages").fetchone()[0]
    db.close()
    return n_sessions, n_messages, digest.hexdigest()[:16]


def _store_bytes(state: Path) -> int:
    return sum(p.stat().st_size for p in _db(state).parent.glob("skillopt.db*"))


def run_benchmark(tmp: Path, sessions: int = SESSIONS) -> dict[str, dict[str, Any]]:
    from skillopt_sleep.testing.corpus_gen import generate_corpus
    from skillopt_sleep.testing.sessions import write_claude_session

    home = tmp / "home"
    made = generate_corpus(home, sessions, SEED)
    corpus_mb = made["bytes"] / 1e6
    print(
        f"\ncorpus: {made['sessions']} sessions ({made['claude_sessions']} Claude Code, "
        f"{made['codex_sessions']} Codex), {made['files']} files, {corpus_mb:.1f} MB"
    )
    impls = {"ours": sys.executable}
    if os.environ.get("BENCH_BASELINE"):
        impls["baseline"] = os.environ["BENCH_BASELINE"]
    cwd = {name: tmp / f"cwd-{name}" for name in impls}  # imports the interpreter's own package
    env = {}
    for name in impls:
        cwd[name].mkdir()
        env[name] = {
            **os.environ,
            "HOME": str(home),
            "USERPROFILE": str(home),
            "SKILLOPT_SLEEP_HOME": str(tmp / f"state-{name}"),
            "PYTHONPATH": str(REPO) if name == "ours" else "",
        }
        for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
            env[name].pop(var, None)
    out: dict[str, dict[str, Any]] = {name: {} for name in impls}
    for name, python in impls.items():
        out[name]["python_startup"] = _run(python, ["-c", "pass"], env[name], cwd[name])["wall"]
        out[name]["cli_version"] = _run(
            python, ["-m", "skillopt_sleep", "--version"], env[name], cwd[name]
        )["wall"]
    for name, python in impls.items():  # initial
        r = _harvest(python, env[name], cwd[name])
        state = tmp / f"state-{name}"
        out[name]["initial"] = {
            **r,
            "mb_per_s": corpus_mb / r["wall"],
            "mb_per_cpu_s": corpus_mb / r["cpu"],
            "sessions_per_s": made["sessions"] / r["wall"],
            "store_bytes": _store_bytes(state),
            "write_amplification": r["written"] / max(1, _store_bytes(state)),
        }
    for name, python in impls.items():  # no change
        runs = [_harvest(python, env[name], cwd[name]) for _ in range(3)]
        out[name]["nochange"] = {
            "wall": statistics.median(r["wall"] for r in runs),
            "cpu": statistics.median(r["cpu"] for r in runs),
        }
    project = Path(json.loads(_first_line(home))["cwd"])
    write_claude_session(home, project, [("add a flag to the parser", "Done.", None)] * 20)
    for name, python in impls.items():  # one new session
        out[name]["one_new_session"] = _harvest(python, env[name], cwd[name])
    for name in impls:
        out[name]["rows"] = _rows(tmp / f"state-{name}")
    _print(out, corpus_mb)
    return out


def _first_line(home: Path) -> str:
    first = next((home / ".claude" / "projects").rglob("*.jsonl"))
    with open(first, encoding="utf-8") as fh:
        for line in fh:
            if '"cwd"' in line:
                return line
    raise AssertionError("no cwd in the corpus")


def _print(out: dict[str, dict[str, Any]], corpus_mb: float) -> None:
    names = list(out)
    rows = [
        ("initial wall s", lambda o: f"{o['initial']['wall']:.1f}"),
        ("initial CPU s", lambda o: f"{o['initial']['cpu']:.1f}"),
        ("initial MB/s (wall)", lambda o: f"{o['initial']['mb_per_s']:.2f}"),
        ("initial MB/s (CPU)", lambda o: f"{o['initial']['mb_per_cpu_s']:.2f}"),
        ("initial sessions/s", lambda o: f"{o['initial']['sessions_per_s']:.1f}"),
        ("initial MB written", lambda o: f"{o['initial']['written'] / 1e6:.0f}"),
        ("store MB", lambda o: f"{o['initial']['store_bytes'] / 1e6:.0f}"),
        ("written / store", lambda o: f"{o['initial']['write_amplification']:.2f}"),
        ("no-change wall s", lambda o: f"{o['nochange']['wall']:.3f}"),
        ("no-change CPU s", lambda o: f"{o['nochange']['cpu']:.3f}"),
        ("python start-up s", lambda o: f"{o['python_startup']:.3f}"),
        ("--version wall s", lambda o: f"{o['cli_version']:.3f}"),
        ("one new session wall s", lambda o: f"{o['one_new_session']['wall']:.3f}"),
        ("one new session CPU s", lambda o: f"{o['one_new_session']['cpu']:.3f}"),
        ("sessions, messages", lambda o: f"{o['rows'][0]}, {o['rows'][1]}"),
    ]
    print(f"harvest of {corpus_mb:.1f} MB")
    print(
        f"{'':26}"
        + "".join(f"{n:>14}" for n in names)
        + ("  ours/baseline" if len(names) > 1 else "")
    )
    for label, cell in rows:
        cells = [cell(out[n]) for n in names]
        ratio = ""
        if len(names) > 1:
            try:
                ratio = f"{float(cells[0]) / float(cells[1]):14.2f}"
            except (ValueError, ZeroDivisionError):
                ratio = ""
        print(f"{label:26}" + "".join(f"{c:>14}" for c in cells) + ratio)


@pytest.mark.bench
def test_bench_harvest(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if "bench" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("benchmark: select it with -m bench")
    res = run_benchmark(tmp_path)
    if os.environ.get("BENCH_JSON"):
        Path(os.environ["BENCH_JSON"]).write_text(json.dumps(res, indent=2), encoding="utf-8")
    # every implementation stored the same sessions and messages
    assert len({tuple(o["rows"]) for o in res.values()}) == 1, {
        k: o["rows"] for k, o in res.items()
    }


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory(prefix="bench-harvest-") as d:
        result = run_benchmark(Path(d))
        if os.environ.get("BENCH_JSON"):
            Path(os.environ["BENCH_JSON"]).write_text(json.dumps(result, indent=2), "utf-8")
