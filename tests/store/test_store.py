import json
from dataclasses import asdict

from sqlite_utils import Database

from skillopt_sleep.models import HarvestedMessage, HarvestedSession
from skillopt_sleep.store import Store
from skillopt_sleep.store.migrations import migrations
from tests.helpers.cli_run import skillopt_in_process


def session(*msgs):
    return HarvestedSession(source="x", key="s1", project="/p", messages=list(msgs))


def test_migrations_apply_once_and_wal(tmp_path):
    db = tmp_path / "s.db"
    Store(db).close()
    store = Store(db)
    names = [r["name"] for r in store.db["_sqlite_migrations"].rows]
    assert names == [
        "m001_initial",
        "m002_messages_fts",
        "m003_wild_sessions",
        "m004_reredact",
        "m005_task_occurrences",
        "m006_judges_context",
        "m007_outbox",
        "m008_foreign_keys_views",
        "m009_mining_state",
        "m010_proposal_agent_kind",
        "m011_proposal_report_hash",
        "m012_edit_section",
        "m013_night_seq",
        "m014_readings",
        "m015_wild_judged",
        "m016_task_links",
        "m017_rule_scope_refusals",
        "m018_rollout_acts",
    ]
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_split_parts_merge_and_grown_text_replaces(tmp_path):
    store = Store(tmp_path / "s.db")
    store.sessions.save(
        session(
            HarvestedMessage(
                uid="m", role="assistant", kind="answer", text="part one", tool_names=["Bash"]
            )
        ),
        "/f",
    )
    store.sessions.save(
        session(
            HarvestedMessage(
                uid="m",
                role="assistant",
                kind="answer",
                text="part two",
                tool_names=["Read", "Bash"],
            )
        ),
        "/f",
    )
    store.sessions.save(
        session(HarvestedMessage(uid="g", role="assistant", kind="answer", text="Run `npm")), "/f"
    )
    store.sessions.save(
        session(HarvestedMessage(uid="g", role="assistant", kind="answer", text="Run `npm test`.")),
        "/f",
    )
    msgs = store.sessions.messages("x:s1")
    assert [(m.uid, m.text, m.tool_names) for m in msgs] == [
        ("m", "part one\npart two", ["Bash", "Read"]),
        ("g", "Run `npm test`.", []),
    ]
    # the same parts again change nothing
    assert store.sessions.save(
        session(HarvestedMessage(uid="m", role="assistant", text="part two")), "/f"
    ) == (False, 0)


def test_full_text_search(tmp_path):
    store = Store(tmp_path / "s.db")
    store.sessions.save(
        session(HarvestedMessage(uid="u", role="user", text="how do I install the dependencies")),
        "/f",
    )
    assert [r["uid"] for r in store.sessions.search_messages("dependencies")] == ["u"]
    assert store.sessions.search_messages("nonexistentword") == []


def test_a_new_store_is_private_to_the_user(tmp_path):
    """It holds message text from the user's sessions."""
    import stat

    from skillopt_sleep.store import Store

    s = Store(tmp_path / "state" / "skillopt.db")
    s.close()
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "state" / "skillopt.db").stat().st_mode) == 0o600


def test_the_store_redacts_every_text_it_writes(tmp_path):
    """Whatever a harvester hands over: title, project, model, tool names, message text, the
    text of a message merged from parts (a secret cut between them) and the parse state."""
    key = "ghp_Xq7vR2mN9pL4kJ8hG6fD3sA1bC5eD7fG9hJ"
    store = Store(tmp_path / "s.db")
    sess = HarvestedSession(
        source="x",
        key="s1",
        project=f"/home/dev/p?token={key}",
        title=f"fix {key}",
        model=f"m-{key}",
        messages=[
            HarvestedMessage(uid="a", role="assistant", kind="answer", text=f"use {key[:20]}"),
            HarvestedMessage(uid="b", role="user", text=f"x{key}", tool_names=[f"t {key}"]),
        ],
    )
    store.sessions.save(sess, "/f.jsonl")
    store.sessions.save(
        HarvestedSession(
            source="x",
            key="s1",
            messages=[HarvestedMessage(uid="a", role="assistant", kind="answer", text=key[20:])],
        ),
        "/f.jsonl",
    )
    store.files.put({"path": "/f.jsonl", "source": "x", "state": json.dumps({"title": key})})
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*")).lower()
    assert key[4:16].lower().encode() not in raw  # the first part left the FTS index too
    store = Store(tmp_path / "s.db")
    row = store.sessions.get("x:s1")
    msgs = store.sessions.messages("x:s1")
    stored = json.dumps(
        [asdict(row), [asdict(m) for m in msgs], asdict(store.files.get("/f.jsonl"))]
    )  # type: ignore[arg-type]
    assert key[4:16] not in stored and key[20:32] not in stored
    assert stored.count("[REDACTED:") >= 6


def test_the_full_disk_advice_keeps_the_database():
    import sqlite3

    from skillopt_sleep.store import machine_failure

    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL
    hint = machine_failure(full)
    assert hint is not None and "disk is full" in hint
    assert "aside" not in hint and "do not delete skillopt.db" in hint
    damaged = sqlite3.DatabaseError("database disk image is malformed")
    damaged.sqlite_errorcode = sqlite3.SQLITE_CORRUPT
    assert "keep it" in (machine_failure(damaged) or "")


def _damaged(db, table: str) -> bytes:
    """A store at ``db`` whose table ``table`` (made if missing: a table no harvest touches)
    holds ~1 MB of rows, its middle third then overwritten in 20 KB of the file; returns the
    damaged bytes."""
    store = Store(db)
    with store.write():
        store.db.execute(f"create table if not exists {table} (source, files_skipped)")
        store.db.table(table).insert_all(
            {"source": "x", "files_skipped": "{}" + " " * 3000} for _ in range(300)
        )
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    data = bytearray(db.read_bytes())
    for off in range(len(data) // 3, len(data) // 3 + 20000, 7):
        data[off] = 0xAA
    db.write_bytes(bytes(data))
    return db.read_bytes()


def test_a_damaged_database_is_refused_before_any_write(tmp_path):
    import os

    import pytest

    from skillopt_sleep.errors import StoreError

    db = tmp_path / "skillopt-home" / "state" / "skillopt.db"
    before = _damaged(db, "harvest_runs")
    with pytest.raises(StoreError, match="damaged"):
        Store(db)
    env = dict(os.environ, SKILLOPT_SLEEP_HOME=str(tmp_path / "skillopt-home"))
    for cmd in ("status", "harvest"):
        res = skillopt_in_process(cmd, env=env, timeout=60)
        assert res.returncode == 1 and "database file is damaged" in res.stderr, res.stderr
    assert db.read_bytes() == before  # nothing was written on it


def test_a_large_store_is_checked_before_the_first_write_not_for_reads(
    tmp_path, isolated_home, monkeypatch
):
    """Above ``CHECK_ON_OPEN_BYTES`` (here: 0) the service's reads skip the page-by-page
    check (seconds on a store of a GB); its first write runs it and refuses a damaged file
    before writing anything."""
    import pytest

    from skillopt_sleep import store as store_mod
    from skillopt_sleep.errors import StoreError
    from skillopt_sleep.service import Service

    db = tmp_path / "skillopt-home" / "state" / "skillopt.db"
    before = _damaged(db, "harvest_runs")

    monkeypatch.setattr(store_mod, "CHECK_ON_OPEN_BYTES", 0)
    svc = Service(store_path=db)
    assert svc.proposals() == []  # a read: no check, the pages it reads are sound
    assert not svc.open().checked
    with pytest.raises(StoreError, match="database file is damaged"):
        svc.harvest()
    svc.close()
    assert db.read_bytes() == before

    monkeypatch.setattr(store_mod, "CHECK_ON_OPEN_BYTES", 10**12)
    with pytest.raises(StoreError, match="damaged"):
        Service(store_path=db).proposals()  # a small store is checked on open


def test_a_harvest_checks_the_whole_file_before_it_writes_what_it_read(
    tmp_path, isolated_home, monkeypatch
):
    """``harvest`` opens the store unchecked (issue 14: a no-change pass reads no page it
    does not need); it runs the page-by-page check before its first write of what it read,
    so damage anywhere in the file (here: in a table no harvest reads or writes) is refused
    before a byte is written, small store or large."""
    import pytest

    from skillopt_sleep import store as store_mod
    from skillopt_sleep.errors import StoreError
    from skillopt_sleep.service import Service
    from skillopt_sleep.testing.corpus_gen import generate_corpus

    db = tmp_path / "skillopt-home" / "state" / "skillopt.db"
    before = _damaged(db, "filler")
    generate_corpus(isolated_home, 3, seed=14, size_scale=0.05)
    wal = db.with_name(db.name + "-wal")
    for limit in (0, 10**12):  # a large store (checked before a write), a small one (on open)
        monkeypatch.setattr(store_mod, "CHECK_ON_OPEN_BYTES", limit)
        svc = Service(store_path=db)
        with pytest.raises(StoreError, match="database file is damaged"):
            svc.harvest()
        svc.close()
        assert db.read_bytes() == before
        assert not wal.exists() or wal.stat().st_size == 0  # nothing committed either


def test_proposals_staged_before_m010_have_no_agent_or_kind(tmp_path):
    """m010 adds ``agent`` and ``kind`` to proposals; an older row keeps "" in both (adopt
    and rollback derive them from its target)."""
    path = tmp_path / "old.db"
    old = Database(path)
    migrations.apply(old, stop_before="m010_proposal_agent_kind")
    old["nights"].insert({"id": 1, "status": "succeeded"})
    old["proposals"].insert({"id": "p1", "night_id": 1, "status": "staged", "target_path": "/x"})
    old.conn.close()
    store = Store(path)
    row = store.proposals.get("p1")
    assert row is not None and (row.agent, row.kind) == ("", "")
    store.proposals.stage(
        {"id": "p2", "night_id": 1, "target_path": "/y", "agent": "codex", "kind": "memory"}
    )
    assert {k: getattr(store.proposals.get("p2"), k) for k in ("agent", "kind")} == {
        "agent": "codex",
        "kind": "memory",
    }


def test_recent_nights_started_in_the_same_second_are_newest_first(tmp_path):
    # nights are numbered by kind (real 1, 2…; dry runs d1 = -1, d2 = -2…) and started_at is to
    # the second: two nights begun in one second are ordered by their end, then by number
    store = Store(tmp_path / "s.db")
    before, second = "2026-12-07T02:59:59+00:00", "2026-12-07T03:00:00+00:00"
    real = store.nights.add(started_at=before, status="failed", dry_run=0)
    store.nights.set(real, finished_at=second)
    d1 = store.nights.add(started_at=second, status="planned", dry_run=1)
    store.nights.set(d1, finished_at=second)
    d2 = store.nights.add(started_at=second, status="no_tasks", dry_run=1)
    store.nights.set(d2, finished_at=second)
    running = store.nights.add(started_at=second, status="running", dry_run=0)
    assert (real, d1, d2, running) == (1, -1, -2, 2)
    assert [n.id for n in store.nights.recent()] == [running, d2, d1, real]
    store.nights.set(running, finished_at=second)
    # a real night after a dry run, both begun and ended in one second: the order they began
    later = store.nights.add(started_at=second, status="succeeded", dry_run=0)
    store.nights.set(later, finished_at=second)
    assert [n.id for n in store.nights.recent(3)] == [later, running, d2]
    store.close()


def test_the_night_seq_migration_numbers_older_nights_in_their_old_order(tmp_path):
    store = Store(tmp_path / "s.db")
    t1, t2 = "2026-12-07T02:59:59+00:00", "2026-12-07T03:00:00+00:00"
    ids = [
        store.nights.add(started_at=t2, finished_at=t2, status="planned", dry_run=1),  # d1
        store.nights.add(started_at=t1, finished_at=t2, status="failed", dry_run=0),  # 1
        store.nights.add(started_at=t2, status="running", dry_run=0),  # 2
    ]
    with store.db.conn:  # the store as it was before m013
        store.db.execute("alter table nights drop column seq")
        store.db.execute("delete from _sqlite_migrations where name = 'm013_night_seq'")
    store.close()
    store = Store(tmp_path / "s.db")  # migrates
    # before m013: by start, then by end (a running night last-ended), then by number
    assert [n.id for n in store.nights.recent()] == [ids[2], ids[0], ids[1]]
    store.close()
