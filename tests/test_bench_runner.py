"""The benchmark runner's wiring (``python -m tests.bench.run_all``; the benchmarks themselves
are in ``tests/bench/`` and not in the default run): a quick run of two parts writes a page
whose numbers are the ones its parts measured, says what it did not run, and renders the same
page again from its saved results."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # runs every benchmark once
def test_a_quick_run_writes_the_page_from_what_it_measured(tmp_path: Path) -> None:
    out, raw = tmp_path / "bench.md", tmp_path / "raw.json"
    cmd = [sys.executable, "-m", "tests.bench.run_all", "--quick", "--no-reference"]
    cmd += ["--parts", "harvest,learning", "--sessions", "6", "--nights", "1"]
    cmd += ["--out", str(out), "--json-out", str(raw)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLOPT_SLEEP_")}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    page = out.read_text("utf-8")
    parts = json.loads(raw.read_text("utf-8"))["parts"]

    # what was not selected is said so, not left out
    assert "Mining: not run (not selected)." in page
    assert "Workers: not run (not selected)." in page
    assert "| 8 workers ≥ 5× faster than 1 at 1 s latency | — | not measured |" in page

    # learning: one night of the harmful-first persona, computed by the simulator's night
    night = parts["learning"]["result"]["harmful-first"]["nights"][0]
    assert night["status"] == "succeeded", night
    # learned from the one install request of day 1: scoped to that task family
    assert night["applied"] == [
        "When installing dependencies or adding packages: use `pnpm` instead of `npm`."
    ]
    assert night["harmful_rejected"] == 2 and night["harmful_applied"] == 0
    assert night["test_before"] < night["test_after"]
    assert (
        f"| 1 | use pnpm instead of npm | succeeded | {night['val_before']:.2f} → "
        f"{night['val_after']:.2f} | {night['test_before']:.2f} → {night['test_after']:.2f} |"
    ) in page

    if importlib.util.find_spec("skillopt_sleep.testing.corpus_gen") is None:
        # the generator is not in this checkout: the part fails, the page and exit say so
        assert done.returncode == 1, done.stderr
        assert "Harvest: **failed**: exit 1:" in page and "corpus_gen" in page
    else:
        assert done.returncode == 0, done.stderr
        ours = parts["harvest"]["result"]["initial"]["ours"]
        assert ours["sessions_seen"] == 6 and ours["failed_runs"] == 0
        assert f"| wall time (s) | {ours['wall_s']:.2f} | — | — |" in page
        stages = parts["harvest"]["result"]["initial"]["stages"]
        assert stages["decode"] > 0 and 0 < stages["parse_unredacted"] <= stages["parse"] * 1.5
        assert (
            f"reading every file and decoding each JSON line takes {stages['decode']:.2f} s" in page
        )
        inc = parts["harvest"]["result"]["incremental"]
        assert inc["ours_cli_one_new_sessions"] == 1
        assert "The reference was not run (`--no-reference`)." in page

    # the same page again from the saved results
    again = tmp_path / "again.md"
    rendered = subprocess.run(
        [sys.executable, "-m", "tests.bench.run_all", "--render", str(raw), "--out", str(again)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert again.read_text("utf-8") == page
