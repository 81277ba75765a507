"""A skill reaches the model only when the agent loads it: a night scores a skill whose
description the model does not pick as not helping, and one the model loads as helping
(real nights through the OpenAI-compatible and the Anthropic backends, which list the skill by
its description and return its body only when the model calls the Skill tool). Its description
is trained too: the optimizer, told the description and that failing rollouts did not load the
skill, rewrites it; the gate certifies the rewrite when the skill is then loaded and val
rises."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.delivery.document import (
    MAX_DESCRIPTION_CHARS,
    SKILL_NAME,
    Document,
    estimate_tokens,
    managed_skill_path,
)
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.mining.split import views
from skillopt_sleep.night import prompts
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt, reject
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.night import NO_COLLATERAL
from tests.helpers.store import db_rows

BACKENDS = ["openai_compatible", "anthropic"]
#: the key the real CLI sends to the simulator
CLI_KEY = "sk-sim-skill-0123456789"


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


# ------------------------------------------------------------------ the description is trained
#: a skill that already holds the rule the tasks need, under a description that shares no
#: content word with any task, so the ``words`` rule never loads it
OLD_DESCRIPTION = "Guidance for formatting changelog entries in release notes."
UNMATCHED = f"""---
name: {SKILL_NAME}
description: {OLD_DESCRIPTION}
---

# Learned rules

<!-- skillopt-sleep:begin — managed by skillopt-sleep; edit with care -->
- Use `pnpm` instead of `npm`.
<!-- skillopt-sleep:end -->
"""


#: the demo's recurring tasks, each naming the project it is about (the word a description
#: learned from the train tasks shares with the val tasks)
WEBAPP_CONVERSATIONS = [
    (agent, [(ask + " in the webapp", answer, fix) for ask, answer, fix in turns])
    for agent, turns in DEMO_CONVERSATIONS
]


def _describe_night(
    tmp_path: Path,
    home: Path,
    describe: bool,
    fresh: bool = True,
    target: str = "openai_compatible",
):
    """A night training the skill :data:`UNMATCHED` through the HTTP backend ``target``
    (``fresh``: in a new world; else again in the one an earlier call made)."""
    project = tmp_path / "webapp"
    skill = managed_skill_path("claude_code", home=home)
    if fresh:
        project.mkdir()
        write_conversations(home, project, WEBAPP_CONVERSATIONS)
        skill.parent.mkdir(parents=True)
        skill.write_text(UNMATCHED)
    demo = resources.files("skillopt_sleep.simulator").joinpath("personas/demo.toml")
    persona = tmp_path / "persona.toml"
    text = demo.read_text("utf-8").replace(
        "[optimizer]", f"[optimizer]\ndescribe_skills = {str(describe).lower()}"
    )
    persona.write_text(text + '\n[skills]\nmatch = "words"\n')
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
        requests = list(sim.stats.requests)
    return result, requests, store, skill


def _reflects(requests: list[dict]) -> list[dict]:
    """The reflect prompts' material blocks, in order."""
    return [prompts.material_of(r["prompt_full"]) for r in requests if r.get("role") == "reflect"]


@pytest.mark.parametrize("target", BACKENDS)
def test_a_description_the_model_does_not_match_keeps_val_unchanged(
    target, tmp_path, isolated_home
):
    result, requests, store, skill = _describe_night(
        tmp_path, isolated_home, describe=False, target=target
    )
    listed = [r for r in requests if r.get("skills")]
    assert listed and not any(r.get("skills_loaded") for r in listed)
    assert result.status == "no_change" and result.proposal_id is None
    assert result.val_before is not None and result.val_after == result.val_before
    # the optimizer was told the description and that no rollout loaded the skill
    reflects = _reflects(requests)
    assert reflects and all(
        m["skill"]["description"] == OLD_DESCRIPTION
        and m["failures"]
        and all(f["skill_loaded"] is False for f in m["failures"])
        for m in reflects
    )
    assert not [e for e in db_rows(store, "edits") if e["op"] == "describe"]
    assert skill.read_text() == UNMATCHED


@pytest.mark.parametrize("target", BACKENDS)
def test_the_optimizer_rewrites_the_description_and_the_skill_is_loaded(
    target, tmp_path, isolated_home
):
    result, requests, store, skill = _describe_night(
        tmp_path, isolated_home, describe=True, target=target
    )
    assert result.status == "succeeded" and result.proposal_id
    assert result.val_before is not None and result.val_after is not None
    assert result.val_after > result.val_before
    described = [e for e in db_rows(store, "edits") if e["op"] == "describe"]
    assert [(e["status"], e["old"]) for e in described] == [("applied", OLD_DESCRIPTION)]
    new = described[0]["text"]
    assert new != OLD_DESCRIPTION and len(new) <= MAX_DESCRIPTION_CHARS
    # the staged skill: the new description in its front matter, its rules and body unchanged
    folder = paths.proposals_dir() / result.proposal_id
    staged = (folder / "document").read_text()
    doc = Document.parse(staged, new_skill=True)
    assert doc.description == new and doc.rules == ["Use `pnpm` instead of `npm`."]
    assert staged == UNMATCHED.replace(OLD_DESCRIPTION, new)
    # the val replays of the staged skill loaded it (the simulator's request log): each val
    # task's request listing the new description led to a Skill call
    val_ids = {r.task_id for r in store.rollouts.of_night(result.night_id, "val")}
    # rollouts name the occurrence each replay asked (a view of its task)
    intents = {v.id: v.intent for v in views(store.tasks.all()) if v.id in val_ids}
    assert intents
    for intent in intents.values():
        asked = [r for r in requests if r.get("skills") and r.get("prompt") == intent[:200]]
        old = [r for r in asked if f"- {SKILL_NAME}: {OLD_DESCRIPTION}" in r["context_full"]]
        renamed = [r for r in asked if f"- {SKILL_NAME}: {new}" in r["context_full"]]
        assert old and not any(r["skills_loaded"] for r in old)
        assert renamed and any(r["skills_loaded"] == [SKILL_NAME] for r in renamed)
    # the report shows the edit; the per-turn cost is the new description's
    report = json.loads((folder / "report.json").read_text())
    assert {"op": "describe", "old": OLD_DESCRIPTION, "text": new, "status": "applied"}.items() <= (
        next(e for e in report["edits"] if e["op"] == "describe").items()
    )
    assert f"describe: {OLD_DESCRIPTION} → {new}" in (folder / "report.md").read_text()
    delivery = result.summary.delivery
    assert delivery is not None and delivery.mode == "skill"
    assert delivery.per_turn_tokens == estimate_tokens(new)
    assert skill.read_text() == UNMATCHED  # nothing live changed before adopt


def test_a_refused_description_is_not_proposed_again(tmp_path, isolated_home):
    result, _requests, store, skill = _describe_night(tmp_path, isolated_home, describe=True)
    assert result.proposal_id
    new = next(e["text"] for e in db_rows(store, "edits") if e["op"] == "describe")
    reject(store, result.proposal_id, "keep my description")
    again, requests, store, _ = _describe_night(tmp_path, isolated_home, describe=True, fresh=False)
    assert again.status == "no_change" and again.proposal_id is None
    reflects = _reflects(requests)
    assert reflects and all(
        {"edit": f"describe: {new}", "reason": "keep my description"}.items()
        <= m["user_refused_edits"][0].items()
        for m in reflects
    )
    tried = [e for e in db_rows(store, "edits") if e["night_id"] == again.night_id]
    assert not [e for e in tried if e["op"] == "describe" and e["status"] == "applied"]
    assert skill.read_text() == UNMATCHED


def test_a_forced_adopt_carries_the_trained_description_onto_the_changed_skill(
    tmp_path, isolated_home
):
    result, _requests, store, skill = _describe_night(tmp_path, isolated_home, describe=True)
    assert result.proposal_id
    new = next(e["text"] for e in db_rows(store, "edits") if e["op"] == "describe")
    changed = UNMATCHED.replace("# Learned rules\n", "# Learned rules\n\nMy own note.\n")
    skill.write_text(changed)  # the user edited the skill after the night
    adopt(store, result.proposal_id, force=True)
    assert skill.read_text() == changed.replace(OLD_DESCRIPTION, new)


@pytest.mark.cli
@pytest.mark.parametrize("agent", ["claude_code", "copilot", "codex"])
def test_the_real_cli_loads_the_skill_once_its_description_is_trained(
    agent, tmp_path, isolated_home, cli_path
):
    """The same night replayed through the real ``claude`` / ``copilot`` / ``codex`` CLI (the
    skill in the replay's config folder, listed by the CLI itself): the rewritten description
    makes the model load the skill as the live agent does (the CLI's skill tool; Codex reads
    the file with its shell tool), the backend reports the load, and val rises."""
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(isolated_home, project, WEBAPP_CONVERSATIONS)
    skill = managed_skill_path(agent, home=isolated_home)
    skill.parent.mkdir(parents=True)
    skill.write_text(UNMATCHED)
    demo = resources.files("skillopt_sleep.simulator").joinpath("personas/demo.toml")
    persona = tmp_path / "persona.toml"
    persona.write_text(demo.read_text("utf-8") + '\n[skills]\nmatch = "words"\n')
    store = Store(paths.db_path())
    with serve(persona, api_key=CLI_KEY, full_log=True) as sim:
        backend = {"model": "sim-demo", "api_key": CLI_KEY, "max_retries": 0, "timeout": 90}
        settings = load_settings(
            Path("/nonexistent/config.toml"),
            **{
                **demo_settings(isolated_home, project, sim.url),
                **NO_COLLATERAL,
                "document": {"kind": "managed_skill", "agent": agent},
                "target": {
                    "name": agent,
                    "base_url": sim.url + ("" if agent == "claude_code" else "/v1"),
                    "workers": 2,
                    **backend,
                },
                "optimizer": {
                    "name": "openai_compatible",
                    "base_url": sim.url + "/v1",
                    **backend,
                },
            },
        )
        result = run_night(store, settings)
        requests = list(sim.stats.requests)
    assert result.status == "succeeded", (result.summary, result.error)
    assert result.val_before is not None and result.val_after is not None
    assert result.val_after > result.val_before
    [described] = [e for e in db_rows(store, "edits") if e["op"] == "describe"]
    assert described["status"] == "applied"
    # the optimizer learned from the real CLI's replays that the skill was not loaded
    reflects = _reflects(requests)
    assert reflects and all(f["skill_loaded"] is False for f in reflects[0]["failures"])
    # the CLI listed the new description and the simulator loaded the skill through it
    loaded = [r for r in requests if r.get("skills_loaded") == [SKILL_NAME]]
    assert loaded and all(described["text"] in r["context_full"] for r in loaded)
    staged = (paths.proposals_dir() / result.proposal_id / "document").read_text()
    assert Document.parse(staged, new_skill=True).description == described["text"]
