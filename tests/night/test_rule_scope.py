"""Rules that help without harm (issue 26): a rule learned from one task family is scoped to it,
and an edit that passes the val gate but harms the user's other tasks or an everyday request is
rejected by the collateral gate, the reason naming what it harmed."""

from __future__ import annotations

import json

import pytest

from skillopt_sleep import paths
from skillopt_sleep.delivery.document import Document, scope_of
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from tests.helpers.night import night_settings, night_world, write_persona
from tests.helpers.scope import CODE, COMMIT, COMMITS, FUNCTION, INSTALLS, PERSONA, SHORTER
from tests.helpers.store import db_rows


def _night(tmp_path, home, conversations, persona=PERSONA, **extra):
    project, target = night_world(tmp_path, home, "# Project rules\n", conversations)
    store = Store(paths.db_path())
    sim = serve(write_persona(tmp_path, persona))
    return store, project, target, sim, extra


def test_a_length_correction_on_commit_messages_is_staged_scoped_and_other_answers_stay_whole(
    tmp_path, isolated_home
):
    store, project, target, sim, _ = _night(tmp_path, isolated_home, COMMITS + CODE)
    with sim as sim:
        settings = night_settings(isolated_home, project, target, sim.url)
        result = run_night(store, settings)
        assert result.status == "succeeded", result.summary
        staged = Document.parse(
            (paths.proposals_dir() / result.proposal_id / "document").read_text("utf-8")
        )
        assert staged.rules == ["When writing a commit message: keep answers under 50 characters."]
        assert scope_of(staged.rules[0]) == "writing a commit message"
        report = json.loads(
            (paths.proposals_dir() / result.proposal_id / "report.json").read_text()
        )
        (rule,) = report["rules"]
        assert rule["scope"] == "writing a commit message"
        assert rule["evidence"] and all(
            SHORTER in w for ev in rule["evidence"] for w in ev["words"]
        )
        assert all(ev["sessions"] for ev in rule["evidence"])
        # the collateral gate replayed the user's code task and the everyday probes, unharmed
        applied = db_rows(store, "edits", "night_id = ?", [result.night_id])
        assert any("no harm to" in e["reason"] for e in applied if e["status"] == "applied")
        probes = db_rows(
            store, "rollouts", "night_id = ? and phase = 'collateral candidate'", [result.night_id]
        )
        asked = {r["task_id"].split("@")[0] for r in probes}
        assert "probe:function" in asked and "probe:test" in asked
        code_task = next(t for t in store.tasks.all() if "python function" in t.intent)
        assert code_task.id in asked

        adopt(store, result.proposal_id)
        live = target.read_text("utf-8")
        # after adopt the literal-minded target answers the other task whole, the commit short
        from skillopt_sleep.backends import get_backend
        from skillopt_sleep.models import CompletionRequest

        backend = get_backend(settings.target)
        code = backend.complete(
            CompletionRequest(
                system=live, prompt="write a python function that parses the config file"
            )
        )
        assert code.text == FUNCTION
        commit = backend.complete(
            CompletionRequest(system=live, prompt="write a commit message for the timeout change")
        )
        assert commit.text == COMMIT[:50].rstrip()


HARMFUL = PERSONA.replace(
    'order = ["derived"]',
    'order = ["harmful", "derived"]\nharmful_edits = ["Keep answers under 50 characters."]',
)


def test_an_unscoped_length_rule_is_rejected_by_the_collateral_gate_naming_what_it_harms(
    tmp_path, isolated_home
):
    # two task families corrected in one mini-batch: the optimizer offers the length rule for
    # every task ("all"), which their evidence allows; the val gate alone would take it
    store, project, target, sim, _ = _night(
        tmp_path, isolated_home, COMMITS + INSTALLS + CODE, persona=HARMFUL
    )
    with sim as sim:
        result = run_night(store, night_settings(isolated_home, project, target, sim.url))
    edits = db_rows(store, "edits", "night_id = ? and origin = 'reflect'", [result.night_id])
    unscoped = [e for e in edits if e["text"] == "Keep answers under 50 characters."]
    assert unscoped, [e["text"] for e in edits]
    e = unscoped[0]
    assert e["status"] == "rejected" and e["scope"] == ""
    assert "but it harms" in e["reason"], e["reason"]
    assert 'your task "write a python function that parses the config file' in e["reason"] or (
        "the everyday request" in e["reason"]
    )
    assert "whole before, cut after" in e["reason"]
    # what the night stages never cuts the other answers
    if result.proposal_id:
        staged = Document.parse(
            (paths.proposals_dir() / result.proposal_id / "document").read_text("utf-8")
        )
        assert "Keep answers under 50 characters." not in staged.rules


@pytest.mark.parametrize("probes", [True, False])
def test_without_the_collateral_gate_the_unscoped_rule_would_have_entered(
    tmp_path, isolated_home, probes
):
    # the control: the same night with the collateral gate off takes the harmful rule, so the
    # rejection above is the collateral gate's doing
    store, project, target, sim, _ = _night(
        tmp_path, isolated_home, COMMITS + INSTALLS + CODE, persona=HARMFUL
    )
    extra = {"collateral_tasks": 0, "collateral_probes": False}
    if probes:
        extra = {"collateral_tasks": 0, "collateral_probes": True}
    with sim as sim:
        result = run_night(store, night_settings(isolated_home, project, target, sim.url, **extra))
    edits = db_rows(store, "edits", "night_id = ? and origin = 'reflect'", [result.night_id])
    (e,) = [e for e in edits if e["text"] == "Keep answers under 50 characters."]
    if probes:
        assert e["status"] == "rejected" and "the everyday request" in e["reason"]
    else:
        assert e["status"] == "applied", e["reason"]


def test_a_consolidation_that_widens_a_scoped_rule_to_every_task_is_refused(
    tmp_path, isolated_home
):
    # two scoped rules, and an optimizer whose merge drops their scopes
    persona = PERSONA.replace(
        'order = ["derived"]', 'order = ["derived"]\nunscoped_consolidate = true'
    )
    store, project, target, sim, _ = _night(tmp_path, isolated_home, COMMITS + INSTALLS, persona)
    with sim as sim:
        result = run_night(store, night_settings(isolated_home, project, target, sim.url))
    assert result.status == "succeeded", result.summary
    merges = db_rows(store, "edits", "night_id = ? and origin = 'consolidate'", [result.night_id])
    assert merges and all(e["status"] == "rejected" for e in merges)
    assert all(e["reason"].startswith("the merge drops the scope ") for e in merges), merges
    staged = Document.parse(
        (paths.proposals_dir() / result.proposal_id / "document").read_text("utf-8")
    )
    assert all(scope_of(r) for r in staged.rules), staged.rules
