"""OpenClaw harvester: the per-agent ``openclaw-agent.sqlite`` (``transcript_events``, as
openclaw 2026.9.6 writes it; docs/sources.md) and the older ``sessions/*.jsonl``; read-only,
incremental, bad input counted. The real CLI's own database is harvested in
tests/sources/test_real_cli_logs.py."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import zstandard

from skillopt_sleep.config import Settings, SourceConfig
from skillopt_sleep.mining.mine import mine
from skillopt_sleep.sources.ingest import harvest, harvest_file
from skillopt_sleep.sources.openclaw import OpenClawSource, headless_invocation
from skillopt_sleep.store import Store
from tests.helpers.store import db_get

SID = "42b87ea8-1692-45cc-bba5-e1bd39485800"
WS = "/home/dev/.openclaw/workspace"


def events(sid: str = SID, prompt: str = "how do I run the tests?") -> list[dict]:
    return [
        {
            "type": "session",
            "version": 4,
            "id": sid,
            "timestamp": "2026-12-01T14:48:49Z",
            "cwd": WS,
        },
        {"type": "model_change", "provider": "sim", "modelId": "sim", "id": "m0", "parentId": None},
        {"type": "custom", "customType": "model-snapshot", "data": {}, "id": "c0"},
        {
            "type": "message",
            "id": "u1",
            "timestamp": "2026-12-01T14:48:50Z",
            "message": {"role": "user", "content": prompt, "__openclaw": {"senderIsOwner": True}},
        },
        {
            "type": "message",
            "id": "a1",
            "timestamp": "2026-12-01T14:48:51Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Run `pnpm test`."},
                    {"type": "toolCall", "id": "t1", "name": "exec", "arguments": {}},
                ],
                "model": "sim",
                "stopReason": "toolUse",
            },
        },
        {
            "type": "message",
            "id": "r1",
            "message": {
                "role": "toolResult",
                "toolName": "exec",
                "content": [{"type": "text", "text": "2 passed"}],
                "isError": False,
            },
        },
    ]


def make_db(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute(
        "create table transcript_events (session_id text not null, seq integer not null, "
        "event_json text, created_at integer not null, event_zstd blob, "
        "event_utf8_bytes integer, navigation_json text, primary key (session_id, seq))"
    )
    return con


def add(con: sqlite3.Connection, sid: str, seq: int, event, *, packed: bool = False) -> None:
    text = event if isinstance(event, str) else json.dumps(event)
    if packed:
        blob = zstandard.ZstdCompressor().compress(text.encode())
        con.execute(
            "insert into transcript_events values (?, ?, null, 0, ?, ?, '{}')",
            (sid, seq, blob, len(text)),
        )
    else:
        con.execute(
            "insert into transcript_events values (?, ?, ?, 0, null, null, null)",
            (sid, seq, text),
        )
    con.commit()


def db_path(root: Path, agent: str = "main") -> Path:
    return root / "agents" / agent / "agent" / "openclaw-agent.sqlite"


def test_default_root_honours_openclaw_state_dir(tmp_path: Path) -> None:
    src = OpenClawSource()
    assert src.default_roots({}, tmp_path) == [tmp_path / ".openclaw" / "agents"]
    assert src.default_roots({"OPENCLAW_STATE_DIR": "/srv/claw"}, tmp_path) == [
        Path("/srv/claw/agents")
    ]


def test_database_read_only_incremental_and_zstd_events(tmp_path: Path, store: Store) -> None:
    path = db_path(tmp_path)
    con = make_db(path)
    for seq, event in enumerate(events()):
        add(con, SID, seq, event, packed=seq == 4)  # the answer compressed
    before = path.read_bytes()
    res = harvest_file(store, "openclaw", path)
    assert res.status == "read" and res.messages == 3
    assert res.lines_skipped == {"ignored_type:custom": 1}
    assert path.read_bytes() == before  # never written
    row = db_get(store, "sessions", f"openclaw:{SID}")
    assert (row["project"], row["model"], row["self_generated"]) == (WS, "sim", 0)
    msgs = store.sessions.messages(f"openclaw:{SID}")
    assert [(m.kind, m.text, m.tool_names) for m in msgs] == [
        ("prompt", "how do I run the tests?", []),
        ("answer", "Run `pnpm test`.", ["exec"]),
        ("tool", "2 passed", []),
    ]
    assert harvest_file(store, "openclaw", path).status == "unchanged"
    # a follow-up turn appended: only the new events are read
    add(
        con,
        SID,
        6,
        {"type": "message", "id": "u2", "message": {"role": "user", "content": "and lint?"}},
    )
    again = harvest_file(store, "openclaw", path)
    assert (again.status, again.messages) == ("read", 1)
    assert [m.text for m in store.sessions.messages(f"openclaw:{SID}")][-1] == "and lint?"


def test_bad_rows_are_counted_and_the_rest_is_kept(tmp_path: Path, store: Store) -> None:
    path = db_path(tmp_path)
    con = make_db(path)
    add(con, SID, 0, events()[0])
    add(con, SID, 1, "{not json")
    add(con, SID, 2, "[1]")
    con.execute(
        "insert into transcript_events values (?, 3, null, 0, ?, 5, '{}')", (SID, b"garbage")
    )
    add(con, SID, 4, {"type": "message", "message": {"role": "user", "content": "x"}})  # no id
    add(con, SID, 5, events()[3])
    add(con, SID, 6, {"type": "message", "id": "z", "message": {"role": "wizard"}})
    res = harvest_file(store, "openclaw", path)
    assert res.status == "read"
    assert res.lines_skipped == {
        "bad_json": 1,
        "not_an_object": 1,
        "bad_zstd": 1,
        "no_id": 1,
        "unknown_role:wizard": 1,
    }
    assert [m.text for m in store.sessions.messages(f"openclaw:{SID}")] == [
        "how do I run the tests?"
    ]


def test_not_a_database_is_skipped_with_a_reason(tmp_path: Path, store: Store) -> None:
    path = db_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not sqlite")
    res = harvest_file(store, "openclaw", path)
    assert res.lines_skipped and all(k.startswith("db_error:") for k in res.lines_skipped)
    assert store.sessions.all(include_self=True) == []


def test_legacy_jsonl_and_a_replay_marked_session(isolated_home: Path, store: Store) -> None:
    root = isolated_home / ".openclaw" / "agents" / "main" / "sessions"
    root.mkdir(parents=True)
    old = "0badc0de-0000-4000-8000-000000000002"
    (root / f"{old}.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in events(old, "[skillopt-sleep replay]\nrun it"))
    )
    (root / "sessions.json").write_text("{}")  # the index: not a session
    report = harvest(store, Settings(sources={"openclaw": SourceConfig()}))
    oc = report.sources["openclaw"]
    assert oc.files_read == 1 and oc.sessions_filtered == {"self_generated": 1}
    assert db_get(store, "sessions", f"openclaw:{old}")["self_generated"] == 1


#: what openclaw 2026.9.6 (Node 24.22.3) wrote in a sandbox state folder against the simulator:
#: ``openclaw agent --local --agent main -m "how do I install the dependencies?"``, then
#: ``-m "no, use pnpm, not npm"`` (the same main session), then ``--session-id replay-1`` with a
#: replay-marked prompt; the ``transcript_events`` table's DDL and rows, dumped from the
#: ``openclaw-agent.sqlite`` it wrote (the pinned CLIs run on Node 20, so the test cannot run it)
REAL = Path(__file__).parent / "data" / "openclaw-2026.9.6"


def test_the_database_openclaw_wrote_is_harvested(isolated_home: Path, store: Store) -> None:
    path = db_path(isolated_home / ".openclaw")
    path.parent.mkdir(parents=True)
    con = sqlite3.connect(path)
    # its CHECK calls octet_length (SQLite 3.43+), which an older sqlite3 module lacks: the
    # builtin's meaning (bytes of a text's UTF-8), for the inserts here; reading needs none
    con.create_function(
        "octet_length",
        1,
        lambda v: len(v.encode()) if isinstance(v, str) else (None if v is None else len(v)),
        deterministic=True,
    )
    con.executescript((REAL / "transcript_events.sql").read_text())
    for line in (REAL / "transcript_events.jsonl").read_text().splitlines():
        row = json.loads(line)
        con.execute(
            "insert into transcript_events (session_id, seq, event_json, created_at, "
            "navigation_json) values (?, ?, ?, ?, ?)",
            (
                row["session_id"],
                row["seq"],
                row["event_json"],
                row["created_at"],
                row["navigation_json"],
            ),
        )
    con.commit()
    con.close()
    report = harvest(store, Settings(sources={"openclaw": SourceConfig()}))
    oc = report.sources["openclaw"]
    assert oc.files_read == 1 and oc.files_skipped == {}
    assert oc.sessions_new == 2 and oc.sessions_filtered == {"self_generated": 1}
    assert oc.lines_skipped == {"ignored_type:custom": 5, "ignored_type:thinking_level_change": 2}
    [own] = store.sessions.all()
    assert own.project == "/tmp/a16/clawh2/ws" and own.model == "sim"
    msgs = store.sessions.messages(own.id)
    assert [(m.kind, m.text) for m in msgs if m.kind == "prompt"] == [
        ("prompt", "how do I install the dependencies?"),
        ("prompt", "no, use pnpm, not npm"),
    ]
    assert [m.kind for m in msgs] == ["prompt", "answer", "prompt", "answer"]
    replay = db_get(store, "sessions", "openclaw:replay-1")
    assert replay["self_generated"] == 1


#: what openclaw 2026.9.6 (Node 24.22.3) wrote in a sandbox state folder against the simulator
#: for ``openclaw agent --local --agent main -m "how do I run the tests?" --json`` and for
#: ``openclaw tui --local --session tuitest`` with "how do I run the linter?" typed in: both
#: sessions' ``transcript_events`` rows, and the ``session.started`` and ``trace.metadata``
#: rows of its runtime trace (``trajectory_runtime_events``, DDL as it created it)
MODES = Path(__file__).parent / "data" / "openclaw-2026.9.6-modes"


def _load(con: sqlite3.Connection, table: str, path: Path) -> None:
    for line in path.read_text().splitlines():
        row = json.loads(line)
        cols = ", ".join(row)
        con.execute(
            f"insert into {table} ({cols}) values ({', '.join('?' * len(row))})",
            list(row.values()),
        )


def test_an_openclaw_agent_turn_is_headless_and_a_tui_session_is_not(
    isolated_home: Path, store: Store
) -> None:
    path = db_path(isolated_home / ".openclaw")
    path.parent.mkdir(parents=True)
    con = sqlite3.connect(path)
    con.create_function(  # see test_the_database_openclaw_wrote_is_harvested
        "octet_length",
        1,
        lambda v: len(v.encode()) if isinstance(v, str) else (None if v is None else len(v)),
        deterministic=True,
    )
    con.executescript((REAL / "transcript_events.sql").read_text())
    con.executescript((MODES / "trajectory_runtime_events.sql").read_text())
    _load(con, "transcript_events", MODES / "transcript_events.jsonl")
    _load(con, "trajectory_runtime_events", MODES / "trajectory_runtime_events.jsonl")
    con.commit()
    con.close()
    # the transcripts alike: only the trace tells the one-shot turn from the terminal UI
    report = harvest(store, Settings(sources={"openclaw": SourceConfig()}))
    assert report.sources["openclaw"].sessions_new == 2
    by_prompt = {store.sessions.messages(s.id)[0].text: s for s in store.sessions.all()}
    agent, tui = by_prompt["how do I run the tests?"], by_prompt["how do I run the linter?"]
    assert (agent.headless, tui.headless) == (1, 0)
    report = mine(
        store,
        Settings(sources={"openclaw": SourceConfig()}),
        now=dt.datetime(2026, 12, 2, tzinfo=dt.UTC),
    )
    assert report.dropped.get("headless_session") == 1


def test_a_database_without_the_runtime_trace_marks_nothing_headless(
    isolated_home: Path, store: Store
) -> None:
    path = db_path(isolated_home / ".openclaw")
    path.parent.mkdir(parents=True)
    con = sqlite3.connect(path)
    con.executescript(
        "create table transcript_events (session_id text, seq integer, event_json text, "
        "event_zstd blob, created_at integer, navigation_json text)"
    )
    _load(con, "transcript_events", MODES / "transcript_events.jsonl")
    con.commit()
    con.close()
    harvest(store, Settings(sources={"openclaw": SourceConfig()}))
    assert [s.headless for s in store.sessions.all()] == [0, 0]


def test_the_command_line_of_a_run_says_whether_it_was_openclaw_agent() -> None:
    node, cli = "/opt/node/bin/node", "/opt/openclaw/openclaw.mjs"
    assert headless_invocation([node, cli, "agent", "--local", "-m", "hi"])
    assert headless_invocation([node, cli, "--profile", "work", "--no-color", "agent"])
    assert headless_invocation(["/usr/local/bin/openclaw", "agent", "-m", "hi"])
    assert not headless_invocation([node, cli, "tui", "--local"])
    assert not headless_invocation([node, cli, "chat"])
    assert not headless_invocation([node, cli, "--profile", "agent", "tui"])  # a profile's name
    assert not headless_invocation([node, cli, "gateway", "run"])  # a channel's turn
    assert not headless_invocation([node, "/srv/other.mjs", "agent"])
    assert not headless_invocation(None) and not headless_invocation("openclaw agent")
