"""Benchmark of harvesting, side by side with the reference tool (``skillopt==0.2.0`` on PyPI,
installed by :func:`reference_exe` into its own virtualenv under a cache folder, never into
ours). Not a timed test: :func:`run_benchmark` returns numbers; ``tests/bench/run_all.py``
runs it and writes them into ``docs/benchmarks.md``.

The corpus comes from ``skillopt_sleep.testing.corpus_gen.generate_corpus`` (deterministic,
Claude Code and Codex in their current formats) written under a HOME-like folder. Our side
reads it as a user's HOME (``~/.claude/projects``, ``~/.codex/sessions``); the reference reads
Codex only from ``$CODEX_HOME/archived_sessions/`` (flat), so that folder holds a symlink to
each of the same rollouts, and the reference needs ``--scope all`` (else only the current
directory's project) and a raised ``--max-sessions`` (else it stops at 120 sessions). The
reference has no source that reads both agents in one run (``--source auto`` reads Codex and
falls back to Claude Code only when it found none), so one reference harvest is two processes,
``--source claude`` then ``--source codex``: their wall and CPU times add, peak RSS is the
larger. Its ``harvest`` command reads, digests and mines in memory and writes nothing; ours
persists every message (and the FTS index) in SQLite.

Each run is a whole process, measured from outside with ``os.wait4`` (wall, user + sys CPU,
peak RSS, ``ru_oublock`` × 512 = bytes the process caused to be written to storage); the
initial runs alternate reference, ours, reference, ours … (each of ours into a fresh store)
so a drift of the machine's speed touches both. Incremental: a new session file appears; ours
through the daemon's path (``harvest_file`` on that one file, timed in a process that has the
store open, as the daemon has) and through a whole ``skillopt-sleep harvest`` process; the
reference can only re-read everything.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

REFERENCE = "skillopt==0.2.0"
REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ processes
def measure(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 900) -> dict:
    """Run ``cmd`` as a whole process; return wall/user/sys seconds, peak RSS (MiB), bytes
    written to storage, exit code and what it printed on stdout (and stderr's tail)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=str(cwd), stdout=out, stderr=err)
        killer = threading.Timer(timeout, proc.kill)  # a blocking wait, bounded
        killer.start()
        try:
            _pid, status, ru = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    return {
        "wall": wall,
        "user": ru.ru_utime,
        "sys": ru.ru_stime,
        "cpu": ru.ru_utime + ru.ru_stime,
        "rss_mb": ru.ru_maxrss / 1024,
        "written": ru.ru_oublock * 512,
        "rc": proc.returncode,
        "stdout": stdout,
        "stderr_tail": stderr.strip().splitlines()[-3:],
    }


def _combine(runs: list[dict]) -> dict:
    """One measurement out of processes run one after the other."""
    return {
        "wall": sum(r["wall"] for r in runs),
        "user": sum(r["user"] for r in runs),
        "sys": sum(r["sys"] for r in runs),
        "cpu": sum(r["cpu"] for r in runs),
        "rss_mb": max(r["rss_mb"] for r in runs),
        "written": sum(r["written"] for r in runs),
        "rc": max(abs(r["rc"]) for r in runs),
        "stdout": "\n".join(r["stdout"] for r in runs),
        "stderr_tail": [line for r in runs for line in r["stderr_tail"]],
    }


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# ------------------------------------------------------------------------------ corpus
def corpus_generator(path: str | None = None) -> Callable[..., dict]:
    """``generate_corpus`` from the package, or from the file ``path`` (another checkout's
    ``corpus_gen.py``; for running the benchmarks before that module is merged)."""
    if path:
        spec = importlib.util.spec_from_file_location("bench_corpus_gen", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load a corpus generator from {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module("skillopt_sleep.testing.corpus_gen")
    return module.generate_corpus


def generate(
    gen: Callable[..., dict], home: Path, sessions: int, seed: int, size_scale: float, **kw: Any
) -> dict:
    params = inspect.signature(gen).parameters
    if "size_scale" in params:
        kw["size_scale"] = size_scale
    kw = {k: v for k, v in kw.items() if k in params}
    return gen(home, sessions, seed, **kw)


def _rollouts(home: Path) -> list[Path]:
    return sorted((home / ".codex" / "sessions").rglob("*.jsonl"))


def link_archived(home: Path, codex_home: Path) -> int:
    """Give the reference the corpus's Codex rollouts where it reads them:
    ``codex_home/archived_sessions/<file>`` (one flat folder of symlinks)."""
    archived = codex_home / "archived_sessions"
    archived.mkdir(parents=True, exist_ok=True)
    n = 0
    for f in _rollouts(home):
        link = archived / f.name
        if not link.exists():
            link.symlink_to(f)
            n += 1
    return n


def corpus_files(home: Path) -> tuple[int, int]:
    files = list((home / ".claude" / "projects").rglob("*.jsonl")) + _rollouts(home)
    return len(files), sum(f.stat().st_size for f in files)


# ------------------------------------------------------------------------------ reference
def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "skillopt-sleep-bench"


def reference_exe(cache: Path | None = None) -> Path:
    """The reference's ``skillopt-sleep`` script in its own virtualenv (created and installed
    with pip on first use; reused after)."""
    root = (cache or cache_dir()) / "reference-skillopt-0.2.0"
    exe = root / "bin" / "skillopt-sleep"
    if exe.exists() and (root / ".installed").exists():
        return exe
    shutil.rmtree(root, ignore_errors=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    pip = [
        str(root / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
    ]
    done = subprocess.run([*pip, REFERENCE], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"pip install {REFERENCE} failed: {done.stderr.strip()[-400:]}")
    (root / ".installed").write_text(REFERENCE + "\n", encoding="utf-8")
    return exe


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SKILLOPT_", "CODEX_", "CLAUDE_", "VIRTUAL_ENV", "PYTHONPATH"))
    }
    env.update(HOME=str(home), **extra)
    return env


def reference_harvest(exe: Path, home: Path, codex_home: Path, scratch: Path) -> dict:
    env = _clean_env(home)
    runs = []
    for source in ("claude", "codex"):
        cmd = [
            str(exe),
            "harvest",
            "--scope",
            "all",
            "--max-sessions",
            "1000000",
            "--claude-home",
            str(home / ".claude"),
            "--codex-home",
            str(codex_home),
            "--source",
            source,
            "--json",
        ]
        run = measure(cmd, env, scratch)
        try:
            run["sessions"] = int(json.loads(run["stdout"])["n_sessions"])
        except (ValueError, KeyError, TypeError):
            run["sessions"] = None
        runs.append(run)
    out = _combine(runs)
    counts = [r["sessions"] for r in runs]
    out["sessions"] = None if None in counts else sum(counts)
    return out


# ------------------------------------------------------------------------------ ours
def ours_harvest(home: Path, state: Path, scratch: Path) -> dict:
    env = _clean_env(home, SKILLOPT_SLEEP_HOME=str(state), PYTHONPATH=str(REPO))
    run = measure([sys.executable, "-m", "skillopt_sleep", "harvest", "--json"], env, scratch)
    try:
        data = json.loads(run["stdout"])
        run["sessions"] = sum(
            s["sessions_new"] + s["sessions_updated"] for s in data["sources"].values()
        )
        run["messages"] = sum(s.get("messages", 0) for s in data["sources"].values())
    except (ValueError, KeyError, TypeError):
        run["sessions"] = None
    return run


_DAEMON_PATH = """
import json, sys, time
from pathlib import Path
from skillopt_sleep.sources import get_source
from skillopt_sleep.sources.ingest import harvest_file
from skillopt_sleep.store import Store
store = Store(sys.argv[1])
src = get_source("claude_code")
# a running daemon has ingested sessions before this one: the redaction patterns they needed
# are compiled and its models built (both happen once, on first use). Parse (not store) some
# sessions it already has.
for warm in json.loads(sys.argv[3]):
    src.parse(Path(warm), Path(warm).read_bytes().splitlines(), {})
t0 = time.perf_counter()
res = harvest_file(store, src, sys.argv[2])
seconds = time.perf_counter() - t0
store.close()
print(json.dumps({"seconds": seconds, "status": res.status, "bytes": res.bytes_read}))
"""


def ours_daemon_path(home: Path, state: Path, path: Path, scratch: Path) -> dict:
    """What the daemon spends on one new file: ``harvest_file`` timed inside a process that
    has the store open and has parsed 20 sessions of the corpus before (start-up, imports
    and what is done once on first use excluded, as in a daemon that has run a while)."""
    env = _clean_env(home, SKILLOPT_SLEEP_HOME=str(state), PYTHONPATH=str(REPO))
    db = state / "state" / "skillopt.db"
    seen = [p for p in sorted((home / ".claude" / "projects").rglob("*.jsonl")) if p != path]
    warm = json.dumps([str(p) for p in seen[:: max(1, len(seen) // 20)][:20]])
    cmd = [sys.executable, "-c", _DAEMON_PATH, str(db), str(path), warm]
    run = measure(cmd, env, scratch)
    data = json.loads(run["stdout"].strip().splitlines()[-1])
    return {**data, "rc": run["rc"]}


_STAGES = """
import json, sys, time
from pathlib import Path
from skillopt_sleep.sources import get_source
import skillopt_sleep.redact as redact

home, stage = Path(sys.argv[1]), sys.argv[2]
files = [("claude_code", p) for p in sorted((home / ".claude" / "projects").rglob("*.jsonl"))]
files += [("codex", p) for p in sorted((home / ".codex" / "sessions").rglob("*.jsonl"))]
if stage == "parse_unredacted":
    redact._redact = lambda text: text
sources = {name: get_source(name) for name in ("claude_code", "codex")}
t0 = time.process_time()
for name, path in files:
    lines = path.read_bytes().splitlines(keepends=True)
    if stage == "decode":
        for line in lines:
            if line.strip():
                try:
                    json.loads(line)
                except ValueError:
                    pass
    else:
        sources[name].parse(path, lines, {})
print(json.dumps({"cpu_s": time.process_time() - t0, "files": len(files)}))
"""


def stage_costs(home: Path, scratch: Path) -> dict[str, float]:
    """CPU seconds (in-process, start-up excluded) of the stages of a harvest over the whole
    corpus, each in a process of its own: ``decode`` (read every file and ``json.loads``
    each line: the least any harvest of these logs does), ``parse`` (our parsers, with
    redaction: everything but the store) and ``parse_unredacted`` (the same with redaction
    switched off)."""
    env = _clean_env(home, PYTHONPATH=str(REPO))
    out = {}
    for stage in ("decode", "parse", "parse_unredacted"):
        run = measure([sys.executable, "-c", _STAGES, str(home), stage], env, scratch)
        if run["rc"] != 0:
            raise RuntimeError(f"stage {stage} failed: {run['stderr_tail']}")
        out[stage] = json.loads(run["stdout"].strip().splitlines()[-1])["cpu_s"]
    return out


def append_session(gen: Callable[..., dict], home: Path, side: Path, seed: int) -> Path:
    """Write one new Claude Code session (from the generator, seeded apart from the corpus)
    into the corpus; return its file."""
    shutil.rmtree(side, ignore_errors=True)
    generate(gen, side, 1, seed, 1.0, codex_share=0.0, projects=1)
    made = sorted((side / ".claude" / "projects").rglob("*.jsonl"))
    main = next(f for f in made if "subagents" not in f.parts)
    dest = home / main.relative_to(side)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(main, dest)
    return dest


# ------------------------------------------------------------------------------ the benchmark
def run_benchmark(
    root: Path,
    *,
    sessions: int = 2000,
    size_scale: float = 0.5,
    seed: int = 14,
    repeats: int = 2,
    incremental: int = 3,
    reference: bool = True,
    generator: str | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    gen = corpus_generator(generator)
    home, scratch = root / "home", root / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    counts = generate(gen, home, sessions, seed, size_scale)
    gen_s = time.perf_counter() - t0
    files, nbytes = corpus_files(home)
    say(f"corpus: {sessions} sessions, {files} files, {nbytes / 1e6:.1f} MB in {gen_s:.1f} s")
    out: dict[str, Any] = {
        "corpus": {
            "sessions": sessions,
            "claude_sessions": counts.get("claude_sessions"),
            "codex_sessions": counts.get("codex_sessions"),
            "projects": counts.get("projects"),
            "files": files,
            "bytes": nbytes,
            "seed": seed,
            "size_scale": size_scale,
            "generate_seconds": gen_s,
            "generator": generator or "skillopt_sleep.testing.corpus_gen",
        },
        "reference": None,
    }
    exe = None
    codex_home = root / "ref-codex-home"
    if reference:
        exe = reference_exe()
        link_archived(home, codex_home)
        version = subprocess.run(
            [str(exe.parent / "python"), "-m", "pip", "show", "skillopt"],
            capture_output=True,
            text=True,
        ).stdout
        out["reference"] = {
            "package": REFERENCE,
            "installed": next(
                (
                    ln.split(":", 1)[1].strip()
                    for ln in version.splitlines()
                    if ln.startswith("Version")
                ),
                "?",
            ),
        }

    # initial harvest, interleaved: reference, ours, reference, ours …
    ours_runs: list[dict] = []
    ref_runs: list[dict] = []
    last_state = None
    for i in range(repeats):
        if exe is not None:
            ref = reference_harvest(exe, home, codex_home, scratch)
            ref_runs.append(ref)
            say(f"  reference initial #{i + 1}: {ref['wall']:.2f} s, {ref['sessions']} sessions")
        state = root / f"state-{i}"
        ours = ours_harvest(home, state, scratch)
        ours["db_bytes"] = sum(f.stat().st_size for f in (state / "state").glob("skillopt.db*"))
        ours_runs.append(ours)
        say(f"  ours initial #{i + 1}: {ours['wall']:.2f} s, {ours['sessions']} sessions")
        if last_state is not None:
            shutil.rmtree(last_state, ignore_errors=True)
        last_state = state
    assert last_state is not None

    def summary(runs: list[dict]) -> dict:
        wall = _median([r["wall"] for r in runs])
        return {
            "runs": len(runs),
            "wall_s": wall,
            "wall_min_s": min(r["wall"] for r in runs),
            "wall_max_s": max(r["wall"] for r in runs),
            "cpu_s": _median([r["cpu"] for r in runs]),
            "rss_mb": _median([r["rss_mb"] for r in runs]),
            "written_mb": _median([r["written"] / 1e6 for r in runs]),
            "mb_per_s": nbytes / 1e6 / wall,
            "sessions_per_s": sessions / wall,
            "sessions_seen": runs[-1].get("sessions"),
            "failed_runs": sum(1 for r in runs if r["rc"]),
            "stderr_tail": next((r["stderr_tail"] for r in runs if r["rc"]), []),
        }

    out["initial"] = {"ours": summary(ours_runs)}
    out["initial"]["ours"]["db_mb"] = ours_runs[-1]["db_bytes"] / 1e6
    out["initial"]["ours"]["messages"] = ours_runs[-1].get("messages")
    if ref_runs:
        out["initial"]["reference"] = summary(ref_runs)
        # ratios pair by pair (reference wall / ours wall: > 1 means ours is faster)
        pairs = [r["wall"] / o["wall"] for r, o in zip(ref_runs, ours_runs, strict=True)]
        out["initial"]["speed_ratio"] = _median(pairs)
        out["initial"]["speed_ratios"] = pairs
        out["initial"]["cpu_ratio"] = _median(
            [r["cpu"] / o["cpu"] for r, o in zip(ref_runs, ours_runs, strict=True)]
        )

    out["initial"]["stages"] = stage_costs(home, scratch)
    say(f"  stages: {out['initial']['stages']}")

    # incremental: one new session at a time
    daemon_s: list[float] = []
    ref_reread: list[dict] = []
    for i in range(incremental):
        new = append_session(gen, home, root / "side", seed + 1000 + i)
        if exe is not None:
            link_archived(home, codex_home)
            ref_reread.append(reference_harvest(exe, home, codex_home, scratch))
        got = ours_daemon_path(home, last_state, new, scratch)
        daemon_s.append(got["seconds"])
        say(
            f"  ours daemon path, one new session: {got['seconds'] * 1000:.1f} ms ({got['status']})"
        )
    new = append_session(gen, home, root / "side", seed + 2000)
    one_new = ours_harvest(home, last_state, scratch)
    nochange = [ours_harvest(home, last_state, scratch) for _ in range(max(1, incremental))]
    # what a user types (the table, not --json), and the CLI's start-up alone (--version)
    env = _clean_env(home, SKILLOPT_SLEEP_HOME=str(last_state), PYTHONPATH=str(REPO))
    cli = [sys.executable, "-m", "skillopt_sleep"]
    table_runs = [measure([*cli, "harvest"], env, scratch) for _ in range(max(1, incremental))]
    version = [measure([*cli, "--version"], env, scratch) for _ in range(max(1, incremental))]
    files_now, _ = corpus_files(home)
    inc: dict[str, Any] = {
        "files": files_now,
        "ours_daemon_path_s": _median(daemon_s),
        "ours_daemon_path_runs_s": daemon_s,
        "ours_cli_one_new_s": one_new["wall"],
        "ours_cli_one_new_cpu_s": one_new["cpu"],
        "ours_cli_one_new_sessions": one_new.get("sessions"),
        "ours_cli_nochange_s": _median([r["wall"] for r in nochange]),
        "ours_cli_nochange_runs_s": [r["wall"] for r in nochange],
        "ours_cli_nochange_cpu_s": _median([r["cpu"] for r in nochange]),
        "ours_cli_nochange_written_mb": _median([r["written"] / 1e6 for r in nochange]),
        "ours_cli_nochange_rss_mb": _median([r["rss_mb"] for r in nochange]),
        "ours_cli_nochange_table_s": _median([r["wall"] for r in table_runs]),
        "ours_cli_nochange_table_runs_s": [r["wall"] for r in table_runs],
        "ours_cli_nochange_table_cpu_s": _median([r["cpu"] for r in table_runs]),
        "ours_cli_version_s": _median([r["wall"] for r in version]),
        "ours_cli_version_cpu_s": _median([r["cpu"] for r in version]),
    }
    if ref_reread:
        rw = _median([r["wall"] for r in ref_reread])
        inc["reference_reread_s"] = rw
        inc["reference_reread_cpu_s"] = _median([r["cpu"] for r in ref_reread])
        inc["daemon_path_ratio"] = rw / inc["ours_daemon_path_s"]
        inc["cli_one_new_ratio"] = rw / inc["ours_cli_one_new_s"]
        inc["cli_nochange_ratio"] = rw / inc["ours_cli_nochange_s"]
    out["incremental"] = inc
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--size-scale", type=float, default=0.5)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--corpus-gen", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-harvest-") as d:
        res = run_benchmark(
            Path(d),
            sessions=a.sessions,
            size_scale=a.size_scale,
            reference=not a.no_reference,
            generator=a.corpus_gen,
        )
        print(json.dumps(res, indent=2, default=str))
