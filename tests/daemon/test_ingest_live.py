"""Live harvest: files written while the daemon runs reach the store without `harvest`."""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest

from skillopt_sleep import daemon_client
from skillopt_sleep.service import Service
from skillopt_sleep.testing.sessions import write_claude_session, write_codex_session
from tests.helpers.daemon import (
    DaemonHarness,
    append_claude_turn,
    append_codex_turn,
    db_rows,
    wait_for,
)


def _sessions(source: str) -> list[tuple]:
    return db_rows("select id, n_messages from sessions where source = ? order by id", (source,))


def test_new_and_appended_transcripts_are_indexed_live(harness: DaemonHarness) -> None:
    harness.write_config()  # neither root exists yet: the daemon watches their parents
    harness.start()
    t0 = time.monotonic()
    claude = write_claude_session(
        harness.home, harness.project, [("how do I run the tests?", "Run `npm test`.", None)]
    )
    codex = write_codex_session(
        harness.home,
        harness.project,
        [("run the linter", "Run `npm run lint`.", None)],
        when=dt.datetime.now(dt.UTC),
    )  # a new YYYY/MM/DD folder
    wait_for(
        lambda: _sessions("claude_code") and _sessions("codex"), 10, what="both sessions indexed"
    )
    assert time.monotonic() - t0 < 10
    ((c_id, c_n),) = _sessions("claude_code")
    ((x_id, x_n),) = _sessions("codex")

    append_claude_turn(claude, "and the linter?", "Run `npm run lint` too.")
    append_codex_turn(codex, "and the tests?", "Run `npm test` too.")
    wait_for(
        lambda: (
            _sessions("claude_code") == [(c_id, c_n + 2)]
            and _sessions("codex") == [(x_id, x_n + 2)]
        ),
        10,
        what="appended turns indexed",
    )
    texts = {r[0] for r in db_rows("select text from messages")}
    assert "and the linter?" in texts and "and the tests?" in texts

    # a later day folder and a second file in an existing project folder
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=3)
    write_codex_session(
        harness.home, harness.project, [("deploy", "Run `npm run deploy`.", None)], when=later
    )
    write_claude_session(
        harness.home, harness.project, [("build it", "Run `npm run build`.", None)]
    )
    wait_for(
        lambda: len(_sessions("codex")) == 2 and len(_sessions("claude_code")) == 2,
        10,
        what="second sessions indexed",
    )
    # offsets always at the end of what was read
    for path, offset, size in db_rows("select path, offset, size from source_files"):
        assert offset == os.path.getsize(path) == size
    st = daemon_client.daemon_status().model_dump()
    assert st["last_ingest"]["files"] >= 1
    assert {(w["source"], w["state"]) for w in st["watched"]} == {
        ("claude_code", "watching"),
        ("codex", "watching"),
    }
    assert sum(w["sessions"] for w in st["watched"]) == 4


def test_ingest_now_through_daemon_and_fallback(harness: DaemonHarness) -> None:
    harness.write_config()
    write_claude_session(harness.home, harness.project, [("q", "a", None)])
    with pytest.raises(daemon_client.NoDaemon):  # no daemon: the harvest runs here
        daemon_client.request("ingest-now", timeout=600)
    Service().harvest()
    assert len(_sessions("claude_code")) == 1
    harness.start()
    write_claude_session(harness.home, harness.project, [("q2", "a2", None)])
    reply = daemon_client.request("ingest-now", timeout=600)
    assert reply["ok"]
    assert len(_sessions("claude_code")) == 2


@pytest.mark.slow  # a daemon killed and restarted
def test_kill9_during_ingestion_then_restart_loses_and_duplicates_nothing(
    harness: DaemonHarness,
) -> None:
    harness.write_config(debounce_seconds=0.0)
    # a harvest commits every 200 files (BATCH_FILES): four batches, so the kill lands part-way
    # even when the poller below gets the CPU only a batch or two after the first commit
    n_files, turns = 800, 15
    expected = 0
    for i in range(n_files):
        t = [
            (f"task {i} step {j} " + "x" * 200, f"answer {i}.{j} " + "y" * 400, None)
            for j in range(turns)
        ]
        write_claude_session(harness.home, harness.project, t)
        expected += 2 * turns
    pid = harness.start()  # its first job: the full incremental pass over these files

    def count() -> int:
        rows = db_rows("select count(*) from sessions")
        return rows[0][0] if rows else 0

    wait_for(lambda: count() > 0, 20, interval=0.002, what="ingestion to begin")
    harness.kill9(pid)
    before = count()
    print(f"killed with {before}/{n_files} sessions in the store")
    assert 0 < before < n_files, "the kill should land part-way through"
    harness.start()
    wait_for(lambda: count() == n_files, 60, what="all sessions")
    wait_for(
        lambda: db_rows("select count(*) from messages")[0][0] == expected, 30, what="all messages"
    )
    assert db_rows(
        "select count(*) from (select 1 from messages group by source, uid having count(*) > 1)"
    ) == [(0,)]
    assert db_rows("select min(n_messages), max(n_messages) from sessions") == [
        (2 * turns, 2 * turns)
    ]
    assert db_rows(
        "select count(*) from (select seq from messages group by session_id, seq "
        "having count(*) > 1)"
    ) == [(0,)]
    assert db_rows("pragma integrity_check") == [("ok",)]
    for path, offset in db_rows("select path, offset from source_files"):
        assert offset == os.path.getsize(path)


def test_rotated_file_and_sidecar_events_are_picked_up(harness: DaemonHarness) -> None:
    harness.write_config()
    harness.start()
    path = write_claude_session(harness.home, harness.project, [("first", "one", None)])
    wait_for(lambda: len(_sessions("claude_code")) == 1, 10, what="first session")
    # rotation: the file is replaced (new inode) by a longer copy of itself
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(path.read_bytes())
    append_claude_turn(tmp, "after rotation", "still here")
    os.replace(tmp, path)
    wait_for(lambda: _sessions("claude_code")[0][1] == 4, 10, what="the rotated file re-read")
    assert db_rows("select count(*) from messages") == [(4,)]


def test_changed_files_rescan_reads_only_what_changed(harness: DaemonHarness) -> None:
    """The periodic rescan (backing up dropped watcher events), in-process."""
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.daemon.core import Daemon
    from skillopt_sleep.sources import get_source
    from skillopt_sleep.sources.ingest import harvest_file
    from skillopt_sleep.store import open_store

    harness.write_config()
    s = load_settings()
    d = Daemon()
    d.sources = {n: get_source(n) for n in ("claude_code", "codex")}
    d.roots = [(n, c.roots[0]) for n, c in s.sources.items() if n in d.sources]
    a = write_claude_session(harness.home, harness.project, [("q", "a", None)])
    b = write_codex_session(harness.home, harness.project, [("q", "a", None)])
    store = open_store()
    try:
        assert sorted(d._changed_files(store)) == sorted(
            [("claude_code", str(a)), ("codex", str(b))]
        )
        for source, p in d._changed_files(store):
            harvest_file(store, d.sources[source], p)
        assert d._changed_files(store) == []
        append_codex_turn(b, "more", "ok")
        assert d._changed_files(store) == [("codex", str(b))]
    finally:
        store.close()


@pytest.mark.cli
def test_sessions_written_by_the_real_clis_are_indexed_live(harness: DaemonHarness) -> None:
    """The real `claude -p` and `codex exec` (against the simulator) write into the watched
    HOME while the daemon runs; their sessions reach the store without `harvest`."""
    from skillopt_sleep.testing.transcripts import build_transcripts
    from tests.helpers.clis import NODE_BIN, agent_binary

    agent_binary("claude"), agent_binary("codex")  # fail under CI when missing
    harness.write_config()
    harness.start()
    built = build_transcripts(
        harness.home,
        harness.project,
        clis=("claude", "codex"),
        include_replay=False,
        search_path=f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    want = {"claude_code": len(built["claude"].sessions), "codex": len(built["codex"].sessions)}
    wait_for(
        lambda: all(len(_sessions(s)) >= n for s, n in want.items()),
        20,
        what="the real CLIs' sessions indexed",
    )
    prompts = {r[0] for r in db_rows("select text from messages where kind = 'prompt'")}
    assert any("install" in p.lower() for p in prompts), prompts


def test_rescan_reads_again_a_unit_left_pending(
    harness: DaemonHarness, tmp_path, monkeypatch
) -> None:
    """An OpenCode answer still streaming leaves its unit `pending`: the periodic rescan picks
    it up again though no file changed, until the answer is settled."""
    import time as _time

    import skillopt_sleep.sources.opencode as oc
    from skillopt_sleep.daemon.core import Daemon
    from skillopt_sleep.sources import get_source
    from skillopt_sleep.sources.ingest import harvest_file
    from skillopt_sleep.store import open_store
    from tests.helpers.sources import opencode_tree_session

    root = tmp_path / "opencode"
    now = int(_time.time() * 1000)
    unit = opencode_tree_session(
        root,
        "ses_live",
        [
            (
                {"id": "m_u", "role": "user", "time": {"created": now}},
                [{"type": "text", "text": "lint it"}],
            ),
            (
                {"id": "m_a", "role": "assistant", "time": {"created": now + 1}},
                [{"type": "text", "text": "Running ruff", "time": {"start": now + 2}}],
            ),
        ],
    )
    d = Daemon()
    d.sources = {"opencode": get_source("opencode")}
    d.roots = [("opencode", root)]
    store = open_store()
    try:
        assert d._changed_files(store) == [("opencode", str(unit))]
        assert harvest_file(store, d.sources["opencode"], unit).lines_skipped == {"unfinished": 1}
        assert d._changed_files(store) == [("opencode", str(unit))]  # pending: read again
        later = _time.time() + oc.SETTLE_SECONDS + 5
        monkeypatch.setattr(oc.time, "time", lambda: later)
        assert harvest_file(store, d.sources["opencode"], unit).status == "read"
        assert d._changed_files(store) == []
    finally:
        store.close()
