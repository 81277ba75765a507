"""What a proposal's report says about how its scores were measured."""

from __future__ import annotations

from skillopt_sleep.night.stage import render_markdown, scoring_note


def test_a_skill_proposal_says_its_scores_assume_the_skill_is_loaded():
    skill = scoring_note("/home/u/.claude/skills/skillopt-sleep-learned/SKILL.md")
    assert "only when the agent loads the skill" in skill and "CLAUDE.md / AGENTS.md" in skill
    memory = scoring_note("/home/u/src/app/CLAUDE.md")
    assert "loads it in every session" in memory and "only when" not in memory
    report = {"id": "p1", "target": "/x/SKILL.md", "night_id": 1, "created_at": "now",
              "scores": {"val_before": 0.5, "val_after": 1.0, "test_before": 0.5, "test_after": 1.0},
              "cost": {}, "edits": [], "val_tasks": [], "test_tasks": [], "scored_as": skill}
    assert skill in render_markdown(report, "")
