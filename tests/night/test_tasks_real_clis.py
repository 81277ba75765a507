"""Task identity and headless sessions, on sessions the pinned real CLIs write
(``claude -p``, ``codex exec``) against the simulator: exactly one task per recurring request,
a near-duplicate carrying a redacted token merged into its task, a follow-up that amends the
answer never mined as a task, the pnpm task corrected in two sessions of two agents learnable
(it trains; its next occurrence validates), and every such session dropped by default as
headless, with the reason, in ``tasks`` and ``status``."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.config import Settings
from skillopt_sleep.mining.mine import mine
from skillopt_sleep.mining.split import views
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.status import collect_status
from skillopt_sleep.store import Store
from tests.helpers.deployed import PERSONA, SIM_KEY, ask

pytestmark = pytest.mark.cli

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
#: (agent, the user's request, the user's follow-up in the same session or None)
SESSIONS = [
    (
        "claude_code",
        "write a commit message for the staged changes",
        "no, use the imperative mood and keep it under 50 characters",
    ),
    # an amendment with no "no" in front: a correction by its role, never a task
    ("codex", "Write a commit message for the staged changes", "use the imperative mood"),
    ("claude_code", "run the tests with pytest", None),
    ("codex", "run the pytest tests please", None),
    ("claude_code", "how do I install the dependencies?", "no, use pnpm, not npm"),
    ("codex", "how do I install the dependencies", "use pnpm instead of npm"),
    ("claude_code", "add a unit test for parse_date", None),
    (
        "claude_code",
        f"add a unit test for parse_date in dates.py (my token is {TOKEN} if you need it)",
        None,
    ),
]


def test_one_task_per_recurring_request_and_headless_runs_are_not_mined_by_default(
    tmp_path: Path, isolated_home: Path, cli_path: None
) -> None:
    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    with serve(persona_from_dict(PERSONA), api_key=SIM_KEY) as sim:
        for agent, prompt, follow_up in SESSIONS:
            ask(agent, sim.url, project, prompt)
            if follow_up:
                ask(agent, sim.url, project, follow_up, more=True)
    store = Store(paths.db_path())
    # the agents' sources at their default places in the sandbox HOME
    base = {"project": str(project), "sources": {"claude_code": {}, "codex": {}}}
    harvest(store, Settings(**base))
    sessions = store.sessions.all()
    assert len(sessions) == len(SESSIONS) and all(s.headless for s in sessions)

    # by default: the `-p` / `exec` runs are a script's requests, not the user's
    report = mine(store, Settings(**base))
    assert report.tasks == [] and report.dropped == {"headless_session": len(SESSIONS)}
    assert collect_status(store).counts.headless == len(SESSIONS)

    # standing in for the user's own sessions (the real CLIs write interactive sessions
    # only on a terminal): exactly one task per recurring request
    report = mine(store, Settings(**base, mine_headless=True))
    assert "headless_session" not in report.dropped
    by = {t.intent: t for t in report.tasks}
    assert sorted(by) == [
        "add a unit test for parse_date",
        "how do I install the dependencies?",
        "run the tests with pytest",
        "write a commit message for the staged changes",
    ], sorted(by)
    assert all(len(t.occurrences) == 2 and len(t.sessions) == 2 for t in by.values())
    # the near-duplicate with the redacted token is the same request
    parse_date = by["add a unit test for parse_date"]
    assert "[REDACTED:github_token]" in parse_date.occurrences[1].prompt
    assert TOKEN not in str(store.tasks.all())
    # both follow-ups of the commit task are its corrections, neither a task of its own
    commit = by["write a commit message for the staged changes"]
    assert commit.corrections == [
        "no, use the imperative mood and keep it under 50 characters",
        "use the imperative mood",
    ]
    assert report.dropped.get("correction_by_role") == 1
    # the pnpm task, corrected in two sessions of two agents: it trains on the first and is
    # validated on the next time it was asked (never locked in a held-out split)
    pnpm = by["how do I install the dependencies?"]
    assert {s.split(":")[0] for s in pnpm.sessions} == {"claude_code", "codex"}
    assert [o.corrected for o in pnpm.occurrences] == [True, True]
    assert pnpm.split == "train" and [o.split for o in pnpm.occurrences] == ["train", "val"]
    replayed = views(report.tasks)
    assert any(v.split == "train" and v.intent == pnpm.intent for v in replayed)
    keys = [v.occurrences[0].key for v in replayed]
    assert len(keys) == len(set(keys))  # no occurrence in two roles
