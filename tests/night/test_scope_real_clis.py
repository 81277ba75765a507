"""A rule scoped to its task family, through the real agent CLIs (issue 26): a user corrected
the length of their commit messages; the night, replaying through ``claude -p`` / ``codex
exec`` against a literal-minded simulator that obeys every rule it reads, stages the rule for
commit messages only, and after adopt the real CLI still answers the user's other requests
whole while its commit messages are short."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from skillopt_sleep import agents, paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.delivery.document import all_rules
from skillopt_sleep.demo import demo_settings
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.clis import require_cli
from tests.helpers.deployed import MODEL, SIM_KEY, ask
from tests.helpers.scope import CODE, COMMIT, COMMITS, FUNCTION
from tests.helpers.scope import PERSONA as SCOPE_PERSONA

pytestmark = pytest.mark.cli

PERSONA = tomllib.loads(
    SCOPE_PERSONA.replace(
        'name = "scope-test"\nmodels = []', f'name = "scope-cli"\nmodels = ["{MODEL}"]'
    )
)


@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_the_scoped_rule_leaves_the_other_answers_whole_through_the_real_cli(
    agent: str, tmp_path: Path, isolated_home: Path, cli_path: None
) -> None:
    require_cli("claude" if agent == "claude_code" else "codex")
    project = (tmp_path / "webapp").resolve()
    project.mkdir()
    # the user's sessions, in this agent's log format
    source = "claude_code" if agent == "claude_code" else "codex"
    write_conversations(isolated_home, project, [(source, turns) for _, turns in COMMITS + CODE])
    store = Store(paths.db_path())
    with serve(persona_from_dict(PERSONA), api_key=SIM_KEY) as sim:
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
                "gate_samples": 1,  # no noise probe: one replay fewer through the CLI
                "sources": {source: {}},
                "document": {"kind": "memory", "agent": agent},
                "target": {"name": agent, **backend},
                "optimizer": {"name": "openai_compatible", **backend, "base_url": sim.url + "/v1"},
            },
        )
        result = run_night(store, settings)
        assert result.status == "succeeded", (result.summary, result.error)
        done = adopt(store, result.proposal_id)
        live = Path(done.target_path)
        assert live == agents.get_agent(agent).user_memory_files()[0]
        assert all_rules(live.read_text("utf-8")) == [
            "When writing a commit message: keep answers under 50 characters."
        ]
        # the collateral gate replayed the user's code task through the CLI, unharmed
        edits = store.db.execute(
            "select status, reason from edits where night_id = ?", [result.night_id]
        ).fetchall()
        assert any(st == "applied" and "no harm to" in why for st, why in edits), edits

        # the user's later requests, through the real CLI with the adopted memory
        code = ask(agent, sim.url, project, CODE[0][1][0][0])
        assert FUNCTION.strip() in code.strip(), code
        commit = ask(agent, sim.url, project, "write a commit message for the timeout change")
        assert commit.strip() == COMMIT[:50].rstrip(), commit
