"""Certified = deployed, with the pinned real CLIs against the simulator on loopback.

For Claude Code, Codex, Copilot, OpenCode and Pi: the user works with the real CLI in a sandbox HOME (a
recurring task asked in sessions of its own, a correction as a follow-up turn of the session it
corrects, sent by continuing that session); the night harvests and mines what the CLI wrote and
trains the agent's memory file (the default document) by replaying every task through that
agent's own CLI; after ``adopt`` the same real CLI, run in the project folder as the user
would, sends a request that carries the learned rule at the very place the replays carried it
(checked in the simulator's full request log), and its answer follows the rule. The same
adopted text in a file the CLI does not load changes nothing, so this test fails when the
document is deployed where the agent does not look.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep import agents, paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.delivery.document import Document
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.cli_run import skillopt_in_process
from tests.helpers.deployed import (
    ASK,
    MODEL,
    PERSONA,
    SIM_KEY,
    TIMEOUT,
    USER_SESSIONS,
    ask,
    assert_in_scope_with_live_tools,
    assert_trained_through,
    place_of,
    stated_folder,
    write_user_sessions,
)
from tests.helpers.night import NO_COLLATERAL

pytestmark = pytest.mark.cli


def turn_bodies(agent: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bodies of the CLI's own turn (OpenCode also asks, without tools, for a title)."""
    bodies = [r["body"] for r in requests if r.get("role") == "target"]
    return [b for b in bodies if agent != "opencode" or b.get("tools")]


@pytest.mark.parametrize("agent", ["claude_code", "codex", "copilot", "opencode", "pi"])
def test_the_adopted_memory_reaches_the_real_cli_as_the_night_replayed_it(
    agent: str, tmp_path: Path, isolated_home: Path, cli_path: None
) -> None:
    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    store = Store(paths.db_path())
    with serve(persona_from_dict(PERSONA), api_key=SIM_KEY, full_log=True) as sim:
        write_user_sessions(agent, sim.url, project)
        sim.stats.reset()
        backend = {
            "base_url": sim.url + ("" if agent == "claude_code" else "/v1"),
            "model": MODEL,
            "api_key": SIM_KEY,
            "max_retries": 0,
            "timeout": 90,
            "workers": 2,
        }
        settings = load_settings(
            Path("/nonexistent/config.toml"),
            **{
                **demo_settings(isolated_home, project, sim.url + "/v1"),
                **NO_COLLATERAL,
                # two edits, the persona's order: the derived pnpm rule and the harmful one,
                # which the gate must reject through this CLI's replays (each further edit is
                # one more gate of real-CLI replays)
                "edit_budget": 2,
                # no noise probe (one more val replay through the CLI; the probe through real
                # CLIs is in test_night_real_clis.py's claude and copilot nights)
                "gate_samples": 1,
                # this agent's sources at their default places in the sandbox HOME, where its
                # CLI wrote the sessions (the default sources stay on: no one else wrote any)
                "sources": {source: {} for source in agents.get_agent(agent).sources},
                # the user's sessions here are written with `claude -p` / `codex exec` /
                # `copilot -p` (the only way a test drives the real CLIs), which are headless
                # runs and not mined by default: this test stands in for a user's own sessions
                "mine_headless": True,
                "document": {"kind": "memory", "agent": agent},
                "target": {"name": agent, **backend},
                "optimizer": {"name": "openai_compatible", **backend, "base_url": sim.url + "/v1"},
            },
        )
        result = run_night(store, settings)
        assert result.status == "succeeded", (result.summary, result.error)
        night_log = list(sim.stats.requests)
        # every replay went through this CLI, its tokens and time from the CLI's own output
        fresh = assert_trained_through(store, result, agent, min_input_tokens=100)
        assert all(0 < r["seconds"] < 60 for r in fresh)
        # the replays wrote nothing into the user's state of the CLI: nothing new to harvest
        assert sum(s.sessions_new for s in harvest(store, settings).sources.values()) == 0

        # the night trained from the sessions the CLI wrote, read as the CLI wrote them: one
        # session per task asked, the correction in the session it corrects
        sessions = store.sessions.all()
        assert len(sessions) == len(USER_SESSIONS), [s.key for s in sessions]
        assert {s.source for s in sessions} <= set(agents.get_agent(agent).sources)
        assert all(s.project == str(project) for s in sessions)
        tasks = {t.intent: t for t in store.tasks.all()}
        assert len(tasks) == 3 and all(t.split for t in tasks.values()), tasks
        install = next(t for t in tasks.values() if "install" in t.intent)
        assert len(install.sessions) == 2 and install.corrections == ["no, use pnpm, not npm"]
        assert all(t.corrections for t in tasks.values())

        live = agents.get_agent(agent).user_memory_files()[0]
        assert not live.exists()  # staged, not written: nothing live changed yet
        adopt(store, result.proposal_id)
        # the tasks all come from one project: the rules are that project's section of the
        # memory file every project shares
        assert result.summary.section == str(project)
        text = live.read_text()
        assert f"When working in `{project}`" in text
        rules = Document.parse(text, section=result.summary.section).rules
        assert rules and any("pnpm" in r for r in rules), rules
        rule = next(r for r in rules if "pnpm" in r)
        replays = [
            r["body"]
            for r in night_log
            if r.get("role") == "target" and rule in json.dumps(r.get("body") or {})
        ]
        assert replays, "no replay carried the learned rule"
        replay_place = place_of(replays[-1], rule)

        sim.stats.reset()
        answer = ask(agent, sim.url, project)
        bodies = turn_bodies(agent, sim.stats.requests)
        assert bodies and all(rule in json.dumps(b) for b in bodies)
        assert place_of(bodies[0], rule) == replay_place  # the same place, the same framing
        assert "pnpm" in answer, answer
        # each replay ran where the block's scope holds (a copy of the project, named like
        # it), with the tools the live agent has
        assert stated_folder(bodies[0]) == str(project)
        assert_in_scope_with_live_tools(replays, bodies[0], rule)

        # the same text where the CLI does not look: the rule never reaches the model
        live.rename(live.with_name("NOT-LOADED.md"))
        sim.stats.reset()
        answer = ask(agent, sim.url, project)
        bodies = turn_bodies(agent, sim.stats.requests)
        assert bodies and not any(rule in json.dumps(b) for b in bodies)
        assert "npm install" in answer and "pnpm" not in answer, answer


def _cli(*args: str) -> dict[str, Any]:

    proc = skillopt_in_process(*args, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if "--json" in args else {}


def test_in_the_wild_the_adopted_memory_is_seen_reaching_real_sessions_and_flagged_when_not(
    tmp_path: Path, isolated_home: Path, cli_path: None
) -> None:
    """After adopt, sessions the real claude CLI writes are harvested: status --json shows
    how many asked the task again, how many the document reached, and their pass rate; a
    document that stops reaching the agent is flagged after three such sessions."""
    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS)
    store = Store(paths.db_path())
    with serve(persona_from_dict(PERSONA), api_key=SIM_KEY, full_log=True) as sim:
        backend = {"base_url": sim.url, "model": MODEL, "api_key": SIM_KEY, "max_retries": 0}
        settings = load_settings(
            Path("/nonexistent/config.toml"),
            **{
                **demo_settings(isolated_home, project, sim.url + "/v1"),
                **NO_COLLATERAL,
                "document": {"kind": "memory", "agent": "claude_code"},
                "target": {"name": "claude_code", **backend},
                "optimizer": {**backend, "name": "openai_compatible", "base_url": sim.url + "/v1"},
            },
        )
        result = run_night(store, settings)
        assert result.status == "succeeded", result.summary
        adopt(store, result.proposal_id)

        assert "pnpm" in ask("claude_code", sim.url, project)  # a real session
        _cli("harvest", "--json")
        [wild] = _cli("status", "--json")["in_the_wild"]
        assert wild["proposal_id"] == result.proposal_id and wild["mode"] == "memory"
        assert (wild["sessions"], wild["reached"], wild["passed"]) == (1, 1, 1)
        assert wild["pass_rate"] == 1.0 and wild["flag"] is None
        # the builder-written sessions of the demo asked before adopt, answered with npm
        assert wild["before_sessions"] >= 1 and wild["before_pass_rate"] == 0.0

        live = agents.get_agent("claude_code").user_memory_files()[0]
        # the user's own text around the block is theirs to edit: the rules still reach claude
        live.write_text(live.read_text() + "\n# My own notes\n")
        assert "pnpm" in ask("claude_code", sim.url, project)
        _cli("harvest", "--json")
        [wild] = _cli("status", "--json")["in_the_wild"]
        assert (wild["sessions"], wild["reached"], wild["flag"]) == (2, 2, None)

        live.rename(live.with_name("NOT-LOADED.md"))  # the document no longer reaches claude
        for _ in range(3):
            assert "pnpm" not in ask("claude_code", sim.url, project)
        _cli("harvest", "--json")
        [wild] = _cli("status", "--json")["in_the_wild"]
    assert (wild["sessions"], wild["reached"]) == (5, 2)  # unreached sessions are no evidence
    assert wild["pass_rate"] == 1.0
    assert wild["flag"] and "no longer the file's managed block" in wild["flag"]
    assert "last 3" in wild["flag"]


def test_a_task_corrected_in_opencode_and_in_pi_is_mined_as_one_task(
    tmp_path: Path, isolated_home: Path, cli_path: None
) -> None:
    """The same request asked once with the real opencode and once with the real pi, each
    corrected in its own session: both harvesters read them and the miner makes one recurring
    task of the two sessions, with both corrections."""
    from skillopt_sleep.mining.mine import mine
    from skillopt_sleep.sources.ingest import harvest

    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    store = Store(paths.db_path())
    with serve(persona_from_dict(PERSONA), api_key=SIM_KEY) as sim:
        ask("opencode", sim.url, project, ASK)
        ask("opencode", sim.url, project, "no, use pnpm, not npm", more=True)
        ask("pi", sim.url, project, "install the dependencies please")
        ask("pi", sim.url, project, "no, use pnpm instead of npm", more=True)
    settings = load_settings(
        Path("/nonexistent/config.toml"),
        **{
            **demo_settings(isolated_home, project, "http://127.0.0.1:9/v1"),
            **NO_COLLATERAL,
            "sources": {"opencode": {}, "pi": {}},
            # `opencode run` sessions are headless (docs/sources.md): this test stands in for
            # the user's own sessions
            "mine_headless": True,
        },
    )
    report = harvest(store, settings)
    assert report.sources["opencode"].sessions_new == 1
    assert report.sources["pi"].sessions_new == 1
    mine(store, settings)
    sessions = {s.id: s.source for s in store.sessions.all()}
    tasks = store.tasks.all()
    [install] = [t for t in tasks if "install" in t.intent]
    assert sorted(sessions[s] for s in install.sessions) == ["opencode", "pi"]
    assert sorted(install.corrections) == ["no, use pnpm instead of npm", "no, use pnpm, not npm"]
