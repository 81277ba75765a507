"""VS Code Copilot Chat harvester: chatSessions .jsonl (incremental) and .json (whole), roots."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from skillopt_sleep.config import Settings, SourceConfig
from skillopt_sleep.sources.copilot_vscode import CopilotVSCodeSource, uri_to_path
from skillopt_sleep.sources.ingest import harvest, harvest_file
from skillopt_sleep.store import Store
from tests.helpers.store import db_get

SID = "0885a5a2-5c49-4a15-b22a-15d9ec401050"


def workspace(user: Path, name: str, folder: str) -> Path:
    ws = user / "workspaceStorage" / name
    (ws / "chatSessions").mkdir(parents=True)
    (ws / "workspace.json").write_text(json.dumps({"folder": folder}))
    return ws


def settings(user: Path) -> Settings:
    return Settings(sources={"copilot_vscode": SourceConfig(roots=[user])})


def test_corpus_incremental_jsonl_with_workspace_json(
    corpus: Path, tmp_path: Path, store: Store
) -> None:
    user = tmp_path / "Code" / "User"
    ws = workspace(user, "abc123", "file:///home/dev/strapi")
    shutil.copy(
        corpus / "copilot_vscode" / "chatSessions_incremental_jsonl" / f"{SID}.jsonl",
        ws / "chatSessions" / f"{SID}.jsonl",
    )
    report = harvest(store, settings(user))
    acc = report.sources["copilot_vscode"]
    assert (acc.files_seen, acc.sessions_new) == (1, 1)
    sess = db_get(store, "sessions", f"copilot_vscode:{SID}")
    assert sess["project"] == "/home/dev/strapi"  # from workspace.json, not the log's baseUri
    assert sess["title"] == "Migrate to Quarkus"
    assert sess["model"] == "claude-opus-4.6"
    msgs = store.sessions.messages(sess["id"])
    assert [(m.kind, m.text[:60]) for m in msgs] == [
        ("prompt", "migrate to quarkus"),
        ("answer", "This is a structural rewrite request — migrating Strapi (Nod"),
    ]
    assert msgs[1].tool_names == ["manage_todo_list", "runSubagent"]
    # the AGENTS.md instructions injected through variableData are dropped and counted
    assert acc.lines_skipped["injected"] == 1
    assert acc.lines_skipped["ignored_part:thinking"] == 2
    assert "AGENTS.md" not in msgs[0].text


def test_corpus_jsonl_without_workspace_json_uses_base_uri(corpus: Path) -> None:
    path = corpus / "copilot_vscode" / "chatSessions_incremental_jsonl" / f"{SID}.jsonl"
    res = CopilotVSCodeSource().parse(path, path.read_bytes().splitlines(), {})
    assert res.sessions[0].project == "/Users/testuser/workspace/strapi"


def test_corpus_export_as_whole_json(corpus: Path, tmp_path: Path, store: Store) -> None:
    user = tmp_path / "User"
    ws = workspace(user, "h1", "file:///c%3A/Users/USER/repos/PulseQuiz")
    doc = json.loads((corpus / "copilot_vscode" / "chat_export" / "export-chats.json").read_text())
    doc.update(version=3, sessionId="s-export", creationDate=1771238879000)
    target = ws / "chatSessions" / "s-export.json"
    target.write_text(json.dumps(doc))
    r = harvest_file(store, CopilotVSCodeSource(), target)
    assert (r.status, r.messages) == ("read", 4)
    sess = db_get(store, "sessions", "copilot_vscode:s-export")
    assert sess["project"] == "c:\\Users\\USER\\repos\\PulseQuiz"
    msgs = store.sessions.messages(sess["id"])
    assert [m.text for m in msgs if m.kind == "prompt"] == [
        "Is there a way to keep my local chat sessions in my versioned repo ?",
        "Nice, I'd like the convention folder for chats (will exports go here automatically)",
    ]
    answers = [m for m in msgs if m.kind == "answer"]
    assert answers[0].text.startswith("VS Code doesn't automatically persist Copilot chat sessions")
    assert answers[1].tool_names == ["copilot_createFile"]
    assert "Created .chat/README.md." in answers[1].text  # inline reference kept in the text
    # unchanged file: not read; touched but same bytes: hash says unchanged
    assert harvest_file(store, CopilotVSCodeSource(), target).status == "unchanged"
    os.utime(target, (1, 1))
    again = harvest_file(store, CopilotVSCodeSource(), target)
    assert (again.status, again.messages) == ("unchanged", 0)
    # a new request rewritten into the whole file: only it is added
    doc["requests"].append(
        {
            "requestId": "request_3",
            "timestamp": 1771239000000,
            "message": {"text": "commit it"},
            "response": [{"value": "Committed."}],
        }
    )
    target.write_text(json.dumps(doc))
    grown = harvest_file(store, CopilotVSCodeSource(), target)
    assert (grown.status, grown.messages) == ("read", 2)
    assert [m.text for m in store.sessions.messages(sess["id"])][-2:] == [
        "commit it",
        "Committed.",
    ]


def test_incremental_kinds_append_without_duplicates(tmp_path: Path, store: Store) -> None:
    ws = workspace(tmp_path / "User", "h2", "file:///home/dev/app")
    path = ws / "chatSessions" / "s-inc.jsonl"
    req = {
        "requestId": "r1",
        "timestamp": 1767607200000,
        "message": {"text": "run the tests"},
        "variableData": {"variables": [{"kind": "promptFile", "automaticallyAdded": True}]},
        "response": [],
    }
    lines = [
        {
            "kind": 0,
            "v": {
                "version": 3,
                "sessionId": "s-inc",
                "creationDate": 1767607200000,
                "requests": [req],
            },
        },
        {"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "Run `npm "}]},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    harvest_file(store, "copilot_vscode", path)
    more = [
        {
            "kind": 2,
            "k": ["requests", 0, "response"],
            "v": [
                {"value": "test`."},
                {"kind": "toolInvocationSerialized", "toolId": "run_in_terminal"},
            ],
        },
        {"kind": 1, "k": ["requests", 0, "result"], "v": {"timings": {}}},
        {
            "kind": 2,
            "k": ["requests"],
            "v": [
                {
                    "requestId": "r2",
                    "message": {"text": "no, use pnpm"},
                    "response": [{"value": "Run `pnpm test`."}],
                }
            ],
        },
        {"kind": 7, "k": ["future"], "v": 1},
    ]
    with open(path, "a") as fh:
        fh.write("".join(json.dumps(x) + "\n" for x in more))
    r = harvest_file(store, "copilot_vscode", path)
    assert r.lines_skipped == {"ignored_path:requests.result": 1, "unknown_kind:7": 1}
    msgs = store.sessions.messages("copilot_vscode:s-inc")
    assert [(m.kind, m.text, m.tool_names) for m in msgs] == [
        ("prompt", "run the tests", []),
        ("answer", "Run `npm\ntest`.", ["run_in_terminal"]),
        ("prompt", "no, use pnpm", []),
        ("answer", "Run `pnpm test`.", []),
    ]
    assert db_get(store, "sessions", "copilot_vscode:s-inc")["project"] == "/home/dev/app"


def test_discover_transcripts_only_without_a_chat_session(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "User", "h3", "file:///p")
    (ws / "chatSessions" / "a.jsonl").write_text("")
    tr = ws / "GitHub.copilot-chat" / "transcripts"
    tr.mkdir(parents=True)
    (tr / "a.jsonl").write_text("")
    (tr / "b.jsonl").write_text("")
    empty = tmp_path / "User" / "globalStorage" / "emptyWindowChatSessions"
    empty.mkdir(parents=True)
    (empty / "c.json").write_text("{}")
    found = sorted(
        p.relative_to(tmp_path / "User").as_posix()
        for p in CopilotVSCodeSource().discover(tmp_path / "User")
    )
    assert found == [
        "globalStorage/emptyWindowChatSessions/c.json",
        "workspaceStorage/h3/GitHub.copilot-chat/transcripts/b.jsonl",
        "workspaceStorage/h3/chatSessions/a.jsonl",
    ]


def test_default_roots_cover_flavours_remote_portable_and_overrides(tmp_path: Path) -> None:
    src = CopilotVSCodeSource()
    roots = src.default_roots(
        {
            "VSCODE_APPDATA": str(tmp_path / "appdata"),
            "VSCODE_PORTABLE": str(tmp_path / "portable"),
        },
        tmp_path,
    )
    assert tmp_path / "appdata" / "Code" / "User" in roots
    assert tmp_path / "appdata" / "Code - Insiders" / "User" in roots
    assert tmp_path / "appdata" / "VSCodium" / "User" in roots
    assert tmp_path / "portable" / "user-data" / "User" in roots
    assert tmp_path / ".vscode-server" / "data" / "User" in roots
    if os.name != "nt":
        import sys

        plain = src.default_roots({}, tmp_path)
        base = tmp_path / ("Library/Application Support" if sys.platform == "darwin" else ".config")
        assert base / "Code" / "User" in plain


@pytest.mark.parametrize(
    "uri,path",
    [
        ("file:///home/u/p", "/home/u/p"),
        ("file:///c%3A/Users/me/proj", "c:\\Users\\me\\proj"),
        ("vscode-remote://ssh-remote%2Bbox/home/u/p", "/home/u/p"),
        ({"path": "/Users/me/x/"}, "/Users/me/x"),
        ("not a uri", None),
    ],
)
def test_uri_to_path(uri, path) -> None:
    assert uri_to_path(uri) == path


def test_unreadable_document_counts(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    res = CopilotVSCodeSource().parse(path, [b'{"some": "other format"}'], {})
    assert res.skipped == {"unknown_document": 1}
    assert res.sessions[0].messages == []
