"""A replay is graded on what the agent did, and what it may not do is stopped.

Through the pinned real CLIs against the simulator on loopback: the replay offers the live
agent's tools in a copy of the project; an agent that writes a test file is judged on that
file (a whole one passes, one cut in half fails whatever its text says); one that writes
outside its copy is stopped by the CLI's own permission mode, the stop is recorded with the
answer, and the replay (and so the night) goes on."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from skillopt_sleep.backends import get_backend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.models import Check, Placement, Task
from skillopt_sleep.night.replay import Cost, Meter, Replayer
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.store import Store
from tests.helpers.clis import require_cli

pytestmark = pytest.mark.cli

KEY = "sk-sim-acts-0123456789"
WHOLE = 'from slug import slugify\n\n\ndef test_slugify():\n    assert slugify("A B") == "a-b"\n'
CUT = 'from slug import slugify\n\n\ndef test_slugify():\n    assert slugify("A B") == ("a-b"\n'
#: (request, tool, its input) of each task; the CLI's own name of its file-writing tool
WRITE = {
    "claude_code": ("Write", "file_path", "content"),
    "copilot": ("create", "path", "file_text"),
    "opencode": ("write", "filePath", "content"),
    "pi": ("write", "path", "content"),
}
URL_SUFFIX = {"claude_code": ""}


def _codex_write(path: str, text: str) -> dict[str, str]:
    """Codex writes a file with a shell command (its ``exec_command``)."""
    return {"cmd": f"printf %s {shlex.quote(text)} > {shlex.quote(path)}"}


def _persona(agent: str, outside: Path) -> dict:
    tool, path_key, text_key = WRITE.get(agent, ("exec_command", "", ""))
    answers = [
        # at the copy's top (Copilot's create makes no folder)
        ("unit test for slugify", "test_slugify.py", WHOLE),
        ("unit test for the slug module", "test_slug.py", CUT),
        ("save the notes", str(outside), "my notes\n"),
    ]
    return {
        "name": "acts",
        "models": [],
        "default_answer": "ok",
        "answers": [
            {
                "match": match,
                "text": "Done: the file is written.",
                "tool": [tool],
                "tool_input": (
                    _codex_write(path, text)
                    if agent == "codex"
                    else {path_key: path, text_key: text}
                ),
            }
            for match, path, text in answers
        ],
    }


def _task(n: int, intent: str) -> Task:
    return Task(
        id=f"t{n}",
        intent=intent,
        project="/home/user/webapp",
        split="val",
        checks=[Check(kind="contains", value="slugify")] if "slug" in intent else [],
        rubric="" if "slug" in intent else "the notes are saved",
    )


@pytest.mark.parametrize("agent", sorted([*WRITE, "codex"]))
def test_a_written_test_file_is_graded_and_a_write_outside_the_copy_is_stopped(
    agent: str, tmp_path: Path, isolated_home: Path, cli_path: None
) -> None:
    require_cli({"claude_code": "claude"}.get(agent, agent))
    outside = tmp_path / "outside" / "notes.md"
    outside.parent.mkdir()
    store = Store(tmp_path / "t.db")
    tasks = [
        _task(1, "add a unit test for slugify"),
        _task(2, "add a unit test for the slug module"),
        _task(3, "save the notes in my home folder"),
    ]
    memory = "CLAUDE.md" if agent == "claude_code" else "AGENTS.md"
    with serve(persona_from_dict(_persona(agent, outside)), api_key=KEY) as sim:
        config = BackendConfig(
            name=agent,
            base_url=sim.url + URL_SUFFIX.get(agent, "/v1"),
            model="sim-demo",
            api_key=KEY,
            max_retries=0,
            timeout=90,
        )
        meter = Meter(
            get_backend(config), store, Cost(), max_calls=10, max_tokens=10**9, role="target"
        )
        replayer = Replayer(
            meter,
            None,
            metric="hard",
            place=lambda doc: Placement(
                agent=agent, scope="project", path=memory, mode="memory", text=doc
            ),
        )
        got = replayer.run(tasks, "# rules\n")
    whole, cut, notes = got["t1"], got["t2"], got["t3"]
    # judged on the test file it wrote (its text alone defines no test): whole, it passes
    assert whole.score == 1.0, whole.checks
    assert "+++ b/test_slugify.py" in whole.answer and "def test_slugify" in whole.answer
    # the file cut in half fails as an answer cut off does, whatever the text says
    assert cut.score == 0.0
    assert any(c["kind"] == "whole" for c in cut.checks), cut.checks
    # the write outside the copy: stopped by the CLI, recorded, nothing written; the replay
    # ended normally (OpenCode ends its turn at a refused permission, the others answer)
    assert not outside.exists()
    if agent == "codex":
        # Codex's profile hides every path outside the copy (the command fails), and
        # `codex exec --json` reports no item for a command that failed: nothing to record
        assert "Stopped:" not in notes.answer and notes.answer.startswith("Done:")
    else:
        assert "Stopped:" in notes.answer and "notes.md" in notes.answer, notes.answer
    store.close()


def test_the_report_shows_what_the_agent_did_in_the_replays_of_the_proposed_document(
    tmp_path: Path, isolated_home: Path, cli_path: None
) -> None:
    """A night through the real ``claude``: the user's recurring task is answered by writing
    a test file; the proposal's report (and so ``show``) lists what the agent did in the val
    replay of the proposed document, the file's diff among it."""
    import json as _json

    from skillopt_sleep import paths
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.testing.sessions import write_conversations
    from tests.helpers.deployed import MODEL, PERSONA
    from tests.helpers.night import NO_COLLATERAL

    require_cli("claude")
    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    ask = "add a unit test for slugify"
    write_conversations(
        isolated_home,
        project,
        [
            *DEMO_CONVERSATIONS,
            ("claude_code", [(ask, "Done.", "no, use pnpm instead of npm and write the test")]),
            ("claude_code", [(f"please {ask}", "Done.", "no, use pnpm instead of npm")]),
        ],
    )
    persona = _json.loads(_json.dumps(PERSONA))
    persona["answers"].insert(
        0,
        {
            "match": "unit test for slugify",
            "text": "Done: run it with `npm test`.",
            "tool": ["Write"],
            "tool_input": {"file_path": "test_slugify.py", "content": WHOLE},
        },
    )
    store = Store(paths.db_path())
    with serve(persona_from_dict(persona), api_key=KEY) as sim:
        common = {"model": MODEL, "api_key": KEY, "max_retries": 0, "timeout": 90}
        settings = load_settings(
            Path("/nonexistent/config.toml"),
            **{
                **demo_settings(isolated_home, project, sim.url + "/v1"),
                **NO_COLLATERAL,
                "edit_budget": 1,
                "gate_samples": 1,
                "document": {"kind": "memory", "agent": "claude_code"},
                "deliver": {"agents": "document"},
                "target": {"name": "claude_code", "base_url": sim.url, **common},
                "optimizer": {"name": "openai_compatible", "base_url": sim.url + "/v1", **common},
            },
        )
        result = run_night(store, settings)
    assert result.status == "succeeded", (result.summary, result.error)
    row = store.proposals.get(str(result.proposal_id))
    assert row is not None
    report = (Path(row.dir) / "report.md").read_text("utf-8")
    assert "## What the agent did (replays of the proposed document)" in report
    section = report.split("## What the agent did", 1)[1].split("## Diff", 1)[0]
    assert "unit test for slugify" in section and "+++ b/test_slugify.py" in section
    assert "def test_slugify" in section
    store.close()
