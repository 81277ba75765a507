"""Every agent the user uses gets the learning, with the pinned real CLIs against the simulator.

The user asked the recurring tasks in Claude Code and in Codex. The night trains Claude Code's
memory file through the real ``claude`` CLI and certifies Codex's copy through the real
``codex`` CLI (``deliver.backends.codex``), each with its document where that CLI finds it.
After ``adopt --all-agents`` the real codex CLI, run in the project folder as the user would,
sends a request that carries the rule at the very place the certification replays carried it,
and answers by it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillopt_sleep import agents, paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt_group
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.deployed import MODEL, PERSONA, SIM_KEY, ask, place_of
from tests.helpers.night import NO_COLLATERAL

pytestmark = pytest.mark.cli


def test_codex_gets_its_own_certified_copy_and_the_real_codex_cli_answers_by_it(
    tmp_path: Path, isolated_home: Path, cli_path: None
) -> None:
    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS)  # claude_code and codex
    store = Store(paths.db_path())
    with serve(persona_from_dict(PERSONA), api_key=SIM_KEY, full_log=True) as sim:
        common = {"model": MODEL, "api_key": SIM_KEY, "max_retries": 0, "timeout": 90}
        settings = load_settings(
            Path("/nonexistent/config.toml"),
            **{
                **demo_settings(isolated_home, project, sim.url + "/v1"),
                **NO_COLLATERAL,
                "document": {"kind": "memory", "agent": "claude_code"},
                "target": {"name": "claude_code", "base_url": sim.url, **common},
                "optimizer": {
                    "name": "openai_compatible",
                    "base_url": sim.url + "/v1",
                    **common,
                },
                "deliver": {
                    "backends": {"codex": {"name": "codex", "base_url": sim.url + "/v1", **common}}
                },
            },
        )
        result = run_night(store, settings)
        assert result.status == "succeeded", (result.summary, result.error)
        night_log = list(sim.stats.requests)
        [copy] = result.summary.copies
        assert copy.agent == "codex" and copy.backend == "codex" and copy.status == "staged"
        # certified on the tasks the user asked Codex, each its val ask
        certified = {
            r.task_id
            for r in store.rollouts.of_night(result.night_id, "val")
            if r.phase == "certify after codex"
        }
        assert copy.certified_on == "val" and len(certified) == copy.tasks == 3
        assert copy.before is not None and copy.after is not None and copy.after > copy.before

        adopted = adopt_group(store, str(result.proposal_id))
        claude_md, agents_md = (
            agents.get_agent(a).user_memory_files()[0] for a in ("claude_code", "codex")
        )
        assert [a.target_path for a in adopted] == [str(claude_md), str(agents_md)]
        rule = next(line for line in agents_md.read_text().splitlines() if "pnpm" in line)
        rule = rule.lstrip("- ").strip()

        # the copy was certified through codex itself: its requests carry the rule
        certified = [
            r["body"]
            for r in night_log
            if r.get("role") == "target"
            and r.get("endpoint") == "/responses"  # codex speaks the Responses API
            and rule in json.dumps(r.get("body") or {})
        ]
        assert certified, "no codex replay carried the rule"
        certify_place = place_of(certified[-1], rule)

        sim.stats.reset()
        answer = ask("codex", sim.url, project)
        bodies = [r["body"] for r in sim.stats.requests if r.get("role") == "target"]
    assert bodies and all(rule in json.dumps(b) for b in bodies)
    assert place_of(bodies[0], rule) == certify_place  # the same place, the same framing
    assert "pnpm" in answer, answer
