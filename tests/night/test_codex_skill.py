"""A Codex skill night through the real ``codex`` (against the simulator on loopback): the
candidate SKILL.md sits in the replay's throw-away ``CODEX_HOME``, Codex lists it, and the
model loads it as the live Codex does, by reading the file with its shell tool. A persona that
loads the listed skill makes the night certify it (val rises, the simulator saw the skill
loaded); one that never loads it leaves val unchanged and nothing is staged. Every skill
rollout says whether the skill was loaded (true / false, never "unknown")."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.delivery.document import SKILL_NAME
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.night.replay import Scored
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.clis import require_cli
from tests.helpers.night import NO_COLLATERAL

pytestmark = pytest.mark.cli

#: the key the real CLI sends to the simulator
KEY = "sk-sim-codex-night-0123456789"


def _night(tmp_path: Path, home: Path, load: str):
    require_cli("codex")
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(home, project, DEMO_CONVERSATIONS)
    demo = resources.files("skillopt_sleep.simulator").joinpath("personas/demo.toml")
    persona = tmp_path / "persona.toml"
    persona.write_text(demo.read_text("utf-8") + f'\n[skills]\nmatch = "{load}"\n')
    store = Store(paths.db_path())
    rollouts: list[Scored] = []
    with serve(persona, api_key=KEY, full_log=True) as sim:
        backend = {"model": "sim-demo", "api_key": KEY, "max_retries": 0, "timeout": 90}
        settings = load_settings(
            Path("/nonexistent/config.toml"),
            **{
                **demo_settings(home, project, sim.url),
                **NO_COLLATERAL,
                "document": {"kind": "managed_skill", "agent": "codex"},
                "target": {"name": "codex", "base_url": sim.url + "/v1", "workers": 2, **backend},
                "optimizer": {"name": "openai_compatible", "base_url": sim.url + "/v1", **backend},
            },
        )
        result = run_night(store, settings, on_rollout=rollouts.append)
        replays = [r for r in sim.stats.requests if r.get("role") == "target"]
    assert replays and all(r["endpoint"] == "/responses" for r in replays)
    return result, replays, rollouts, store


def test_a_skill_codex_loads_is_certified(tmp_path, isolated_home, cli_path):
    result, replays, rollouts, store = _night(tmp_path, isolated_home, "always")
    assert result.status == "succeeded", (result.summary, result.error)
    assert result.val_before is not None and result.val_after is not None
    assert result.val_after > result.val_before
    assert result.summary.delivery is not None and result.summary.delivery.mode == "skill"
    # codex listed the skill and the simulator saw it read (`cat <file>` via exec_command)
    assert all(r.get("skills") == [SKILL_NAME] for r in replays)
    assert [r for r in replays if r.get("skills_loaded") == [SKILL_NAME]]
    # every rollout says whether it loaded the skill; those of a skill with rules loaded it
    assert rollouts and all(r.skill_loaded in (True, False) for r in rollouts)
    assert any(r.skill_loaded is True for r in rollouts)
    recorded = store.rollouts.of_night(result.night_id)
    assert recorded and any('"Skill"' in (r.tool_calls or "") for r in recorded)


def test_a_skill_codex_never_loads_is_not_certified(tmp_path, isolated_home, cli_path):
    result, replays, rollouts, _store = _night(tmp_path, isolated_home, "never")
    assert result.status == "no_change" and result.proposal_id is None
    assert result.val_after == result.val_before
    assert result.summary.reason == "no edit passed the val gate"
    # listed in every replay, never read
    assert all(r.get("skills") == [SKILL_NAME] for r in replays)
    assert not [r for r in replays if r.get("skills_loaded")]
    assert not [r for r in replays if r.get("tool") == "exec_command"]
    assert rollouts and all(r.skill_loaded is False for r in rollouts)
