"""What a proposal's report says about how its scores were measured."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep.night.stage import render_markdown, scoring_note, unified_diff
from skillopt_sleep.results import ProposalReport
from tests.helpers.store import ensure_night


def _report(data: dict[str, Any]) -> ProposalReport:
    """A report.json as a night writes it (hashes of no interest here)."""
    return ProposalReport.model_validate({"base_hash": "", "new_hash": "", **data})


def test_a_skill_proposal_says_its_scores_assume_the_skill_is_loaded():
    where = "skills/skillopt-sleep-learned/SKILL.md in claude_code's user folder"
    skill = scoring_note("/home/u/.claude/skills/skillopt-sleep-learned/SKILL.md", where)
    assert "only when the agent decides to load it" in skill and where in skill
    assert 'document.kind = "memory"' in skill
    memory = scoring_note("/home/u/src/app/CLAUDE.md", "CLAUDE.md in claude_code's project")
    assert "loads it in every session" in memory and "only when" not in memory
    # a file no agent loads by itself: the scores say nothing about daily use
    elsewhere = scoring_note("/home/u/notes/rules.md", None)
    assert "given as system text" in elsewhere or "as system text" in elsewhere
    assert "say nothing about daily use" in elsewhere
    report = {
        "id": "p1",
        "target": "/x/SKILL.md",
        "night_id": 1,
        "created_at": "now",
        "scores": {"val_before": 0.5, "val_after": 1.0, "test_before": 0.5, "test_after": 1.0},
        "cost": {},
        "edits": [],
        "val_tasks": [],
        "test_tasks": [],
        "scored_as": skill,
    }
    assert skill in render_markdown(_report(report), "")


def test_an_edit_reason_or_rationale_over_several_lines_stays_in_its_table_row():
    edit = {
        "op": "add",
        "text": "Use `pnpm`.",
        "old": "",
        "status": "rejected",
        "reason": "val 1.000 -> 0.500:\nlower",
        "rationale": "fixes task: deploy | it prints:\n  secret",
        "val_before": 1.0,
        "val_after": 0.5,
    }
    report = {
        "id": "p1",
        "target": "/x/CLAUDE.md",
        "night_id": 1,
        "created_at": "now",
        "scores": {"val_before": 1.0, "val_after": 1.0, "test_before": None, "test_after": None},
        "cost": {},
        "edits": [edit],
        "val_tasks": [],
        "test_tasks": [],
        "scored_as": "",
    }
    [row] = [
        ln
        for ln in render_markdown(_report(report), "").splitlines()
        if ln.startswith("| rejected")
    ]
    assert row.endswith("| val 1.000 -> 0.500: lower | fixes task: deploy / it prints: secret |")


@pytest.mark.parametrize(
    ("base", "new"),
    [
        (b"# notes\nlast line, no newline", b"# notes\nlast line, no newline\n\n- Rule.\n"),
        (b"# notes\n", b"# notes\n\n- Rule, no final newline"),
        (b"# notes\r\nkept\r\n", b"# notes\r\nkept\r\n\r\n- Rule.\r\n"),
        (b"# notes\r\nno final newline", b"# notes\r\nno final newline\r\n- Rule."),
        (b"a\x0cform feed\nb\n", b"a\x0cform feed\nb\nc\n"),
        (None, b"# new file\n- Rule.\n"),
    ],
)
def test_the_diff_applies_with_patch_and_git_apply(tmp_path: Path, base, new):
    """``diff.patch`` as staged is what ``patch -p1`` and ``git apply`` accept in the file's
    folder, and applying it yields the proposed bytes exactly (no final newline, CRLF)."""
    diff = unified_diff(
        None if base is None else base.decode(), new.decode(), tmp_path / "CLAUDE.md"
    )
    for tool in (["patch", "-p1", "--batch", "--quiet"], ["git", "apply"]):
        work = tmp_path / tool[0]
        work.mkdir()
        if base is not None:
            (work / "CLAUDE.md").write_bytes(base)
        (tmp_path / "d.patch").write_bytes(diff.encode())
        check = [*tool, "--dry-run"] if tool[0] == "patch" else [*tool, "--check"]
        for cmd in (check, tool):
            proc = subprocess.run(
                [*cmd, *(["-i"] if tool[0] == "patch" else []), str(tmp_path / "d.patch")],
                cwd=work,
                capture_output=True,
                text=True,
                check=False,
            )
            assert proc.returncode == 0, (cmd, proc.stdout, proc.stderr, diff)
        assert (work / "CLAUDE.md").read_bytes() == new


def test_a_staging_killed_midway_leaves_no_proposal_folder(tmp_path, monkeypatch) -> None:
    import os

    import pytest

    from skillopt_sleep import paths
    from skillopt_sleep.night import stage
    from skillopt_sleep.results import NightCost, NightSummary, Scores
    from skillopt_sleep.store import Store

    store = Store(tmp_path / "s.db")
    ensure_night(store, 7)
    args: dict[str, Any] = {
        "night_id": 7,
        "target_path": tmp_path / "AGENTS.md",
        "base_text": None,
        "new_text": "- a rule\n",
        "base_hash": "",
        "edits": [],
        "tasks": [],
        "cost": NightCost(),
        "summary": NightSummary(),
        "scores": Scores(val_before=0.0, val_after=1.0),
    }
    folder = paths.proposals_dir()
    folder.mkdir(parents=True)
    killed_long_ago = folder / ".staging-p3"
    killed_long_ago.mkdir()
    os.utime(killed_long_ago, (1, 1))

    def killed(*_a: Any, **_k: Any) -> str:
        raise KeyboardInterrupt  # the night is stopped while it writes the report

    with monkeypatch.context() as m, pytest.raises(KeyboardInterrupt):
        m.setattr(stage, "render_markdown", killed)
        stage.stage_proposal(store, stage.Staging(**args))
    assert not (folder / "p1").exists() and store.proposals.get("p1") is None
    assert stage.stage_proposal(store, stage.Staging(**args)) == "p1"  # the first staged proposal
    assert sorted(p.name for p in folder.iterdir()) == ["p1"]  # the leftovers are gone
    assert (folder / "p1" / "report.md").is_file() and store.proposals.get("p1") is not None
    store.close()


def test_a_proposal_records_its_agent_and_kind(tmp_path, isolated_home) -> None:
    """The row and report.json of a staged proposal say whose document it is and which kind:
    found from the target's place, the night's agent asked first; a file that is no agent's
    document is ``path``."""
    import json

    from skillopt_sleep.night.stage import Staging, stage_proposal
    from skillopt_sleep.results import NightCost, NightSummary, Scores
    from skillopt_sleep.store import Store

    store = Store(tmp_path / "s.db")
    ensure_night(store, 1)

    def staged(target: Path, agent: str | None = None, kind: str | None = None) -> list[str]:
        pid = stage_proposal(
            store,
            Staging(
                night_id=1,
                target_path=target,
                base_text=None,
                new_text=f"- a rule for {target}\n",
                base_hash="",
                edits=[],
                tasks=[],
                cost=NightCost(),
                summary=NightSummary(),
                scores=Scores(val_before=0.0, val_after=1.0),
                agent=agent,
                kind=kind,
            ),
        )
        row = store.proposals.get(pid)
        report = json.loads((Path(row.dir) / "report.json").read_text())
        assert (report["agent"], report["kind"]) == (row.agent, row.kind)
        return [row.agent, row.kind]

    home = isolated_home
    assert staged(home / ".codex" / "AGENTS.md") == ["codex", "memory"]
    skill = home / ".pi" / "agent" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    assert staged(skill, "claude-code") == ["pi", "managed_skill"]
    assert staged(tmp_path / "proj" / "AGENTS.md", "claude_code") == ["codex", "memory"]
    assert staged(tmp_path / "proj" / "AGENTS.md", "opencode") == ["opencode", "memory"]
    assert staged(tmp_path / "notes.md", "claude_code") == ["claude_code", "path"]
    assert staged(tmp_path / "given.md", "codex", "memory") == ["codex", "memory"]
    store.close()
