"""The incremental ingester on logs the tests write: offsets, re-reads and bad input."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

from skillopt_sleep.config import Settings
from skillopt_sleep.sources.claude_code import ClaudeCodeSource
from skillopt_sleep.sources.ingest import harvest, harvest_file
from skillopt_sleep.store import Store
from tests.helpers.sources import SID, cc_assistant, cc_user, jsonl, text, tool_use, write
from tests.helpers.store import db_rows


def _prompts(store: Store, sid: str = f"claude_code:{SID}") -> list[str]:
    return [m.text for m in store.sessions.messages(sid) if m.kind == "prompt"]


def _session_file(root: Path, name: str = SID) -> Path:
    return root / "-home-dev-proj" / f"{name}.jsonl"


def test_appended_lines_are_read_from_the_stored_offset(store: Store, claude_root: Path) -> None:
    path = write(
        _session_file(claude_root),
        [
            cc_user("u1", "add a --verbose flag to the CLI"),
            cc_assistant("a1", "msg_1", [text("Done."), tool_use("Edit")]),
        ],
    )
    first = harvest_file(store, "claude_code", path)
    size1 = path.stat().st_size
    assert first.status == "read" and first.bytes_read == size1 and first.offset == size1
    assert store.files.get(str(path)).offset == size1

    extra = jsonl(
        [
            cc_user("u2", "now document it in the README"),
            cc_assistant("a2", "msg_2", [text("Documented.")]),
        ]
    )
    with open(path, "ab") as fh:
        fh.write(extra)
    second = harvest_file(store, "claude_code", path)
    assert second.bytes_read == len(extra)  # only the new bytes were read
    assert second.offset == size1 + len(extra) == store.files.get(str(path)).offset
    assert second.sessions_updated == {f"claude_code:{SID}"} and not second.sessions_new
    assert _prompts(store) == ["add a --verbose flag to the CLI", "now document it in the README"]
    assert [m.seq for m in store.sessions.messages(f"claude_code:{SID}")] == [0, 1, 2, 3]

    third = harvest_file(store, "claude_code", path)
    assert third.status == "unchanged" and third.bytes_read == 0


def test_half_written_last_line_is_picked_up_next_pass(store: Store, claude_root: Path) -> None:
    path = _session_file(claude_root)
    done = jsonl([cc_user("u1", "first question")])
    pending = jsonl([cc_user("u2", "second question")])
    path.parent.mkdir(parents=True)
    path.write_bytes(done + pending[:25])
    res = harvest_file(store, "claude_code", path)
    assert res.offset == len(done) and res.lines_skipped.get("bad_json", 0) == 0
    assert _prompts(store) == ["first question"]

    with open(path, "ab") as fh:
        fh.write(pending[25:])
    res = harvest_file(store, "claude_code", path)
    assert res.bytes_read == len(pending) and res.offset == len(done) + len(pending)
    assert _prompts(store) == ["first question", "second question"]


def test_truncated_and_replaced_files_are_reread(store: Store, claude_root: Path) -> None:
    path = write(
        _session_file(claude_root),
        [
            cc_user("u1", "one"),
            cc_user("u2", "two"),
            cc_user("u3", "three"),
        ],
    )
    harvest_file(store, "claude_code", path)
    inode = path.stat().st_ino
    write(path, [cc_user("u1", "one")])  # truncated in place
    assert path.stat().st_ino == inode
    res = harvest_file(store, "claude_code", path)
    assert res.reason == "truncated" and res.offset == path.stat().st_size
    assert _prompts(store) == ["one", "two", "three"]  # nothing duplicated or lost

    tmp = path.with_suffix(".new")
    write(tmp, [cc_user("u9", "a fresh start", sid="99999999-2222-4333-8444-555555555555")])
    os.replace(tmp, path)
    res = harvest_file(store, "claude_code", path)
    assert res.reason == "replaced" and res.bytes_read == path.stat().st_size
    assert _prompts(store, "claude_code:99999999-2222-4333-8444-555555555555") == ["a fresh start"]


def test_nul_bytes_in_a_text_log_cost_only_their_own_bytes(store: Store, claude_root: Path) -> None:
    """A log whose first 4 KiB hold NUL bytes is still a log when it starts like JSON Lines:
    a line holding NULs is cut at them (each piece parsed or skipped on its own), and a
    zero-filled tail a crash left before the next record is appended loses nothing. A file
    that does not start like JSON is binary, as before."""
    src = ClaudeCodeSource()
    path = _session_file(claude_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    first = jsonl([cc_user("u1", "use pnpm for installs")])
    path.write_bytes(first + b"\xff\xfe\x00\x00garbage\n" + jsonl([cc_user("u2", "no, use pnpm")]))
    res = harvest_file(store, src, path)
    assert res.status == "read" and res.warnings["nul_bytes"] == 1, res
    assert _prompts(store) == ["use pnpm for installs", "no, use pnpm"]
    assert res.lines_skipped  # the garbage piece is counted, not stored

    # a crash left a zero-filled tail; the agent then appended its next record after it
    with open(path, "ab") as fh:
        fh.write(b"\x00" * 512 + jsonl([cc_user("u3", "after the zeros")]))
    again = harvest_file(store, src, path)
    assert again.status == "read" and again.warnings["nul_bytes"] == 1, again
    assert _prompts(store)[-1] == "after the zeros"
    assert store.files.get(str(path)).status == "ok"

    blob = claude_root / "-home-dev-proj" / "blob.jsonl"
    blob.write_bytes(b"\x7fELF\x02\x01\x00\x00" + b"\x00\x01" * 100)
    assert harvest_file(store, src, blob).reason == "binary"


def test_bad_files_are_counted_and_others_still_harvested(store: Store, claude_root: Path) -> None:
    proj = claude_root / "-home-dev-proj"
    write(_session_file(claude_root), [cc_user("u1", "the good session")])
    (proj / "malformed.jsonl").write_bytes(
        b'{"type": "user", "broken\n[1, 2]\n'
        + jsonl([cc_user("m1", "still read", sid="s-malformed")])
    )
    big = proj / "huge.jsonl"  # a 20 MB single line, then a normal one
    with open(big, "wb") as fh:
        fh.write(b'{"type":"user","x":"' + b"a" * (20 * 1024 * 1024) + b'"}\n')
        fh.write(jsonl([cc_user("h1", "after the huge line", sid="s-huge")]))
    (proj / "binary.jsonl").write_bytes(b"\x00\x01\x02" * 1000)
    latin = cc_user("l1", "caf\u00e9 na\u00efve", sid="s-latin")
    (proj / "latin1.jsonl").write_bytes(
        json.dumps(latin, ensure_ascii=False).encode("latin-1") + b"\n"
    )
    (proj / "dir-named-like-a-session.jsonl").mkdir()  # stands in for an unreadable file:
    (proj / "dangling.jsonl").symlink_to(proj / "nowhere.jsonl")  # tests run as root

    tracemalloc.start()
    report = harvest(store, Settings(), sources=["claude_code"])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 24 * 1024 * 1024  # the 20 MB line was never held whole

    cc = report.sources["claude_code"]
    assert cc.roots == [str(claude_root)]
    assert cc.files_seen == 7
    assert cc.files_skipped == {"binary": 1, "not_a_file": 1, "dangling_symlink": 1}
    assert cc.files_read == 4
    assert cc.lines_skipped["bad_json"] == 1 and cc.lines_skipped["not_an_object"] == 1
    assert cc.lines_skipped["line_too_long"] == 1
    assert cc.warnings == {"non_utf8": 1}
    assert _prompts(store) == ["the good session"]
    assert _prompts(store, "claude_code:s-malformed") == ["still read"]
    assert _prompts(store, "claude_code:s-huge") == ["after the huge line"]
    assert _prompts(store, "claude_code:s-latin") == ["caf\ufffd na\ufffdve"]
    assert store.files.get(str(proj / "binary.jsonl")).status == "skipped"
    run = db_rows(store, "harvest_runs")[0]
    assert json.loads(run["files_skipped"]) == cc.files_skipped and run["files_read"] == 4


def test_unterminated_huge_line_stays_unconsumed(store: Store, claude_root: Path) -> None:
    path = _session_file(claude_root)
    path.parent.mkdir(parents=True)
    head = jsonl([cc_user("u1", "before")])
    path.write_bytes(head + b'{"type":"user","x":"' + b"b" * (9 * 1024 * 1024))
    res = harvest_file(store, "claude_code", path)
    assert res.offset == len(head) and _prompts(store) == ["before"]
    assert res.lines_skipped.get("line_too_long", 0) == 0  # not judged until it ends


def test_vanished_file_and_missing_root(store: Store, tmp_path: Path) -> None:
    res = harvest_file(store, "claude_code", tmp_path / "gone" / "x.jsonl")
    assert res.status == "skipped" and res.reason == "vanished"
    events: list = []
    report = harvest(store, Settings(), sources=["claude_code", "codex"], on_progress=events.append)
    assert report.total("files_seen") == 0 and report.total("files_read") == 0
    assert events == []  # no file, no progress


class _Exploding(ClaudeCodeSource):
    def parse(self, path, lines, state):  # a parser bug on one record
        lines = list(lines)
        if any(b"boom" in line for line in lines):
            state["poisoned"] = True  # a state change of the failed call must not stick
            raise RuntimeError("boom")
        return super().parse(path, lines, state)


def test_a_parser_crash_skips_that_record_not_the_file(store: Store, claude_root: Path) -> None:
    lines = [cc_user("u1", "one"), cc_user("u2", "boom"), cc_user("u3", "three")]
    path = write(_session_file(claude_root), lines)
    res = harvest_file(store, _Exploding(), path)
    assert res.status == "read" and res.lines_skipped["bad_record:RuntimeError"] == 1
    assert _prompts(store) == ["one", "three"]
    row = store.files.get(str(path))
    assert row.status == "ok" and row.offset == path.stat().st_size
    assert "poisoned" not in row.state


def test_directory_vanishing_during_discovery(store: Store, claude_root: Path) -> None:
    import shutil

    from skillopt_sleep.sources import get_source

    for name in ("a", "b"):
        write(claude_root / name / f"{SID}.jsonl", [cc_user("u1", "x")])
    found = get_source("claude_code").discover(claude_root)
    first = next(found)
    assert first.parent.name == "a"
    shutil.rmtree(claude_root / "b")  # removed while the walk is under way
    shutil.rmtree(claude_root / "a")
    assert list(found) == []
    res = harvest_file(store, "claude_code", first)
    assert res.status == "skipped" and res.reason == "vanished"


def test_a_pass_waits_for_another_writer_instead_of_failing(
    store: Store, claude_root: Path
) -> None:
    """Another process (here a second connection) holds the write lock and commits while a
    pass is under way: the pass waits and reads the file, where a deferred transaction
    (read first, write later) failed at once with "database is locked" in WAL mode."""
    import threading
    import time

    path = write(_session_file(claude_root), [cc_user("u1", "one"), cc_user("u2", "two")])
    other = Store(store.db.execute("pragma database_list").fetchone()[2])
    other.db.execute("BEGIN IMMEDIATE")
    other.db.execute("insert into harvest_runs (source, started_at) values ('x', 'now')")

    def commit_later() -> None:
        time.sleep(0.5)
        other.db.conn.commit()

    t = threading.Thread(target=commit_later)
    t.start()
    res = harvest_file(store, "claude_code", path)
    t.join()
    other.close()
    assert (res.status, res.reason) == ("read", ""), res
    assert [m["text"] for m in db_rows(store, "messages")] == ["one", "two"]


def test_a_pass_is_time_bounded_and_the_next_goes_on(
    store: Store, claude_root: Path, monkeypatch
) -> None:
    from skillopt_sleep.sources import ingest
    from skillopt_sleep.sources import lines as line_reading

    monkeypatch.setattr(line_reading, "BATCH_BYTES", 10)  # one line per batch
    monkeypatch.setattr(ingest, "MAX_FILE_SECONDS", 0.0)  # every pass stops after one batch
    path = write(
        _session_file(claude_root), [cc_user("u1", "one"), cc_user("u2", "two"), cc_user("u3", "3")]
    )
    res = harvest_file(store, "claude_code", path)
    assert res.status == "read" and res.warnings["time_bound"] == 1
    assert _prompts(store) == ["one"]
    harvest_file(store, "claude_code", path)
    assert _prompts(store) == ["one", "two"]
    harvest_file(store, "claude_code", path)
    assert _prompts(store) == ["one", "two", "3"]
    assert harvest_file(store, "claude_code", path).status == "unchanged"
