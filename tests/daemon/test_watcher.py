"""Watcher and debouncer in-process (real watchdog observers on tmp folders)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from skillopt_sleep.daemon.watcher import Debouncer, Watcher
from tests.helpers.daemon import wait_for


def test_debouncer_turns_a_burst_into_one_batch() -> None:
    d = Debouncer(0.2)
    stop = threading.Event()
    for i in range(50):
        d.add_file("codex", Path(f"/x/{i % 3}.jsonl"))
    t0 = time.monotonic()
    batch = d.take(stop)
    assert batch is not None and len(batch.files) == 3 and not batch.full
    assert time.monotonic() - t0 >= 0.15
    assert d.pending() == 0
    d.request_full(token=7)
    batch = d.take(stop)
    assert batch.full and batch.token == 7
    stop.set()
    assert d.take(stop) is None


def test_missing_roots_sharing_a_parent_are_armed_when_created(tmp_path: Path) -> None:
    files: list[tuple[str, Path]] = []
    dirs: list[tuple[str, Path]] = []
    home = tmp_path / "h"
    home.mkdir()
    roots = [
        ("codex", home / ".codex" / "sessions"),
        ("codex", home / ".codex" / "archived"),
        ("claude_code", home / ".claude" / "projects"),
    ]
    w = Watcher(
        roots, on_file=lambda s, p: files.append((s, p)), on_dir=lambda s, p: dirs.append((s, p))
    ).start()
    try:
        assert {r["state"] for r in w.status()} == {"waiting"}
        day = roots[0][1] / "2026" / "11" / "30"
        day.mkdir(parents=True)
        (day / "rollout-a.jsonl").write_text("{}\n")
        (roots[2][1] / "p").mkdir(parents=True)
        wait_for(
            lambda: [r["state"] for r in w.status()] == ["watching", "waiting", "watching"],
            10,
            what="roots armed",
        )
        # the appearance of a root is reported as a folder to scan
        wait_for(lambda: ("codex", roots[0][1]) in dirs, 5, what="scan request")
        f = roots[2][1] / "p" / "s.jsonl"
        f.write_text("{}\n")
        wait_for(lambda: ("claude_code", f) in files, 5, what="file event")
        new_day = roots[0][1] / "2026" / "12" / "01"
        new_day.mkdir(parents=True)
        g = new_day / "rollout-b.jsonl"
        g.write_text("{}\n")
        wait_for(
            lambda: (
                ("codex", g) in files
                or any(d == new_day or new_day.is_relative_to(d) for _, d in dirs)
            ),
            5,
            what="new day folder covered",
        )
        roots[1][1].mkdir(parents=True)
        wait_for(
            lambda: [r["state"] for r in w.status()] == ["watching"] * 3, 10, what="all watching"
        )
    finally:
        w.stop()


def test_a_vanished_root_goes_back_to_waiting(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    w = Watcher([("codex", root)], on_file=lambda s, p: None, on_dir=lambda s, p: None).start()
    try:
        assert w.status()[0]["state"] == "watching"
        root.rmdir()
        w.check()
        assert w.status()[0]["state"] == "waiting" and w.status()[0]["watching"] == str(tmp_path)
        root.mkdir()
        wait_for(lambda: w.status()[0]["state"] == "watching", 10, what="re-armed")
    finally:
        w.stop()
