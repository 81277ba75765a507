"""Pi harvester: session files in the format pi 0.73.1 writes (docs/sources.md), their default
folders, incremental reading and bad input. The real CLI's own files are harvested in
tests/sources/test_real_cli_logs.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

from skillopt_sleep.config import Settings, SourceConfig
from skillopt_sleep.sources.ingest import harvest, harvest_file
from skillopt_sleep.sources.pi import PiSource
from skillopt_sleep.store import Store
from tests.helpers.store import db_get

SID = "01a231fe-3746-766c-b118-b90db1da4ea3"
CWD = "/home/dev/app"


def header(sid: str = SID, cwd: str = CWD) -> dict:
    return {
        "type": "session",
        "version": 3,
        "id": sid,
        "timestamp": "2026-12-01T14:24:33.607Z",
        "cwd": cwd,
    }


def entry(eid: str, message: dict, parent: str | None = None, second: int = 1) -> dict:
    return {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": f"2026-12-01T14:24:{second:02d}.000Z",
        "message": message,
    }


def user(text) -> dict:
    content = [{"type": "text", "text": text}] if isinstance(text, str) else text
    return {"role": "user", "content": content, "timestamp": 1796135073652}


def assistant(*blocks: dict, stop: str = "stop", **extra) -> dict:
    return {
        "role": "assistant",
        "content": list(blocks),
        "api": "openai-completions",
        "provider": "sim",
        "model": "sim-demo",
        "usage": {"input": 10, "output": 2},
        "stopReason": stop,
        **extra,
    }


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def write(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records),
        encoding="utf-8",
    )
    return path


def session_path(root: Path, sid: str = SID) -> Path:
    return root / "--home-dev-app--" / f"2026-12-01T14-24-33-607Z_{sid}.jsonl"


def test_default_roots_honour_pi_variables(tmp_path: Path) -> None:
    src = PiSource()
    assert src.default_roots({}, tmp_path) == [tmp_path / ".pi" / "agent" / "sessions"]
    assert src.default_roots({"PI_CODING_AGENT_DIR": "~/pi"}, tmp_path) == [
        tmp_path / "pi" / "sessions"
    ]
    assert src.default_roots(
        {"PI_CODING_AGENT_DIR": "/x", "PI_CODING_AGENT_SESSION_DIR": "/var/pi"}, tmp_path
    ) == [Path("/var/pi")]


def test_conversation_tools_and_injected_context(tmp_path: Path, store: Store) -> None:
    path = write(
        session_path(tmp_path / "sessions"),
        [
            header(),
            {"type": "model_change", "id": "a0", "parentId": None, "modelId": "sim-demo"},
            {"type": "thinking_level_change", "id": "a1", "parentId": "a0", "thinkingLevel": "off"},
            entry("e1", user("how do I run the tests?"), "a1"),
            entry(
                "e2",
                assistant(
                    {"type": "thinking", "thinking": "let me look"},
                    text("Checking."),
                    {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}},
                ),
                "e1",
            ),
            entry(
                "e3",
                {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "bash",
                    "content": [text("exit 1: no such script")],
                    "isError": True,
                },
                "e2",
            ),
            entry("e4", assistant(text("Run `pnpm test`.")), "e3"),
            entry("e5", {"role": "custom", "customType": "ext", "content": "x", "display": True}),
            entry("e6", {"role": "compactionSummary", "summary": "earlier", "tokensBefore": 9}),
            entry(
                "e7",
                {"role": "bashExecution", "command": "ls", "output": "a.txt", "exitCode": 0},
            ),
        ],
    )
    res = harvest_file(store, "pi", path)
    assert res.status == "read" and res.messages == 5
    assert res.lines_skipped == {"ignored_type:thinking_level_change": 1, "injected": 2}
    row = db_get(store, "sessions", f"pi:{SID}")
    assert (row["project"], row["model"], row["self_generated"]) == (CWD, "sim-demo", 0)
    msgs = store.sessions.messages(f"pi:{SID}")
    assert [(m.kind, m.text, m.tool_names, m.is_error) for m in msgs] == [
        ("prompt", "how do I run the tests?", [], 0),
        ("answer", "Checking.", ["bash"], 0),
        ("tool", "exit 1: no such script", [], 1),
        ("answer", "Run `pnpm test`.", [], 0),
        ("tool", "a.txt", [], 0),
    ]
    assert msgs[0].uid == f"{SID}:e1"


def test_incremental_append_reads_only_new_lines(tmp_path: Path, store: Store) -> None:
    path = write(session_path(tmp_path), [header(), entry("e1", user("run the linter"))])
    assert harvest_file(store, "pi", path).messages == 1
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry("e2", assistant(text("Run `ruff check`.")), "e1")) + "\n")
    again = harvest_file(store, "pi", path)
    assert (again.status, again.messages) == ("read", 1)
    assert harvest_file(store, "pi", path).status == "unchanged"
    assert [(m.kind, m.text) for m in store.sessions.messages(f"pi:{SID}")] == [
        ("prompt", "run the linter"),
        ("answer", "Run `ruff check`."),
    ]


def test_bad_input_is_counted_and_nothing_is_lost(tmp_path: Path, store: Store) -> None:
    path = write(
        session_path(tmp_path),
        [
            header(),
            "{not json",
            "[1, 2]",
            entry("e1", user("deploy the app")),
            {"type": "message", "message": user("no id")},  # no entry id
            entry("e2", {"role": "user", "content": 42}),  # content of an odd type: empty
            entry("e3", "not a message"),  # message not an object
            entry("e4", assistant(stop="error", errorMessage="401 Incorrect API key")),
            entry("e5", assistant(text("Deployed."), model=7)),  # a model of an odd type
            {"type": "hologram", "id": "z"},  # a type from the future
            entry("e6", {"role": "wizard", "content": "?"}),
        ],
    )
    res = harvest_file(store, "pi", path)
    assert res.status == "read"
    assert res.lines_skipped == {
        "bad_json": 1,
        "not_an_object": 1,
        "no_id": 1,
        "empty": 1,
        "unknown_role:None": 1,
        "failed_answer": 1,
        "ignored_type:hologram": 1,
        "unknown_role:wizard": 1,
    }
    assert [(m.kind, m.text) for m in store.sessions.messages(f"pi:{SID}")] == [
        ("prompt", "deploy the app"),
        ("answer", "Deployed."),
    ]


def test_secrets_are_redacted(tmp_path: Path, store: Store) -> None:
    key = "sk-ant-api03-" + "A" * 40
    path = write(
        session_path(tmp_path),
        [header(), entry("e1", user(f"use the key {key} to deploy"))],
    )
    harvest_file(store, "pi", path)
    (msg,) = store.sessions.messages(f"pi:{SID}")
    assert key not in msg.text and "deploy" in msg.text


def test_replay_marked_session_is_self_generated_and_key_from_file_name(
    tmp_path: Path, store: Store
) -> None:
    other = "0badc0de-0000-4000-8000-000000000001"
    path = write(
        session_path(tmp_path, other),
        [entry("e1", user("[skillopt-sleep replay]\nrun the tests"))],  # no header line
    )
    res = harvest_file(store, "pi", path)
    assert res.sessions_filtered == {"self_generated": 1}
    assert db_get(store, "sessions", f"pi:{other}")["self_generated"] == 1


def test_harvest_finds_files_under_the_default_root(isolated_home: Path, store: Store) -> None:
    root = isolated_home / ".pi" / "agent" / "sessions"
    write(session_path(root), [header(), entry("e1", user("run the tests"))])
    write(root / "--tmp--" / "notes.txt", ["not a session"])
    report = harvest(store, Settings(sources={"pi": SourceConfig()}))
    assert report.sources["pi"].sessions_new == 1
    assert os.path.isdir(root)


#: what pi 0.73.1 wrote against the simulator (docs/sources.md): ``pi -p "how do I run the
#: tests?"`` (print.jsonl) and ``pi`` on a terminal with "how do I run the linter?" typed in
#: (interactive.jsonl), copied as written
MODES = Path(__file__).parent / "data" / "pi-0.73.1-modes"


def _shape(value: object) -> object:
    """A JSON value's shape: its keys and types, not its values."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def test_pi_records_nothing_that_tells_a_print_run_from_an_interactive_one(
    tmp_path: Path, store: Store
) -> None:
    """pi 0.73.1 writes a ``-p`` run and an interactive session in the same shape (the same
    entries with the same keys), so no session is marked headless (the source's docstring and
    docs/sources.md say so)."""
    printed, typed = (MODES / "print.jsonl", MODES / "interactive.jsonl")
    shapes = [[_shape(json.loads(x)) for x in f.read_text().splitlines()] for f in (printed, typed)]
    assert shapes[0] == shapes[1]
    folder = tmp_path / "sessions" / "--home-dev-app--"
    folder.mkdir(parents=True)
    for f in (printed, typed):
        (folder / f"2026-12-01T20-39-54-084Z_{f.stem}.jsonl").write_bytes(f.read_bytes())
        harvest_file(store, "pi", folder / f"2026-12-01T20-39-54-084Z_{f.stem}.jsonl")
    assert [s.headless for s in store.sessions.all()] == [0, 0]
