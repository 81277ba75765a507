"""What delivery costs: the managed block has a token budget that edits must keep, and every
proposal reports its size and what it costs the user per turn once adopted (real nights
against the simulator on loopback)."""

from __future__ import annotations

import json

from skillopt_sleep import paths
from skillopt_sleep.delivery.document import (
    BEGIN,
    END,
    block_tokens,
    delivery_cost,
    estimate_tokens,
)
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from tests.helpers.night import night_settings, night_world, write_persona
from tests.helpers.store import db_rows

USER_TEXT = "# Project rules\n\nWritten by hand.\n"


def test_token_estimates_and_the_two_delivery_modes(tmp_path):
    assert (
        estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    )
    rules = ["Use `pnpm` instead of `npm`."]
    block = BEGIN + "\n- Use `pnpm` instead of `npm`.\n" + END
    assert block_tokens(rules) == estimate_tokens(block)
    memory = delivery_cost(tmp_path / "CLAUDE.md", "x" * 400, rules, 1500)
    assert memory == {
        "mode": "memory",
        "rules": 1,
        "block_tokens": block_tokens(rules),
        "budget": 1500,
        "per_turn_tokens": 100,
    }
    skill_text = "---\nname: s\ndescription: " + "d" * 40 + "\n---\n\n" + "b" * 400
    skill = delivery_cost(tmp_path / "s" / "SKILL.md", skill_text, rules, 1500)
    assert skill["mode"] == "skill" and skill["per_turn_tokens"] == 10
    assert skill["when_loaded_tokens"] == estimate_tokens(skill_text)


def test_a_proposal_reports_its_size_and_per_turn_cost(tmp_path, isolated_home):
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        result = run_night(store, night_settings(isolated_home, project, target, sim.url))
    assert result.status == "succeeded" and result.proposal_id
    folder = paths.proposals_dir() / result.proposal_id
    document = (folder / "document").read_text()
    report = json.loads((folder / "report.json").read_text())
    delivery = report["summary"]["delivery"]
    assert delivery["mode"] == "memory" and delivery["budget"] == 1500
    assert delivery["per_turn_tokens"] == estimate_tokens(document)
    assert delivery["block_tokens"] <= delivery["budget"]
    md = (folder / "report.md").read_text()
    assert (
        f"the block costs ~{delivery['block_tokens']} tokens a turn "
        f"(the whole file, your own text included, ~{estimate_tokens(document)})" in md
    )
    # the block's own size (a project file: no section marker or heading)
    assert report["summary"].get("section") is None
    rules = [r[2:] for r in document.splitlines() if r.startswith("- ")]
    assert delivery["block_tokens"] == block_tokens(rules) < block_tokens(rules, "/src/webapp")


def test_edits_that_would_break_the_token_budget_are_refused_without_a_replay(
    tmp_path, isolated_home
):
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path)) as sim:
        settings = night_settings(isolated_home, project, target, sim.url)
        settings.document = settings.document.model_copy(update={"max_tokens": 20})
        result = run_night(store, settings)
    assert result.status == "no_change" and result.proposal_id is None
    tried = [e for e in db_rows(store, "edits") if e["night_id"] == result.night_id]
    assert tried and all(e["status"] == "rejected" for e in tried)
    assert all(
        e["reason"].startswith("over the token budget: the managed block would be ~")
        and e["reason"].endswith("tokens (budget 20)")
        and e["val_after"] is None
        for e in tried
    )
    assert target.read_text() == USER_TEXT
