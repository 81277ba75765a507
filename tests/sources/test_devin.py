"""Devin harvester: ATIF transcripts, the sessions.db projection sample, sessions.db lookup."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from skillopt_sleep.config import Settings, SourceConfig
from skillopt_sleep.sources.devin import DevinSource
from skillopt_sleep.sources.ingest import harvest, harvest_file
from skillopt_sleep.store import Store
from tests.helpers.store import db_get


def atif(session_id: str, steps: list[dict], **extra) -> dict:
    doc = {
        "schema_version": "ATIF-v1.7",
        "session_id": session_id,
        "agent": {"name": "devin", "version": "3000.3.27", "model_name": "swe-1-7"},
        "steps": steps,
        "final_metrics": {},
    }
    doc.update(extra)
    return doc


def step(i: int, source: str, message, **extra) -> dict:
    return {
        "step_id": i,
        "timestamp": f"2026-01-05T10:00:{i:02d}Z",
        "source": source,
        "message": message,
        **extra,
    }


def write_json(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_corpus_projection_sample(corpus: Path) -> None:
    path = corpus / "devin" / "synthetic" / "jazzyalex_SYNTHETIC_sessions_db_projection.json"
    res = DevinSource().parse(path, [path.read_bytes()], {})
    (sess,) = res.sessions
    assert (sess.key, sess.project, sess.title, sess.model) == (
        "bald-ketch",
        "/tmp/as-agent-lab/devin/project",
        "Fix the broken checks",
        "swe-1-7",
    )
    assert [(m.kind, m.text, m.tool_names) for m in sess.messages] == [
        ("prompt", "Fix the broken checks.", []),
        ("answer", "Reading the file.", ["read_file"]),
        ("tool", 'print("hello")', []),
    ]
    assert res.skipped == {"system_message": 1}  # "You are Devin." is not a prompt


def test_atif_transcript_harvest_and_db_project(tmp_path: Path, store: Store) -> None:
    cli = tmp_path / "share" / "devin" / "cli"
    path = write_json(
        cli / "transcripts" / "blend-pencil.json",
        atif(
            "blend-pencil",
            [
                step(1, "system", "You are Devin, a software engineer."),
                step(2, "user", [{"type": "text", "text": "run the unit tests"}]),
                step(
                    3,
                    "user",
                    "<repo_rules>always lint</repo_rules>",
                    metadata={"is_user_input": False},
                ),
                step(
                    4,
                    "agent",
                    "Running them.",
                    tool_calls=[
                        {
                            "tool_call_id": "c1",
                            "function_name": "exec",
                            "arguments": {"command": "pytest"},
                        }
                    ],
                    observation={"results": [{"source_call_id": "c1", "content": "3 passed"}]},
                    metadata={"request_id": "req-1"},
                    extra={"generation_model": "swe-1-7-fast"},
                ),
                step(5, "agent", "Running them.", metadata={"request_id": "req-1"}),  # a retry
                step(6, "agent", "All 3 tests pass."),
                step(7, "narrator", "?"),
            ],
        ),
    )
    con = sqlite3.connect(cli / "sessions.db")
    con.execute("create table sessions (id text primary key, working_directory text)")
    con.execute("insert into sessions values ('blend-pencil', '/home/dev/api')")
    con.commit()
    con.close()
    report = harvest(store, Settings(sources={"devin": SourceConfig(roots=[cli])}))
    acc = report.sources["devin"]
    assert (acc.files_seen, acc.sessions_new) == (1, 1)
    assert acc.lines_skipped == {
        "system_message": 1,
        "injected": 1,
        "retry": 1,
        "unknown_source:narrator": 1,
    }
    sess = db_get(store, "sessions", "devin:blend-pencil")
    assert (sess["project"], sess["model"], sess["agent_version"]) == (
        "/home/dev/api",
        "swe-1-7-fast",
        "3000.3.27",
    )
    assert [(m.kind, m.text, m.tool_names) for m in store.sessions.messages(sess["id"])] == [
        ("prompt", "run the unit tests", []),
        ("answer", "Running them.", ["exec"]),
        ("tool", "3 passed", []),
        ("answer", "All 3 tests pass.", []),
    ]
    # whole file: unchanged → not read; grown snapshot → only the new steps are added
    assert harvest_file(store, "devin", path).status == "unchanged"
    doc = json.loads(path.read_text())
    doc["steps"].append(step(8, "user", "now lint"))
    path.write_text(json.dumps(doc))
    r = harvest_file(store, "devin", path)
    assert (r.status, r.messages) == ("read", 1)


def test_schema_drift_and_unknown_document(tmp_path: Path) -> None:
    src = DevinSource()
    drift = atif(
        "s",
        [
            step(1, "user", "deploy it"),
            "junk",
            {"source": "agent"},
            {"source": "agent", "message": {"text": "Deployed."}, "new_field": [1]},
        ],
    )
    del drift["agent"]
    res = src.parse(tmp_path / "s.json", [json.dumps(drift).encode()], {})
    assert [(m.kind, m.text) for m in res.sessions[0].messages] == [
        ("prompt", "deploy it"),
        ("answer", "Deployed."),
    ]
    assert res.skipped == {"bad_step": 1, "empty": 1}
    other = src.parse(tmp_path / "o.json", [b'{"format": "something else"}'], {})
    assert (other.sessions, other.skipped) == ([], {"unknown_document": 1})
    assert src.parse(tmp_path / "b.json", [b"{not json"], {}).skipped == {"bad_json": 1}


def test_default_roots(tmp_path: Path) -> None:
    import os
    import sys

    if os.name == "nt":
        return
    roots = DevinSource().default_roots({"XDG_DATA_HOME": str(tmp_path / "xdg")}, tmp_path)
    assert roots[0] == tmp_path / "xdg" / "devin" / "cli" / "transcripts"
    plain = DevinSource().default_roots({}, tmp_path)
    assert plain[0] == tmp_path / ".local" / "share" / "devin" / "cli" / "transcripts"
    if sys.platform == "darwin":
        assert (
            tmp_path / "Library" / "Application Support" / "devin" / "cli" / "transcripts" in plain
        )
