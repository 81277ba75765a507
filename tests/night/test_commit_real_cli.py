"""The issue's commit-message case end to end with the real ``claude`` CLI (issue 12, items 3
and 5): the CLI, against the simulator, runs ``git diff --staged`` in a real repository with
staged changes, answers in the past tense and too long; the user corrects it (the session
resumed), accepts the next answer. The harvested session gives one task whose checks pass
the accepted answer and fail the corrected one and "imperative mood", whose capsule holds the
real staged diff, and whose replay through the real CLI sees that diff.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest

from skillopt_sleep.backends import get_backend
from skillopt_sleep.config import BackendConfig, Settings
from skillopt_sleep.mining.judges import context_state, run_check
from skillopt_sleep.mining.mine import mine
from skillopt_sleep.night.replay import Cost, Meter, Replayer
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.sources.ingest import harvest_file
from skillopt_sleep.store import Store
from tests.helpers.clis import cli_env, require_cli
from tests.helpers.commit import ACCEPTED, CORRECTED, CORRECTION, GAMED, PROMPT

pytestmark = [pytest.mark.cli, pytest.mark.usefixtures("cli_path")]

KEY = "sk-sim-commit-0000"
WRITER = persona_from_dict(
    {
        "name": "commit-session",
        "default_answer": "Glad it helps.",
        "answers": [
            {
                "match": "commit message for the staged",
                "text": CORRECTED,
                "tool": "Bash",
                "tool_input": {"command": "git diff --staged"},
            },
            {"match": "imperative", "text": ACCEPTED},
        ],
    }
)
REPLAYER = persona_from_dict(
    {
        "name": "commit-replay",
        "answers": [{"match": "commit message", "text": "Update {changed_file}"}],
    }
)


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=project, check=True, capture_output=True, timeout=30)


def claude_session(exe: str, project: Path, url: str, turns: list[str]) -> None:
    env = cli_env(
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY=KEY,
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    session = ""
    for turn in turns:
        argv = [exe, "-p", "--output-format", "json", "--model", "sim-demo"]
        argv += ["--permission-mode", "dontAsk", "--tools", "Bash", "--allowedTools", "Bash"]
        argv += ["--resume", session] if session else []
        out = subprocess.run(
            argv, input=turn, env=env, cwd=project, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        session = json.loads(out.stdout)["session_id"]


def test_the_real_claudes_commit_session_gives_validated_checks_and_its_staged_diff(
    tmp_path: Path, isolated_home: Path
) -> None:
    exe = require_cli("claude")
    project = tmp_path / "proj"
    project.mkdir()
    git(project, "init", "-q")
    (project / "fetch_client.py").write_text(
        "RETRIES = 3\n\n\ndef fetch(url):\n    return retry(http.get, url)\n", encoding="utf-8"
    )
    git(project, "add", "fetch_client.py")
    with serve(WRITER, api_key=KEY) as sim:
        claude_session(exe, project, sim.url, [PROMPT, CORRECTION, "perfect, thanks"])
    store = Store(tmp_path / "t.db")
    for path in sorted((isolated_home / ".claude" / "projects").rglob("*.jsonl")):
        harvest_file(store, "claude_code", path)
    # the session was written with `claude -p` (headless): mined only when asked to
    (task,) = mine(store, Settings(mine_headless=True), now=dt.datetime.now(dt.UTC)).tasks
    assert task.intent == PROMPT

    # item 3: the checks pass the accepted answer, fail the corrected one and the gamed one
    assert [(c.kind, c.value) for c in task.checks] == [("imperative", ""), ("max_chars", "50")]
    assert all(
        c.controls == {"negative": "pass", "positive": "pass", "anti_gaming": "pass"}
        for c in task.checks
    )
    for answer, passes in ((ACCEPTED, True), (CORRECTED, False), (GAMED, False)):
        assert all(run_check(c, answer, []) for c in task.checks) is passes, answer

    # item 5: the capsule holds the real staged diff the CLI's Bash call printed
    assert task.context is not None and context_state(task) == "rebuilt"
    (seen,) = task.context.items
    assert seen.kind == "output" and seen.name == "git diff --staged"
    assert "diff --git a/fetch_client.py b/fetch_client.py" in seen.text
    assert "+RETRIES = 3" in seen.text

    # and a replay through the real CLI sees it (the simulator's request log)
    with serve(REPLAYER, api_key=KEY, full_log=True) as sim:
        config = BackendConfig(
            name="claude_code",
            base_url=sim.url,
            model="sim-demo",
            api_key=KEY,
            max_retries=0,
            timeout=60,
        )
        meter = Meter(
            get_backend(config), store, Cost(), max_calls=5, max_tokens=10**9, role="target"
        )
        (got,) = Replayer(meter, None, metric="hard").run([task], "").values()
        (asked,) = sim.stats.snapshot()["requests"]
    assert "+RETRIES = 3" in asked["context_full"]
    assert got.answer == "Update fetch_client.py" and got.hard == 1.0
    store.close()
