"""Codex rollouts the tests write: envelope, pre-envelope, zstd, incremental state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import zstandard

from skillopt_sleep.config import Settings
from skillopt_sleep.sources import get_source
from skillopt_sleep.sources.base import SELF_MARKER
from skillopt_sleep.sources.ingest import harvest, harvest_file
from skillopt_sleep.store import Store
from tests.helpers.sources import (
    CWD,
    cx,
    cx_answer_event,
    cx_answer_item,
    cx_call,
    cx_meta,
    cx_output,
    cx_turn,
    cx_user_event,
    cx_user_item,
    jsonl,
    write,
)
from tests.helpers.store import db_get

UUID = "019c8a70-dda7-7f33-98ea-f30553347322"
NAME = f"rollout-2026-01-05T10-00-00-{UUID}.jsonl"
S = f"codex:{UUID}"

IDE = (
    "# Context from my IDE setup:\n\n## Active file: src/app.ts\n\n## Open tabs:\n- app.ts\n\n"
    "## My request for Codex:\nmake the sidebar collapsible\n"
)
ENV = "<environment_context>\n  <cwd>/home/dev/proj</cwd>\n</environment_context>"
AGENTS = "# AGENTS.md instructions for /home/dev/proj\n\n<INSTRUCTIONS>\nBe terse.\n</INSTRUCTIONS>"


def _rollout(home: Path) -> Path:
    return home / "sessions" / "2026" / "01" / "05" / NAME


def _kinds(store: Store, sid: str = S) -> list[tuple[str, str]]:
    return [(m.kind, m.text) for m in store.sessions.messages(sid)]


def test_envelope_session(store: Store, codex_home: Path) -> None:
    path = write(
        _rollout(codex_home),
        [
            cx_meta(UUID),
            cx(
                "response_item",
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "<permissions instructions>x"}],
                },
            ),
            cx_user_item(AGENTS),
            cx_user_item(ENV),
            cx_user_item(IDE),
            cx_user_event(IDE),
            cx_turn(),
            cx_call("shell", "c1"),
            cx_output(json.dumps({"output": "boom", "metadata": {"exit_code": 2}}), "c1"),
            cx_call("mcp__github__create_pr", "c2"),
            cx_output("Process exited with code 0\nOutput:\nok", "c2"),
            cx_answer_event("Made the sidebar collapsible."),
            cx_answer_item("Made the sidebar collapsible."),
            cx("event_msg", {"type": "token_count", "info": None}),
            cx_user_event("also persist its state"),
            cx_user_item("also persist its state"),
            cx_answer_item("Persisted in localStorage."),
            cx_answer_event("Persisted in localStorage."),
            cx(
                "response_item",
                {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin"},
            ),
            cx(
                "compacted",
                {
                    "message": "",
                    "replacement_history": [
                        {
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": "old"}],
                        }
                    ],
                },
            ),
        ],
    )
    res = harvest_file(store, "codex", path)
    assert res.sessions_new == {S}
    assert _kinds(store) == [
        ("prompt", "make the sidebar collapsible"),
        ("answer", ""),
        ("tool", "boom"),
        ("tool", "Process exited with code 0\nOutput:\nok"),
        ("answer", "Made the sidebar collapsible."),
        ("prompt", "also persist its state"),
        ("answer", "Persisted in localStorage."),
    ]
    msgs = store.sessions.messages(S)
    assert msgs[1].tool_names == ["shell", "mcp__github__create_pr"]
    assert [m.is_error for m in msgs if m.kind == "tool"] == [1, 0]
    assert msgs[6].tool_names == ["apply_patch"]
    sess = db_get(store, "sessions", S)
    assert sess["project"] == CWD and sess["model"] == "gpt-5.3-codex"
    assert sess["agent_version"] == "0.104.0" and sess["headless"] == 0
    assert res.lines_skipped["injected"] == 2 and res.lines_skipped["developer_message"] == 1
    # each prompt and answer was written twice, in either order
    assert res.lines_skipped["duplicate_item"] == 2 and res.lines_skipped["duplicate_event"] == 2
    assert res.lines_skipped["ignored_type:compacted"] == 1


def _completed(item_type: str, t: str) -> dict:
    block = (
        {"type": "text", "text": t, "text_elements": []}
        if item_type == "UserMessage"
        else {"type": "Text", "text": t}
    )
    return cx(
        "event_msg",
        {
            "type": "item_completed",
            "thread_id": UUID,
            "turn_id": "t1",
            "item": {"type": item_type, "id": "i1", "content": [block]},
        },
    )


def test_paginated_history_layout(store: Store, codex_home: Path) -> None:
    """0.146+/0.169 ``codex exec``: no user_message event; UserMessage/AgentMessage items in
    ``item_completed`` events next to the response items (shapes from a real 0.169 run)."""
    path = write(
        _rollout(codex_home),
        [
            cx_meta(UUID, originator="codex_exec", source="exec"),
            cx("event_msg", {"type": "task_started", "turn_id": "t1"}),
            cx(
                "response_item",
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "<skills_instructions>x"}],
                },
            ),
            cx_user_item(ENV),
            cx("world_state", {"full": True, "state": {}}),
            cx_turn("gpt-5"),
            cx_user_item("list the TODOs"),
            _completed("UserMessage", "list the TODOs"),
            cx_user_event("list the TODOs"),  # a build writing all three: still one prompt
            _completed("AgentMessage", "There are 3."),
            cx_answer_item("There are 3."),
            cx("token_usage_record", {"usage": {"input_tokens": 5}}),
            _completed("UserMessage", "list the TODOs"),
            cx_user_item("list the TODOs"),  # asked again
        ],
    )
    res = harvest_file(store, "codex", path)
    assert _kinds(store) == [
        ("prompt", "list the TODOs"),
        ("answer", "There are 3."),
        ("prompt", "list the TODOs"),
    ]
    assert (
        res.lines_skipped["duplicate_completed"] == 1 and res.lines_skipped["duplicate_event"] == 1
    )
    assert res.lines_skipped["ignored_type:token_usage_record"] == 1
    assert db_get(store, "sessions", S)["headless"] == 1


def test_state_carries_the_session_across_passes(store: Store, codex_home: Path) -> None:
    path = write(
        _rollout(codex_home),
        [
            cx_meta(UUID, originator="codex_exec", source="exec"),
            cx_user_event(f"{SELF_MARKER} fix the typo in README"),
        ],
    )
    harvest_file(store, "codex", path)
    extra = jsonl([cx_turn("gpt-5.5"), cx_call("shell"), cx_answer_item("Fixed.")])
    with open(path, "ab") as fh:
        fh.write(extra)
    res = harvest_file(store, "codex", path)
    assert res.bytes_read == len(extra)
    assert [s.id for s in store.sessions.all(include_self=True)] == [S]
    sess = db_get(store, "sessions", S)
    assert sess["headless"] == 1 and sess["self_generated"] == 1 and sess["model"] == "gpt-5.5"
    assert sess["project"] == CWD
    # uids are "<key>:<line number>", counted on from the first pass via the state
    assert [m.uid for m in store.sessions.messages(S)] == [
        f"{UUID}:2",
        f"{UUID}:4",
        f"{UUID}:5",
    ]
    assert store.sessions.messages(S)[1].tool_names == ["shell"]


def test_two_files_sharing_a_session_id_stay_two_sessions(store: Store, codex_home: Path) -> None:
    other = "019c8a70-dda7-7f33-98ea-000000000001"
    first = write(_rollout(codex_home), [cx_meta(UUID), cx_user_event("first file's prompt")])
    second = write(
        _rollout(codex_home).with_name(NAME.replace(UUID, other)),
        [cx_meta(UUID), cx_user_event("second file's prompt")],  # the same id, another file
    )
    harvest_file(store, "codex", first)
    harvest_file(store, "codex", second)
    assert _kinds(store) == [("prompt", "first file's prompt")]
    assert _kinds(store, f"codex:{other}") == [("prompt", "second file's prompt")]


def test_pre_envelope_rollout_with_crlf(store: Store, codex_home: Path) -> None:
    lines = [
        {
            "id": "cf4def41-21e0-4b91-adb4-5397c1492084",
            "timestamp": "2025-09-10T18:58:38.331Z",
            "instructions": "AGENTS.md\r\nrules",
            "git": {"branch": "main"},
        },
        {"record_type": "state"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "<user_instructions>x"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ENV}]},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "what's next?"}],
        },
        {
            "type": "function_call",
            "name": "task-master-ai__next_task",
            "arguments": "{}",
            "call_id": "c",
        },
        {"type": "function_call_output", "call_id": "c", "output": "failed in sandbox: denied"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Task 60."}],
        },
    ]
    path = codex_home / "sessions" / "rollout-2025-09-10-cf4def41.jsonl"
    path.write_bytes(jsonl(lines, crlf=True))
    harvest_file(store, "codex", path)
    sid = "codex:cf4def41-21e0-4b91-adb4-5397c1492084"
    assert _kinds(store, sid) == [
        ("prompt", "what's next?"),
        ("answer", ""),
        ("tool", "failed in sandbox: denied"),
        ("answer", "Task 60."),
    ]
    assert store.sessions.messages(sid)[1].tool_names == ["task-master-ai__next_task"]
    assert store.sessions.messages(sid)[2].is_error == 1
    assert (
        db_get(store, "sessions", sid)["project"] == "/home/dev/proj"
    )  # from <environment_context>


def test_zst_rollouts(store: Store, codex_home: Path) -> None:
    records = [cx_meta(UUID), cx_user_event("compress me"), cx_answer_item("Done.")]
    archived = codex_home / "archived_sessions"
    archived.mkdir()
    zpath = archived / (NAME + ".zst")
    zpath.write_bytes(zstandard.ZstdCompressor().compress(jsonl(records)))
    # a plain twin wins over its .zst; an unrelated file is not a rollout
    twin = f"rollout-2026-01-04T10-00-00-{UUID[:-1]}9.jsonl"
    write(archived / twin, [cx_meta(UUID[:-1] + "9"), cx_user_event("plain one")])
    (archived / (twin + ".zst")).write_bytes(zstandard.ZstdCompressor().compress(b"garbage"))
    (archived / "history.jsonl").write_text('{"text": "x"}\n')

    report = harvest(store, Settings(), sources=["codex"])
    cx_report = report.sources["codex"]
    assert cx_report.roots == [str(codex_home / "sessions"), str(archived)]
    assert cx_report.files_seen == 2 and cx_report.files_read == 2
    assert cx_report.sessions_new == 2
    assert _kinds(store) == [("prompt", "compress me"), ("answer", "Done.")]
    assert store.files.get(str(zpath)).offset == zpath.stat().st_size

    again = harvest(store, Settings(), sources=["codex"])
    assert again.sources["codex"].files_unchanged == 2 and again.total("bytes_read") == 0

    records += [cx_user_event("and again"), cx_answer_item("Again.")]
    zpath.write_bytes(zstandard.ZstdCompressor().compress(jsonl(records)))
    os.utime(zpath, (1, 1))
    res = harvest_file(store, "codex", zpath)
    assert res.status == "read" and res.bytes_read == len(jsonl(records))  # whole stream again
    assert _kinds(store) == [
        ("prompt", "compress me"),
        ("answer", "Done."),
        ("prompt", "and again"),
        ("answer", "Again."),
    ]

    bad = archived / f"rollout-2026-01-06T10-00-00-{UUID[:-1]}8.jsonl.zst"
    bad.write_bytes(b"not zstd at all")
    res = harvest_file(store, "codex", bad)
    assert res.status == "skipped" and res.reason.startswith("error:")


def test_subagent_threads_are_sidechain(store: Store, codex_home: Path) -> None:
    path = write(
        _rollout(codex_home),
        [
            cx_meta(
                UUID, source={"subagent": {"thread_spawn": {"parent_thread_id": "p", "depth": 1}}}
            ),
            cx_user_event("review the diff"),
        ],
    )
    harvest_file(store, "codex", path)
    assert [m.is_sidechain for m in store.sessions.messages(S)] == [1]


def test_default_roots_honour_codex_home(tmp_path: Path) -> None:
    src = get_source("codex")
    assert src.default_roots({}, tmp_path) == [
        tmp_path / ".codex" / "sessions",
        tmp_path / ".codex" / "archived_sessions",
    ]
    assert src.default_roots({"CODEX_HOME": "/c"}, tmp_path) == [
        Path("/c/sessions"),
        Path("/c/archived_sessions"),
    ]
