"""Real transcripts (item 8): the fixture builder runs each real CLI in a temporary HOME against
scripted simulator conversations — a plain question, a shell tool call, a correction then a
retry in a resumed session, and a replay carrying SELF_MARKER — and the harvesters are tested
on what the CLIs actually wrote. The replay session is the second line of defence of "never
harvest yourself": it is stored as ``self_generated`` and never reaches the miner.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skillopt_sleep.errors import UnknownNameError
from skillopt_sleep.sources import get_source
from skillopt_sleep.sources.base import SELF_MARKER
from skillopt_sleep.sources.ingest import harvest_file
from skillopt_sleep.store import Store
from skillopt_sleep.testing.transcripts import CORRECTION, build_transcripts
from tests.helpers.clis import NODE_BIN, require_cli

pytestmark = pytest.mark.cli


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    for binary in ("claude", "codex", "copilot"):
        require_cli(binary)
    root = tmp_path_factory.mktemp("transcripts")
    search = f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    result = build_transcripts(root / "home", root / "project", search_path=search)
    return root, result


def parse(source: str, path: Path):
    src = get_source(source)
    out = src.parse(path, path.read_bytes().splitlines(), {})
    assert len(out.sessions) == 1, out.sessions
    return out.sessions[0]


@pytest.mark.parametrize(
    "cli,source,tool", [("claude", "claude_code", "Bash"), ("codex", "codex", "exec_command")]
)
def test_harvesters_parse_the_real_transcripts(built, cli, source, tool):
    root, result = built
    b = result[cli]
    assert len(b.files) == 4
    sessions = {}
    for f in b.files:
        s = parse(source, f)
        sessions[s.key] = s
    by_name = {name: sessions[key] for name, key in b.sessions.items()}
    project = str(root / "project")
    for s in sessions.values():
        assert s.project == project and s.headless and s.model == "sim-demo"

    def prompts(s):
        return [m.text for m in s.messages if m.kind == "prompt"]

    def answers(s):
        return [m for m in s.messages if m.kind == "answer"]

    plain = by_name["plain"]
    assert prompts(plain) == ["how do I install the dependencies?"]
    assert answers(plain)[-1].text == "Run `npm install` in the project root."
    assert not plain.self_generated

    used = by_name["tool"]
    assert prompts(used) == ["list the files in this project"]
    assert [t for m in used.messages for t in m.tool_names] == [tool]
    results = [m for m in used.messages if m.kind == "tool"]
    assert results and "README.md" in results[0].text
    assert answers(used)[-1].text == "The project files are listed above."

    # a correction, then the retry, in one session continued with --resume / exec resume
    fixed = by_name["corrected"]
    assert prompts(fixed) == ["run the tests", CORRECTION, "run the tests"]
    texts = [m.text for m in answers(fixed)]
    assert texts[0] == "Run `npm test` to run the suite."
    assert texts[-1] == "Run `pnpm test` to run the suite."

    replay = by_name["replay"]
    assert replay.self_generated and prompts(replay)[0].startswith(SELF_MARKER)
    assert not any(s.self_generated for k, s in by_name.items() if k != "replay")


def test_replay_sessions_are_stored_but_never_mined(built, tmp_path):
    _, result = built
    store = Store(tmp_path / "db.sqlite")
    for cli, source in (("claude", "claude_code"), ("codex", "codex")):
        for f in result[cli].files:
            harvest_file(store, source, f)
    every = store.sessions.all(include_self=True)
    mined = store.sessions.all()
    assert len(every) == 8 and len(mined) == 6
    assert {r.key for r in every} - {r.key for r in mined} == {
        result["claude"].sessions["replay"],
        result["codex"].sessions["replay"],
    }


def test_copilot_transcripts(built):
    root, result = built
    b = result["copilot"]
    assert len(b.files) == 4
    by_id = {f.parent.name: f for f in b.files}
    events = {
        name: [json.loads(line) for line in by_id[sid].read_text().splitlines() if line]
        for name, sid in b.sessions.items()
    }
    users = {
        n: [e["data"]["content"] for e in ev if e["type"] == "user.message"]
        for n, ev in events.items()
    }
    assert users["plain"] == ["how do I install the dependencies?"]
    assert users["corrected"] == ["run the tests", CORRECTION, "run the tests"]
    assert users["replay"][0].startswith(SELF_MARKER)
    tools = [e["data"]["toolName"] for e in events["tool"] if e["type"] == "tool.execution_start"]
    assert tools == ["bash"]
    try:
        source = get_source("copilot_cli")
    except UnknownNameError:
        return  # the Copilot CLI harvester has not landed yet: the raw files are checked above
    parsed = {}
    for name, sid in b.sessions.items():
        out = source.parse(by_id[sid], by_id[sid].read_bytes().splitlines(), {})
        assert len(out.sessions) == 1, out.sessions
        parsed[name] = out.sessions[0]
    for name, s in parsed.items():
        assert s.key == b.sessions[name] and s.project == str(root / "project")
        assert s.self_generated == (name == "replay")
        assert [m.text for m in s.messages if m.kind == "prompt"] == users[name]
    assert [t for m in parsed["tool"].messages for t in m.tool_names] == ["bash"]
