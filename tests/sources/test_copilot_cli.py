"""Copilot CLI harvester: corpus samples, the real `copilot -p` against the simulator, drift."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from skillopt_sleep.config import Settings, SourceConfig
from skillopt_sleep.mining.mine import mine
from skillopt_sleep.sources.copilot_cli import CopilotCliSource
from skillopt_sleep.sources.ingest import harvest, harvest_file
from skillopt_sleep.store import Store
from tests.helpers.clis import agent_binary
from tests.helpers.store import db_get

ROOT = Path(__file__).resolve().parents[2]
COPILOT = ROOT / "node_modules" / ".bin" / "copilot"


def parse_file(path: Path, src=None):
    src = src or CopilotCliSource()
    return src.parse(path, [ln for ln in path.read_bytes().splitlines() if ln.strip()], {})


def kinds(sess) -> list[tuple[str, str]]:
    return [(m.kind, m.text) for m in sess.messages]


def only(settings_source: str, root: Path | None = None) -> Settings:
    cfg = {"enabled": True, "roots": [root] if root else []}
    return Settings(sources={settings_source: SourceConfig(**cfg)})


# ---------------------------------------------------------------------------- corpus
def test_corpus_session_state_sample(corpus: Path, store: Store) -> None:
    root = corpus / "copilot_cli" / "synthetic" / "session-state"
    report = harvest(store, only("copilot_cli", root))
    acc = report.sources["copilot_cli"]
    assert (acc.files_seen, acc.sessions_new) == (1, 1)
    sess = db_get(store, "sessions", "copilot_cli:aaaabbbb-1111-2222-3333-ccccddddeeee")
    assert sess["project"] == "/tmp/project"
    assert sess["agent_version"] == "1.0.11"
    msgs = store.sessions.messages(sess["id"])
    assert [(m.kind, m.text, m.tool_names) for m in msgs] == [
        ("prompt", "List the files", []),
        ("answer", "", ["bash"]),
        ("tool", "file1\nfile2\n", []),
        ("answer", "The directory contains file1 and file2.", []),
    ]
    assert acc.lines_skipped == {
        "ignored_type:assistant.turn_start": 1,
        "ignored_type:tool.execution_start": 1,
        "ignored_type:assistant.turn_end": 1,
    }


def test_corpus_event_coverage_sample(corpus: Path) -> None:
    res = parse_file(
        corpus / "copilot_cli" / "synthetic" / "jazzyalex_SYNTHETIC_event_coverage.jsonl"
    )
    (sess,) = res.sessions
    assert sess.key == "copilot_stage0_small"
    assert sess.project == "/tmp/repo"  # the placeholder cwd of session.resume is not a path
    assert sess.model == "gpt-5-mini"
    prompts = [m.text for m in sess.messages if m.kind == "prompt"]
    assert prompts[0] == "List the files"
    answers = [m for m in sess.messages if m.kind == "answer"]
    assert (answers[0].text, answers[0].tool_names) == ("Listing the files.", ["shell"])
    assert answers[1].text == "Done"
    # sub-agent messages (parentToolCallId) are side chains
    assert any(m.is_sidechain for m in sess.messages)
    assert not any("You are" in m.text for m in sess.messages)  # system.message dropped
    assert res.skipped["system_message"] == 1
    assert res.skipped["ignored_type:session.shutdown"] == 1
    assert res.skipped["ignored_type:assistant.reasoning"] == 1
    assert not any(k.startswith(("unknown_type", "bad_json")) for k in res.skipped)


def test_vscode_hook_transcripts_use_the_same_envelope(corpus: Path) -> None:
    folder = corpus / "copilot_vscode" / "transcripts_hook_export"
    res = parse_file(folder / "2026-02-16-hosting-game-mobile-hold-full-8f84ed98.json")
    (sess,) = res.sessions
    assert sess.key == "8f84ed98-6bed-4d52-920a-58cb1e234c43"
    assert sess.agent_version == "0.37.6"
    prompts = [m.text for m in sess.messages if m.kind == "prompt"]
    assert prompts == [
        "When hosting a game on mobile, the Hold for Full button doesnt work because holding "
        "doesnt work in some cases - in my case on Android it selects the text of the button."
    ]
    tools = {t for m in sess.messages for t in m.tool_names}
    assert tools == {"grep_search", "read_file", "multi_replace_string_in_file", "get_errors"}
    assert sess.messages[-1].text.startswith("Fixed. Here's what was wrong and what changed:")

    res2 = parse_file(folder / "2026-02-17-host-interface-bit-messy-busy-9eb692a7.json")
    prompts2 = [m.text for m in res2.sessions[0].messages if m.kind == "prompt"]
    assert prompts2[1:] == ["Ok revisit the files now after the changes", "Proceedify my good man"]
    assert prompts2[0].startswith("The Host interface is a bit messy and busy")
    assert "run_in_terminal" in {t for m in res2.sessions[0].messages for t in m.tool_names}


# ---------------------------------------------------------------------------- layout & drift
def ev(type_: str, data: dict, i: int) -> dict:
    return {
        "type": type_,
        "data": data,
        "id": f"e{i}",
        "timestamp": f"2026-01-05T10:00:{i:02d}.000Z",
        "parentId": None,
    }


def write_events(path: Path, events: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_copilot_home_override_legacy_file_and_workspace_yaml(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "cphome"
    monkeypatch.setenv("COPILOT_HOME", str(home))
    state = home / "session-state"
    # new layout without a cwd in its events: the adjacent workspace.yaml names it
    write_events(
        state / "s-new" / "events.jsonl",
        [
            ev("session.start", {"sessionId": "s-new", "copilotVersion": "1.0.102"}, 1),
            ev(
                "user.message",
                {"content": "run the tests", "transformedContent": "<x>run the tests</x>"},
                2,
            ),
        ],
    )
    (state / "s-new" / "workspace.yaml").write_text("id: s-new\ncwd: /home/dev/app\n")
    # legacy flat file
    write_events(
        state / "s-old.jsonl",
        [
            ev("session.start", {"sessionId": "s-old", "context": {"cwd": "/home/dev/old"}}, 1),
            ev("user.message", {"content": "lint the code"}, 2),
        ],
    )
    src = CopilotCliSource()
    assert src.default_roots(os.environ, tmp_path) == [state]
    report = harvest(store, Settings(sources={"copilot_cli": SourceConfig()}))
    assert report.sources["copilot_cli"].sessions_new == 2
    assert db_get(store, "sessions", "copilot_cli:s-new")["project"] == "/home/dev/app"
    assert db_get(store, "sessions", "copilot_cli:s-old")["project"] == "/home/dev/old"
    assert [m.text for m in store.sessions.messages("copilot_cli:s-new")] == ["run the tests"]


def test_incremental_append(tmp_path: Path, store: Store) -> None:
    path = write_events(
        tmp_path / "session-state" / "s1" / "events.jsonl",
        [
            ev("session.start", {"sessionId": "s1", "context": {"cwd": "/p"}}, 1),
            ev("user.message", {"content": "how do I install dependencies?"}, 2),
        ],
    )
    assert harvest_file(store, "copilot_cli", path).messages == 1
    with open(path, "a") as fh:
        fh.write(
            json.dumps(
                ev("assistant.message", {"messageId": "m1", "content": "Run `npm install`."}, 3)
            )
            + "\n"
        )
    r = harvest_file(store, "copilot_cli", path)
    assert (r.status, r.messages) == ("read", 1)
    assert harvest_file(store, "copilot_cli", path).status == "unchanged"
    assert [(m.kind, m.text) for m in store.sessions.messages("copilot_cli:s1")] == [
        ("prompt", "how do I install dependencies?"),
        ("answer", "Run `npm install`."),
    ]


def test_schema_drift_unknown_types_and_missing_fields(tmp_path: Path) -> None:
    path = write_events(
        tmp_path / "s2" / "events.jsonl",
        [
            ev("session.start", {"sessionId": "s2"}, 1),  # no context, version or model
            ev("session.hologram", {"whatever": 1}, 2),  # a type from the future
            {"type": "user.message", "data": {"content": "fix the build"}},  # no id / timestamp
            ev("assistant.message", {"content": "Fixed it."}, 4),  # no messageId, no toolRequests
            ev("tool.execution_complete", {"toolCallId": "c1"}, 5),  # no success / result
            {"kind": "not-an-event"},
            ev(
                "assistant.message",
                {"messageId": "m9", "toolRequests": [{"name": "bash"}, "junk"]},
                7,
            ),
        ],
    )
    res = parse_file(path)
    (sess,) = res.sessions
    assert sess.project is None
    assert [(m.kind, m.text, m.tool_names) for m in sess.messages] == [
        ("prompt", "fix the build", []),
        ("answer", "Fixed it.", []),
        ("tool", "", []),
        ("answer", "", ["bash"]),
    ]
    assert res.skipped == {"unknown_type:session.hologram": 1, "unknown_record": 1}


def test_headless_and_self_generated(tmp_path: Path) -> None:
    path = write_events(
        tmp_path / "s3" / "events.jsonl",
        [
            ev("session.start", {"sessionId": "s3"}, 1),
            ev("user.message", {"content": "[skillopt-sleep replay] run the tests"}, 2),
            ev(
                "system.message",
                {"role": "system", "content": "You are running in non-interactive mode"},
                3,
            ),
        ],
    )
    (sess,) = parse_file(path).sessions
    assert sess.headless and sess.self_generated


# ---------------------------------------------------------------------------- the real CLI
def copilot_binary() -> str:
    return agent_binary("copilot")


@pytest.mark.cli
def test_real_copilot_sessions_are_harvested_with_the_correction(
    tmp_path: Path, store: Store
) -> None:
    from skillopt_sleep.simulator import serve

    exe = copilot_binary()
    home, work = tmp_path / "cphome", tmp_path / "project"
    home.mkdir()
    work.mkdir()
    (work / "hello.txt").write_text("hi\n")
    with serve("demo", api_key="sim-key") as sim:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": sim.url + "/v1",
            "COPILOT_PROVIDER_API_KEY": "sim-key",
            "COPILOT_MODEL": "sim",
            "COPILOT_AUTO_UPDATE": "false",
        }

        def run(*args: str) -> str:
            proc = subprocess.run(
                [exe, *args, "-s", "--allow-all-tools"],
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert proc.returncode == 0, proc.stderr[-2000:]
            return proc.stdout.strip()

        assert run("-p", "list the files") == "The project files are listed above."  # a tool call
        assert (
            run("-p", "how do I install dependencies?") == "Run `npm install` in the project root."
        )
        run("--continue", "-p", "no, use pnpm instead of npm")  # a follow-up correction

    root = home / ".copilot" / "session-state"
    report = harvest(store, only("copilot_cli", root))
    acc = report.sources["copilot_cli"]
    assert (acc.files_seen, acc.sessions_new) == (2, 2)
    assert acc.lines_skipped["system_message"] >= 2 and not any(
        k.startswith("unknown") for k in acc.lines_skipped
    )
    sessions = {s.id: s for s in store.sessions.all()}
    assert {s.project for s in sessions.values()} == {str(work)}
    assert all(s.headless for s in sessions.values())
    by_first = {store.sessions.messages(sid)[0].text: sid for sid in sessions}
    tool_sid = by_first["list the files"]
    assert [(m.kind, m.tool_names) for m in store.sessions.messages(tool_sid)][:3] == [
        ("prompt", []),
        ("answer", ["bash"]),
        ("tool", []),
    ]
    assert "hello.txt" in store.sessions.messages(tool_sid)[2].text
    plain = store.sessions.messages(by_first["how do I install dependencies?"])
    assert [(m.kind, m.text) for m in plain if m.kind != "tool"] == [
        ("prompt", "how do I install dependencies?"),
        ("answer", "Run `npm install` in the project root."),
        ("prompt", "no, use pnpm instead of npm"),
        (
            "answer",
            "I would start by reading the README in the project root. You asked: no, use pnpm instead of npm",
        ),
    ]
    # nothing injected: no <current_datetime> wrapper, no system prompt
    assert not any(
        "current_datetime" in m.text or "GitHub Copilot CLI" in m.text
        for sid in sessions
        for m in store.sessions.messages(sid)
    )

    # the sessions were written with `copilot -p` (headless): mined only when asked to
    report = mine(store, Settings(project=work, min_sessions=1, mine_headless=True))
    task = next(t for t in report.tasks if t.intent == "how do I install dependencies?")
    assert task.corrections == ["no, use pnpm instead of npm"]
    assert {(c.kind, c.value) for c in task.checks} >= {
        ("contains", "pnpm"),
        ("not_contains", "npm"),
    }
