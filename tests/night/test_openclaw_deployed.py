"""OpenClaw end to end with the real CLI (openclaw 2026.9.6 on Node 24.22.3, ``clis/node24``)
against the simulator on loopback: the user works with ``openclaw agent --local`` in a sandbox
HOME (each recurring task in a session of its own, a correction as the next turn of the session
it corrects); the ``openclaw`` source harvests the SQLite transcripts the CLI wrote; the night
mines them and trains OpenClaw's memory file (the workspace ``AGENTS.md``) by replaying every
task through ``openclaw agent exec`` (the derived rule certified, the harmful edit rejected by
the gate, the replays' tokens from OpenClaw's own output, nothing left in the user's OpenClaw
state to harvest); after ``adopt`` the user's own ``openclaw agent`` sends a
request that carries the learned rule at the very place the replays carried it, and its answer
follows the rule. The user has moved OpenClaw's workspace (``agents.defaults.workspace``), so
the live document is that workspace's ``AGENTS.md``. The same text where OpenClaw does not look
changes nothing.

About 20 real turns of 5-20 s each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep import agents, paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.delivery.document import Document
from skillopt_sleep.demo import demo_settings
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.store import Store
from tests.helpers.clis import agent_binary, write_openclaw_config
from tests.helpers.deployed import (
    MODEL,
    PERSONA,
    SIM_KEY,
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


def turn_bodies(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["body"] for r in requests if r.get("role") == "target"]


# its own sessions written by the real CLI, a whole night and the live turns through OpenClaw's
# 10–20 s turns: 100 s alone, more beside three other workers
@pytest.mark.timeout(900)
def test_openclaw_sessions_train_its_workspace_agents_md_and_the_adopted_rule_reaches_it(
    tmp_path: Path, isolated_home: Path
) -> None:
    agent_binary("openclaw")
    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    store = Store(paths.db_path())
    openclaw = agents.get_agent("openclaw")
    # the user moved OpenClaw's workspace (agents.defaults.workspace): the live document is
    # the AGENTS.md OpenClaw sends from there, not the default <state>/workspace/AGENTS.md
    moved = (tmp_path / "my-openclaw-workspace").resolve()
    write_openclaw_config(openclaw.home(), "http://127.0.0.1:9/v1", MODEL, "SIM_KEY", moved)
    live = openclaw.user_memory_files()[0]
    assert live == moved / "AGENTS.md"
    with serve(persona_from_dict(PERSONA), api_key=SIM_KEY, full_log=True) as sim:
        write_user_sessions("openclaw", sim.url, project)
        # OpenClaw's first run made the workspace, its AGENTS.md from a template among them
        before = live.read_bytes()
        sim.stats.reset()
        backend = {
            "base_url": sim.url + "/v1",
            "model": MODEL,
            "api_key": SIM_KEY,
            "max_retries": 0,
            "timeout": 120,
            "workers": 2,
        }
        settings = load_settings(
            Path("/nonexistent/config.toml"),
            **{
                # OpenClaw works in its workspace, whatever folder it is started in: the
                # sessions' project is the workspace, and so is the night's
                **demo_settings(isolated_home, live.parent, sim.url + "/v1"),
                **NO_COLLATERAL,
                # two edits, the persona's order: the derived pnpm rule and the harmful one,
                # which the gate must reject through OpenClaw's replays (each further edit
                # is one more gate of real-CLI replays)
                "edit_budget": 2,
                # no noise probe: one more val replay through OpenClaw's slow turns
                "gate_samples": 1,
                "sources": {"openclaw": {}},
                # `openclaw agent` turns are headless (docs/sources.md): this test stands in
                # for the user's own sessions
                "mine_headless": True,
                "document": {"kind": "memory", "agent": "openclaw"},
                "target": {"name": "openclaw", "executable": agent_binary("openclaw"), **backend},
                "optimizer": {"name": "openai_compatible", **backend},
            },
        )
        # the transcripts the CLI wrote: one session per task asked, the correction in the
        # session it corrects, all in OpenClaw's workspace
        report = harvest(store, settings)
        assert report.sources["openclaw"].sessions_new == len(USER_SESSIONS), report
        sessions = store.sessions.all()
        assert len(sessions) == len(USER_SESSIONS), [s.key for s in sessions]
        assert {s.source for s in sessions} == {"openclaw"}
        # each an `openclaw agent` turn, as its runtime trace says: headless
        assert all(s.headless for s in sessions)
        workspace = str(live.parent)
        assert {s.project for s in sessions} == {workspace}
        result = run_night(store, settings)
        assert result.status == "succeeded", (result.summary, result.error)
        night_log = list(sim.stats.requests)
        assert sim.stats.by_role["target"] > 0
        # every replay went through OpenClaw, its tokens from the CLI's own usage output
        assert_trained_through(store, result, "openclaw", min_input_tokens=1000)
        # the replays wrote nothing into the user's OpenClaw state: nothing new to harvest
        assert harvest(store, settings).sources["openclaw"].sessions_new == 0
        assert len(store.sessions.all(include_self=True)) == len(USER_SESSIONS)
        tasks = {t.intent: t for t in store.tasks.all()}
        assert len(tasks) == 3 and all(t.split for t in tasks.values()), tasks
        install = next(t for t in tasks.values() if "install" in t.intent)
        assert len(install.sessions) == 2 and install.corrections == ["no, use pnpm, not npm"]

        assert live.read_bytes() == before  # staged, not written
        adopt(store, result.proposal_id)
        text = live.read_text()
        assert text.startswith(before.decode())  # OpenClaw's own text kept
        rules = Document.parse(text, section=result.summary.section).rules
        rule = next(r for r in rules if "pnpm" in r)
        replays = [
            r["body"]
            for r in night_log
            if r.get("role") == "target" and rule in json.dumps(r.get("body") or {})
        ]
        assert replays, "no replay carried the learned rule"
        replay_place = place_of(replays[-1], rule)

        sim.stats.reset()
        answer = ask("openclaw", sim.url, project)
        bodies = turn_bodies(sim.stats.requests)
        assert bodies and all(rule in json.dumps(b) for b in bodies)
        assert place_of(bodies[0], rule) == replay_place  # the same place, the same framing
        assert "pnpm" in answer, answer
        # OpenClaw works in its workspace: the live request names it, the block is scoped
        # to it, and each replay ran in a copy of it, with the tools the live agent has
        assert stated_folder(bodies[0]) == workspace
        assert result.summary.section == workspace
        # (but `openclaw`, the tool an `openclaw agent` turn asks OpenClaw's own config and
        # lifecycle changes with: an isolated `agent exec` turn does not offer it)
        assert_in_scope_with_live_tools(replays, bodies[0], rule, frozenset({"openclaw"}))

        # the same text where OpenClaw does not look: the rule never reaches the model
        live.rename(live.with_name("NOT-LOADED.md"))
        sim.stats.reset()
        answer = ask("openclaw", sim.url, project)
        bodies = turn_bodies(sim.stats.requests)
        assert bodies and not any(rule in json.dumps(b) for b in bodies)
        assert "npm install" in answer and "pnpm" not in answer, answer
