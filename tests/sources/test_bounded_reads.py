"""Hostile inputs: every source's parser fuzzed (hypothesis), and the files that used to hang or
blow up the harvester — a FIFO named like a session file, a sparse 1 GiB OpenCode file, a line
nested deeper than the JSON decoder recurses, a lone surrogate, a VS Code line naming request
100000000000 — each harvested in a child process with a time limit and a memory bound."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillopt_sleep.sources import REGISTRY, get_source
from skillopt_sleep.sources.ingest import harvest_file
from skillopt_sleep.store import Store
from tests.helpers.cli_run import skillopt_in_process
from tests.helpers.sources import cc_user, write

UUID = "019c8a70-dda7-7f33-98ea-f30553347322"

# ---------------------------------------------------------------------------- fuzz
_WORDS = [
    "type", "role", "message", "content", "text", "payload", "kind", "k", "v", "requests",
    "response", "id", "sessionId", "uuid", "parentUuid", "timestamp", "cwd", "data", "tool",
    "name", "input", "output", "parts", "value", "requestId", "session_meta", "response_item",
    "event_msg", "turn_context", "user", "assistant", "tool_use", "tool_result", "steps",
    "nodes", "session", "time", "created", "completed", "arguments", "result", "isSidechain",
    "customTitle", "modelId", "agent", "state", "status", "metadata", "exit", "source",
    "originator", "user_message", "agent_message", "function_call", "function_call_output",
    "call_id", "user.message", "assistant.message", "tool.execution_complete", "toolRequests",
    "transcript", "messages", "error", "title", "directory", "summary", "model",
]  # fmt: skip
_KEYS = st.sampled_from(_WORDS)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    _KEYS,
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=6)),
    max_leaves=30,
)
_RECORD = st.dictionaries(_KEYS, _VALUES, max_size=8).map(lambda d: json.dumps(d).encode())
_LINE = st.one_of(_RECORD, _RECORD, _RECORD, st.binary(max_size=40), _VALUES.map(
    lambda v: json.dumps(v).encode()
))  # fmt: skip
_LINES = st.lists(_LINE, min_size=1, max_size=8)

#: a path each source parses as its own (the layout decides some formats)
_PATHS = {
    "claude_code": f"home/.claude/projects/-p/{UUID}.jsonl",
    "codex": f"home/.codex/sessions/2026/01/05/rollout-2026-01-05T10-00-00-{UUID}.jsonl",
    "copilot_cli": f"home/.copilot/session-state/{UUID}/events.jsonl",
    "copilot_vscode": "home/.config/Code/User/workspaceStorage/ab/chatSessions/s.jsonl",
    "cursor": f"home/.cursor/projects/p/agent-transcripts/{UUID}/{UUID}.jsonl",
    "devin": f"home/.local/share/devin/sessions/{UUID}.json",
    "opencode": "home/.local/share/opencode/storage/session/p/ses_1.json",
    "pi": f"home/.pi/agent/sessions/--p--/2026-01-05T10-00-00-000Z_{UUID}.jsonl",
    "openclaw": f"home/.openclaw/agents/main/sessions/{UUID}.jsonl",
}
_EXTRA = {"copilot_vscode": "home/.config/Code/User/workspaceStorage/ab/chatSessions/s.json"}


def test_every_source_is_fuzzed() -> None:
    assert set(_PATHS) == set(REGISTRY)


def _fuzz(name: str, path: str, tmp: Path, lines: list[bytes]) -> None:
    src = get_source(name)
    target = tmp / path
    state: dict = {}
    for batch in ([lines[0]], lines[1:], lines):  # a first pass, a later one, a re-read
        if name == "opencode":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(b"\n".join(batch))
            result = src.read_snapshot(target, state)
        elif src.read_mode(target) == "whole_file":
            result = src.parse(target, [b"\n".join(batch)], state)
        else:
            result = src.parse(target, batch, state)
        assert isinstance(result.skipped, Counter)
        json.dumps(result.state)  # the state stays storable
        state = result.state
        for sess in result.sessions:
            for msg in sess.messages:
                assert isinstance(msg.text, str)
                msg.text.encode("utf-8")  # storable: no lone surrogate


@pytest.mark.slow  # 70 generated logs per source: 5-15 s each
@pytest.mark.parametrize("name", sorted(_PATHS))
def test_fuzz_parse_never_raises(name: str, tmp_path: Path) -> None:
    paths = [_PATHS[name], *([_EXTRA[name]] if name in _EXTRA else [])]

    @settings(
        max_examples=70,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(lines=_LINES)
    def run(lines: list[bytes]) -> None:
        for path in paths:
            _fuzz(name, path, tmp_path, lines)

    run()


# ---------------------------------------------------------------------------- hostile files
def _child(code: str, home: Path, timeout: float = 60) -> tuple[dict, int]:
    """Run ``code`` (which prints one JSON line) in a child process with HOME=``home``; return
    what it printed and the child's own peak RSS in MiB (measured by the child itself: the
    test process's RUSAGE_CHILDREN holds the largest of *all* its children so far, e.g. a
    real agent CLI an earlier test ran). A hang fails the test (timeout)."""
    trailer = (
        "\nimport json as _j, resource as _r\n"
        "print(_j.dumps({'peak_kib': _r.getrusage(_r.RUSAGE_SELF).ru_maxrss}))\n"
    )
    env = dict(os.environ, HOME=str(home))
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code) + trailer],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    peak_kib = json.loads(lines[-1])["peak_kib"]  # ru_maxrss is KiB on Linux
    return json.loads(lines[-2]), peak_kib // 1024


def _harvest_in_child(home: Path, db: Path, source: str, path: Path) -> tuple[dict, int]:
    return _child(
        f"""
        import json
        from skillopt_sleep.sources.ingest import harvest_file
        from skillopt_sleep.store import Store
        store = Store({str(db)!r})
        res = harvest_file(store, {source!r}, {str(path)!r})
        print(json.dumps({{"status": res.status, "reason": res.reason,
                          "skipped": dict(res.lines_skipped), "messages": res.messages}}))
        """,
        home,
    )


def test_a_fifo_named_like_a_session_file_never_blocks(isolated_home: Path, tmp_path: Path) -> None:
    fifos = [
        isolated_home / ".claude" / "projects" / "-p" / f"{UUID}.jsonl",
        isolated_home / ".codex" / "sessions" / "2026" / "01" / "05" / f"rollout-x-{UUID}.jsonl",
        isolated_home / ".local" / "share" / "opencode" / "opencode.db",
        isolated_home / ".local" / "share" / "opencode" / "storage" / "session" / "p" / "s.json",
    ]
    ws = isolated_home / ".config" / "Code" / "User" / "workspaceStorage" / "ab"
    fifos += [ws / "workspace.json", ws / "chatSessions" / "s.json"]
    for f in fifos:
        f.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(f)
    # a real session next to the FIFOs is still harvested
    write(isolated_home / ".claude" / "projects" / "-p" / "real.jsonl", [cc_user("u1", "hello")])
    env = dict(os.environ, HOME=str(isolated_home))
    out = {}
    for args in (["sources", "--json"], ["harvest", "--json"], ["harvest", "--json"]):
        proc = skillopt_in_process(*args, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[args[0]] = json.loads(proc.stdout)
    claude = next(s for s in out["sources"]["sources"] if s["name"] == "claude_code")
    assert claude["skipped"].get("not_a_file") == 1 and claude["files"] == 1
    harvested = out["harvest"]["sources"]
    skipped = Counter()
    for name in ("claude_code", "codex", "opencode", "copilot_vscode"):
        skipped.update(harvested[name]["files_skipped"])
    assert skipped["not_a_file"] == 5  # claude, codex, opencode (database, tree), VS Code
    assert harvested["claude_code"]["files_read"] + harvested["claude_code"]["files_unchanged"] == 1
    store = Store(tmp_path / "skillopt-home" / "state" / "skillopt.db")
    try:
        assert [m["text"] for m in store.db.query("select text from messages")] == ["hello"]
    finally:
        store.close()


def test_a_sparse_gigabyte_opencode_file_is_skipped_in_bounded_memory(
    isolated_home: Path, tmp_path: Path
) -> None:
    storage = isolated_home / ".local" / "share" / "opencode" / "storage"
    ses = storage / "session" / "p" / "ses_1.json"
    ses.parent.mkdir(parents=True)
    ses.write_text(json.dumps({"id": "ses_1", "directory": "/p"}))
    big = storage / "message" / "ses_1" / "msg_1.json"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as fh:
        fh.truncate(1024**3)  # sparse: 1 GiB of zeros that takes no disk
    good = storage / "message" / "ses_1" / "msg_2.json"
    good.write_text(json.dumps({"id": "msg_2", "role": "user", "time": {"created": 2}}))
    part = storage / "part" / "msg_2" / "prt_1.json"
    part.parent.mkdir(parents=True)
    part.write_text(json.dumps({"id": "prt_1", "type": "text", "text": "still harvested"}))
    out, peak_mib = _harvest_in_child(isolated_home, tmp_path / "s.db", "opencode", ses)
    assert out["status"] == "read" and out["messages"] == 1
    assert out["skipped"].get("bad_json") == 1  # the 1 GiB file: not read, counted
    assert peak_mib < 400, peak_mib  # was 2.1 GB


def test_a_huge_vscode_index_allocates_nothing(isolated_home: Path, tmp_path: Path) -> None:
    path = isolated_home / "ws" / "chatSessions" / "s.jsonl"
    path.parent.mkdir(parents=True)
    records = [
        {"kind": 0, "v": {"sessionId": "s1", "requests": []}},
        {"kind": 2, "k": ["requests", 100000000000, "response"], "v": [{"value": "x"}]},
        {"kind": 2, "k": ["requests", -5, "response"], "v": [{"value": "x"}]},
        {"kind": 2, "k": ["requests"], "v": [{"requestId": "r1", "message": {"text": "hi"}}]},
    ]
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    out, peak_mib = _harvest_in_child(isolated_home, tmp_path / "s.db", "copilot_vscode", path)
    assert out["status"] == "read" and out["messages"] == 1
    assert out["skipped"].get("bad_index") == 2
    assert peak_mib < 400, peak_mib  # was 2.4 GB


def test_one_bad_record_skips_only_that_record(store: Store, isolated_home: Path) -> None:
    deep = b'{"type": "user", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    lone = b'{"type": "user", "uuid": "u9", "message": {"role": "user", "content": "\\ud800"}}'
    path = isolated_home / ".claude" / "projects" / "-p" / f"{UUID}.jsonl"
    path.parent.mkdir(parents=True)
    lines = [json.dumps(cc_user("u1", "before")).encode(), deep, lone]
    lines.append(json.dumps(cc_user("u2", "after")).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    for _ in range(2):  # every pass, not only the first
        res = harvest_file(store, "claude_code", path)
        assert res.status in ("read", "unchanged")
    assert [m["text"] for m in store.db.query("select text from messages order by seq")] == [
        "before",
        "after",
    ]
    row = store.files.get(str(path))
    assert row.status == "ok" and row.lines_skipped == 2


def test_one_bad_opencode_row_does_not_block_later_messages(
    store: Store, isolated_home: Path
) -> None:
    root = isolated_home / "oc"
    root.mkdir()
    db = root / "opencode.db"
    con = sqlite3.connect(db)
    con.executescript(
        "create table session (id text primary key, directory text, title text, "
        "parent_id text, time_created integer);"
        "create table message (id text primary key, session_id text, time_created integer, "
        "time_updated integer, data text);"
        "create table part (id text primary key, message_id text, session_id text, "
        "time_created integer, time_updated integer, data text);"
    )
    con.execute("insert into session values ('s1', '/p', 't', null, 1)")
    rows = [
        ("m1", 1, json.dumps({"role": "user", "time": {"created": 1}}), "first"),
        ("m2", 2, '{"role": "user", "time": ' + "[" * 3000 + "]" * 3000 + "}", "deep"),
        ("m3", 3, json.dumps({"role": "user", "time": "not a dict"}), "odd time"),
        ("m4", 4, '{"role": "user", "x": "\\udc00"}', "lone"),
        ("m5", 5, json.dumps({"role": "user", "time": {"created": 5}}), "last"),
    ]
    for mid, t, data, text in rows:
        con.execute("insert into message values (?, 's1', ?, ?, ?)", (mid, t, t, data))
        part = json.dumps({"type": "text", "text": text})
        con.execute("insert into part values (?, ?, 's1', ?, ?, ?)", (f"p{mid}", mid, t, t, part))
    con.commit()
    con.close()
    res = harvest_file(store, "opencode", db)
    assert res.status == "read"
    texts = [m["text"] for m in store.db.query("select text from messages order by seq")]
    assert "first" in texts and "last" in texts and "deep" not in texts and "lone" not in texts
    assert res.lines_skipped["too_deep"] == 1 and res.lines_skipped["lone_surrogate"] == 1
