"""A harvest writes its files in batches (one transaction per batch, a savepoint per file): it
stores what reading the files one by one stores, and a harvest killed mid-way (kill -9) loses
nothing the next pass does not read again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from skillopt_sleep.config import Settings
from skillopt_sleep.sources import get_source
from skillopt_sleep.sources.ingest import _paths, harvest, harvest_file
from skillopt_sleep.store import Store
from skillopt_sleep.testing.corpus_gen import generate_corpus

SOURCES = ["claude_code", "codex"]


def _stored(db: Path) -> dict[str, list[tuple]]:
    """Everything a harvest stores, but the clock (``updated_at``) and row ids."""
    conn = sqlite3.connect(db)
    out = {
        "sessions": conn.execute(
            "select id, source, key, project, file_path, started_at, model, agent_version, "
            "headless, self_generated, title, n_messages from sessions order by id"
        ).fetchall(),
        "messages": conn.execute(
            "select session_id, source, uid, seq, role, kind, text, tool_names, timestamp, "
            "is_sidechain, is_error, context from messages order by session_id, seq"
        ).fetchall(),
        "files": conn.execute(
            "select path, source, inode, size, mtime, offset, state, head_hash, lines_ok, "
            "lines_skipped, status, last_error from source_files order by path"
        ).fetchall(),
        "fts": conn.execute(
            "select m.uid, f.text from messages_fts f join messages m on m.id = f.rowid "
            "order by m.uid"
        ).fetchall(),
        "fts_hits": conn.execute(
            "select count(*) from messages_fts where messages_fts match 'handler OR parser'"
        ).fetchall(),
    }
    conn.close()
    return out


def test_a_batched_harvest_stores_what_one_file_at_a_time_stores(
    isolated_home: Path, tmp_path: Path, monkeypatch
) -> None:
    from skillopt_sleep.sources import ingest

    generate_corpus(isolated_home, 30, seed=21, size_scale=0.1)
    monkeypatch.setattr(ingest, "BATCH_FILES", 7)  # several batches
    batched = Store(tmp_path / "batched.db")
    report = harvest(batched, Settings(), sources=SOURCES)
    batched.close()
    assert report.total("files_read") == report.total("files_seen") > 7

    single = Store(tmp_path / "single.db")
    for name in SOURCES:
        src = get_source(name)
        roots = src.default_roots(os.environ, isolated_home)
        for path in _paths(src, roots, ingest.SourceReport(source=name)):
            assert harvest_file(single, src, path).status == "read"
    single.close()
    a, b = _stored(tmp_path / "batched.db"), _stored(tmp_path / "single.db")
    assert a["messages"] and a["fts"] and a["fts_hits"][0][0] > 0
    assert a == b


def test_a_harvest_killed_mid_way_loses_nothing_the_next_pass_does_not_read(
    isolated_home: Path, tmp_path: Path
) -> None:
    made = generate_corpus(isolated_home, 120, seed=22, size_scale=0.15)
    db = tmp_path / "skillopt-home" / "state" / "skillopt.db"
    code = (
        "import sys; import skillopt_sleep.sources.ingest as i; i.BATCH_FILES = 4; "
        "sys.argv = ['skillopt-sleep', 'harvest', '--json']; "
        "from skillopt_sleep.cli import main; main()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    committed = 0
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                try:
                    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
                    committed = conn.execute("select count(*) from source_files").fetchone()[0]
                    conn.close()
                except sqlite3.OperationalError:  # not created yet, or locked a moment
                    committed = 0
            if committed >= 8:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the harvest ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL

    store = Store(db)  # opens (WAL recovered), intact
    assert store.integrity() == []
    kept = store.files.all()
    assert 8 <= len(kept) < made["files"]  # some batches committed, not all
    assert all(f.offset > 0 and f.status == "ok" for f in kept)
    report = harvest(store, Settings(), sources=SOURCES)
    assert report.total("files_unchanged") == len(kept)  # the committed files: not read again
    store.close()

    clean = Store(tmp_path / "clean.db")
    harvest(clean, Settings(), sources=SOURCES)
    clean.close()
    assert _stored(db) == _stored(tmp_path / "clean.db")
