"""OpenCode harvester: the JSON storage tree (corpus) and the SQLite database (read-only, high-water)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
import time
from pathlib import Path

from skillopt_sleep.config import Settings, SourceConfig
from skillopt_sleep.mining.mine import mine
from skillopt_sleep.sources.ingest import harvest, harvest_file
from skillopt_sleep.sources.opencode import OpenCodeSource, headless_permission
from skillopt_sleep.store import Store
from tests.helpers.sources import opencode_tree_session
from tests.helpers.store import db_get


def test_corpus_storage_tree(corpus: Path, store: Store) -> None:
    root = corpus / "opencode" / "synthetic" / "storage_v2"
    report = harvest(store, Settings(sources={"opencode": SourceConfig(roots=[root])}))
    acc = report.sources["opencode"]
    assert (acc.files_seen, acc.sessions_new) == (2, 2)
    small = db_get(store, "sessions", "opencode:s_stage0_small")
    assert (small["project"], small["title"], small["model"]) == (
        "/tmp/repo",
        "OpenCode Small",
        "gpt-4o-mini",
    )
    assert [
        (m.kind, m.text, m.tool_names, m.is_error) for m in store.sessions.messages(small["id"])
    ] == [
        ("prompt", "Hello", [], 0),
        ("answer", "Found 2 files.", ["bash"], 0),
        ("tool", "a.txt\nb.txt\n", [], 0),
    ]
    large = store.sessions.messages("opencode:s_stage0_large")
    assert [m.text for m in large if m.kind == "prompt"] == ["Step 1", "Step 2"]
    assert [m.is_error for m in large if m.kind == "tool"] == [1]  # exit 1
    assert db_get(store, "sessions", "opencode:s_stage0_large")["project"] == "/tmp/large"
    assert acc.lines_skipped["injected"] == 1  # the synthetic text part
    assert acc.lines_skipped["ignored_part:reasoning"] == 1
    again = harvest(store, Settings(sources={"opencode": SourceConfig(roots=[root])}))
    assert again.sources["opencode"].files_unchanged == 2


def make_db(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    con.executescript("""
        create table session (id text primary key, project_id text, parent_id text, slug text,
            directory text, title text, version text, time_created integer, time_updated integer);
        create table message (id text primary key, session_id text, time_created integer,
            time_updated integer, data text);
        create table part (id text primary key, message_id text, session_id text,
            time_created integer, time_updated integer, data text);
    """)
    return con


def add_message(con, sid: str, mid: str, t: int, info: dict, parts: list[dict]) -> None:
    con.execute("insert into message values (?,?,?,?,?)", (mid, sid, t, t, json.dumps(info)))
    for i, p in enumerate(parts):
        con.execute(
            "insert into part values (?,?,?,?,?,?)", (f"{mid}_p{i}", mid, sid, t, t, json.dumps(p))
        )
    con.commit()


def test_sqlite_read_only_and_incremental(tmp_path: Path, store: Store) -> None:
    root = tmp_path / "opencode"
    root.mkdir()
    db = root / "opencode.db"
    con = make_db(db)
    now = int(time.time() * 1000) - 3_600_000
    con.execute(
        "insert into session values ('ses_1','p','', 'x','/home/dev/site','Site', '1.2.3', ?, ?)",
        (now, now),
    )
    con.execute(
        "insert into session values ('ses_sub','p','ses_1','y','/home/dev/site','Sub', '1.2.3', ?, ?)",
        (now, now),
    )
    add_message(
        con,
        "ses_1",
        "msg_1",
        now,
        {"role": "user", "time": {"created": now}},
        [{"type": "text", "text": "build the site"}],
    )
    add_message(
        con,
        "ses_1",
        "msg_2",
        now + 1,
        {
            "role": "assistant",
            "modelID": "gpt-5",
            "time": {"created": now + 1, "completed": now + 2},
        },
        [
            {"type": "step-start"},
            {"type": "text", "text": "Built."},
            {"type": "tool", "tool": "bash", "state": {"status": "error", "output": "boom"}},
        ],
    )
    add_message(
        con,
        "ses_sub",
        "msg_s",
        now + 2,
        {"role": "user", "time": {"created": now + 2}},
        [{"type": "text", "text": "sub task"}],
    )
    con.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns
    r = harvest_file(store, OpenCodeSource(), db)
    assert r.status == "read" and r.sessions_new == {"opencode:ses_1", "opencode:ses_sub"}
    assert (
        hashlib.sha256(db.read_bytes()).hexdigest(),
        db.stat().st_mtime_ns,
    ) == before  # never written
    assert [
        (m.kind, m.text, m.tool_names, m.is_error)
        for m in store.sessions.messages("opencode:ses_1")
    ] == [
        ("prompt", "build the site", [], 0),
        ("answer", "Built.", ["bash"], 0),
        ("tool", "boom", [], 1),
    ]
    assert db_get(store, "sessions", "opencode:ses_1")["project"] == "/home/dev/site"
    assert all(m.is_sidechain for m in store.sessions.messages("opencode:ses_sub"))
    assert r.lines_skipped == {"ignored_part:step-start": 1}
    assert harvest_file(store, OpenCodeSource(), db).status == "unchanged"

    # an assistant message still streaming is left for later; the high-water mark waits for it
    con = sqlite3.connect(db)
    fresh = int(time.time() * 1000)
    add_message(
        con,
        "ses_1",
        "msg_3",
        fresh,
        {"role": "user", "time": {"created": fresh}},
        [{"type": "text", "text": "deploy it"}],
    )
    add_message(
        con,
        "ses_1",
        "msg_4",
        fresh + 1,
        {"role": "assistant", "time": {"created": fresh + 1}},
        [{"type": "text", "text": "Deplo"}],
    )
    con.close()
    r2 = harvest_file(store, OpenCodeSource(), db)
    assert (r2.messages, r2.lines_skipped) == (1, {"unfinished": 1})
    con = sqlite3.connect(db)
    con.execute(
        "update message set time_updated = ?, data = ? where id = 'msg_4'",
        (
            fresh + 5,
            json.dumps(
                {"role": "assistant", "time": {"created": fresh + 1, "completed": fresh + 5}}
            ),
        ),
    )
    con.execute(
        "update part set data = ? where message_id = 'msg_4'",
        (json.dumps({"type": "text", "text": "Deployed."}),),
    )
    con.commit()
    con.close()
    r3 = harvest_file(store, OpenCodeSource(), db)
    assert r3.messages == 1
    assert [m.text for m in store.sessions.messages("opencode:ses_1")][-2:] == [
        "deploy it",
        "Deployed.",
    ]


def test_unreadable_database_is_counted(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    db.write_bytes(b"SQLite format 3\x00" + b"garbage" * 100)
    res = OpenCodeSource().read_snapshot(db, {})
    assert res.sessions == [] and sum(res.skipped.values()) == 1
    assert next(iter(res.skipped)).startswith("db_error:")


def test_tree_answer_left_unfinished_is_read_on_a_later_pass_without_any_change(
    tmp_path: Path, store: Store, monkeypatch
) -> None:
    """An answer that never gets ``time.completed`` (OpenCode killed mid-stream) is taken as
    final once its content shows no activity for SETTLE_SECONDS, even though no file changed."""
    import skillopt_sleep.sources.opencode as oc

    now = int(time.time() * 1000)
    ses = opencode_tree_session(
        tmp_path,
        "ses_live",
        [
            (
                {"id": "m_u", "role": "user", "time": {"created": now}},
                [{"type": "text", "text": "lint the app"}],
            ),
            (
                {"id": "m_a", "role": "assistant", "time": {"created": now + 1}},
                [{"type": "text", "text": "Running ruff", "time": {"start": now + 2}}],
            ),
        ],
    )
    first = harvest_file(store, OpenCodeSource(), ses)
    assert (first.status, first.lines_skipped) == ("read", {"unfinished": 1})
    assert [m.text for m in store.sessions.messages("opencode:ses_live")] == ["lint the app"]
    later = time.time() + oc.SETTLE_SECONDS + 5
    monkeypatch.setattr(oc.time, "time", lambda: later)
    second = harvest_file(store, OpenCodeSource(), ses)
    assert second.status == "read" and second.lines_skipped == {}
    assert [m.text for m in store.sessions.messages("opencode:ses_live")] == [
        "lint the app",
        "Running ruff",
    ]
    assert harvest_file(store, OpenCodeSource(), ses).status == "unchanged"  # nothing pending now


def test_tree_copied_with_fresh_mtimes_is_judged_by_its_content(
    tmp_path: Path, store: Store
) -> None:
    """A backup restored today has new file mtimes; its old, never-completed answer is final."""
    old = 1_700_000_000_000
    ses = opencode_tree_session(
        tmp_path,
        "ses_old",
        [
            (
                {"id": "m_u", "role": "user", "time": {"created": old}},
                [{"type": "text", "text": "hello"}],
            ),
            (
                {"id": "m_a", "role": "assistant", "time": {"created": old + 1}},
                [{"type": "text", "text": "Hi."}],
            ),
        ],
    )
    r = harvest_file(store, OpenCodeSource(), ses)
    assert (r.status, r.lines_skipped) == ("read", {})
    assert [m.text for m in store.sessions.messages("opencode:ses_old")] == ["hello", "Hi."]


def test_db_answer_left_unfinished_is_read_on_a_later_pass_without_any_change(
    tmp_path: Path, store: Store, monkeypatch
) -> None:
    import skillopt_sleep.sources.opencode as oc

    db = tmp_path / "opencode.db"
    con = make_db(db)
    now = int(time.time() * 1000)
    con.execute(
        "insert into session values ('ses_1','p','', 'x','/home/dev/site','Site', '1.2.3', ?, ?)",
        (now, now),
    )
    add_message(
        con,
        "ses_1",
        "msg_1",
        now,
        {"role": "user", "time": {"created": now}},
        [{"type": "text", "text": "build it"}],
    )
    add_message(
        con,
        "ses_1",
        "msg_2",
        now + 1,
        {"role": "assistant", "time": {"created": now + 1}},
        [{"type": "text", "text": "Buil"}],
    )
    con.close()
    assert harvest_file(store, OpenCodeSource(), db).lines_skipped == {"unfinished": 1}
    later = time.time() + oc.SETTLE_SECONDS + 5
    monkeypatch.setattr(oc.time, "time", lambda: later)
    r = harvest_file(store, OpenCodeSource(), db)
    assert r.status == "read" and r.messages == 1
    assert [m.text for m in store.sessions.messages("opencode:ses_1")] == ["build it", "Buil"]
    assert harvest_file(store, OpenCodeSource(), db).status == "unchanged"


def test_a_prompt_opencode_run_quoted_reads_as_typed(tmp_path: Path, store: Store) -> None:
    """``opencode run "no, use pnpm"`` stores the prompt with its quotes (1.18.33): one pair
    around the whole prompt is removed; quotes inside a prompt are kept."""
    root = tmp_path / "opencode"
    root.mkdir()
    db = root / "opencode.db"
    con = make_db(db)
    now = int(time.time() * 1000) - 3_600_000
    con.execute(
        "insert into session values ('ses_q','p','', 'x','/home/dev/site','Q', '1.18.33', ?, ?)",
        (now, now),
    )
    prompts = ['"no, use pnpm not npm"', 'say "hi" to "them"', '"a" and "b"', '""']
    for i, text in enumerate(prompts):
        add_message(
            con,
            "ses_q",
            f"msg_{i}",
            now + i,
            {"role": "user", "time": {"created": now + i}},
            [{"type": "text", "text": text}],
        )
    con.close()
    r = harvest_file(store, OpenCodeSource(), db)
    assert r.status == "read"
    texts = [m["text"] for m in store.db.query("select text from messages order by timestamp")]
    assert texts == ["no, use pnpm not npm", 'say "hi" to "them"', '"a" and "b"']


#: what opencode 1.18.33 wrote against the simulator (docs/sources.md): ``opencode run how do I
#: run the tests?``, then the TUI (``opencode`` on a terminal) with "how do I run the linter?"
#: typed in; the ``session``, ``message`` and ``part`` tables' DDL and rows, dumped from the
#: ``opencode.db`` it wrote
MODES = Path(__file__).parent / "data" / "opencode-1.18.33-modes"


def test_an_opencode_run_session_is_headless_and_a_tui_one_is_not(
    tmp_path: Path, store: Store
) -> None:
    db = tmp_path / "opencode" / "opencode.db"
    db.parent.mkdir()
    con = sqlite3.connect(db)
    con.executescript((MODES / "schema.sql").read_text())
    for table in ("session", "message", "part"):
        for line in (MODES / f"{table}.jsonl").read_text().splitlines():
            row = json.loads(line)
            cols = ", ".join(f"`{c}`" for c in row)
            con.execute(
                f"insert into `{table}` ({cols}) values ({', '.join('?' * len(row))})",
                list(row.values()),
            )
    con.commit()
    con.close()
    assert harvest_file(store, "opencode", db).status == "read"
    by_prompt = {store.sessions.messages(s.id)[0].text: s for s in store.sessions.all()}
    run, tui = by_prompt["how do I run the tests?"], by_prompt["how do I run the linter?"]
    assert (run.headless, tui.headless) == (1, 0)
    # the run is not mined by default, and is counted with the reason
    report = mine(store, Settings(), now=dt.datetime(2026, 12, 2, tzinfo=dt.UTC))
    assert report.dropped.get("headless_session") == 1


def test_the_permission_ruleset_opencode_run_gives_its_sessions() -> None:
    deny = [
        {"permission": p, "pattern": "*", "action": "deny"}
        for p in ("question", "plan_enter", "plan_exit")
    ]
    assert headless_permission(deny) and headless_permission(json.dumps(deny))
    assert not headless_permission(None) and not headless_permission([])
    assert not headless_permission(deny[:2])  # a user's own rules, not `opencode run`'s
    allowed = [{**r, "action": "allow"} for r in deny]
    assert not headless_permission(allowed) and not headless_permission("not json")
    # the older JSON tree keeps the same ruleset in the session's info
    assert headless_permission([*deny, {"permission": "bash", "pattern": "*", "action": "ask"}])
