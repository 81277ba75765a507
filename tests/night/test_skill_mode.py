"""A skill reaches the model only when the agent loads it: a night scores a skill whose
description the model does not pick as not helping, and one the model loads as helping
(real nights through the OpenAI-compatible and the Anthropic backends, which list the skill by
its description and return its body only when the model calls the Skill tool)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations

BACKENDS = ["openai_compatible", "anthropic"]


def _night(tmp_path: Path, home: Path, load: str, target: str):
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(home, project, DEMO_CONVERSATIONS)
    demo = resources.files("skillopt_sleep.simulator").joinpath("personas/demo.toml")
    persona = tmp_path / "persona.toml"
    persona.write_text(demo.read_text("utf-8") + f'\n[skills]\nmatch = "{load}"\n')
    store = Store(paths.db_path())
    with serve(persona, full_log=True) as sim:
        base = demo_settings(home, project, sim.url)
        if target == "anthropic":  # the Messages API at the simulator's root
            base["target"] = {**base["target"], "name": "anthropic", "base_url": sim.url}
        settings = load_settings(
            Path("/nonexistent/config.toml"),
            **{**base, "document": {"kind": "managed_skill", "agent": "claude_code"}},
        )
        result = run_night(store, settings)
        endpoint = "/messages" if target == "anthropic" else "/chat/completions"
        replays = [r for r in sim.stats.requests if r.get("role") == "target"]
        assert replays and all(r["endpoint"] == endpoint for r in replays)
        loaded = [r for r in replays if r.get("skills_loaded")]
        listed = [r for r in replays if r.get("skills")]
    return result, listed, loaded


@pytest.mark.parametrize("target", BACKENDS)
def test_a_skill_the_model_never_loads_is_scored_as_not_helping(target, tmp_path, isolated_home):
    result, listed, loaded = _night(tmp_path, isolated_home, "never", target)
    assert listed and not loaded  # offered in every replay, never loaded
    assert result.status == "no_change" and result.proposal_id is None
    assert result.val_after == result.val_before
    assert result.summary.reason == "no edit passed the val gate"


@pytest.mark.parametrize("target", BACKENDS)
def test_a_skill_the_model_loads_is_certified(target, tmp_path, isolated_home):
    result, listed, loaded = _night(tmp_path, isolated_home, "always", target)
    assert listed and loaded
    assert result.status == "succeeded" and result.proposal_id
    assert result.val_after is not None and result.val_before is not None
    assert result.val_after > result.val_before
    assert result.summary.delivery is not None and result.summary.delivery.mode == "skill"
