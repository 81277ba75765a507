"""Judges validated by the transcript's own controls (issue 12, item 3).

A check derived from a correction must fail the answer the user corrected (negative
control), pass the answer they then accepted (positive control), and an answer made only of
the check's own words must not pass the task (anti-gaming control); style words map to
structured checks, never to a literal ``contains``.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillopt_sleep.cli import app, check_line
from skillopt_sleep.config import Settings
from skillopt_sleep.mining import corrections as fb
from skillopt_sleep.mining.judges import first_word, run_check
from skillopt_sleep.mining.mine import mine
from skillopt_sleep.models import Check, Task
from skillopt_sleep.sources.ingest import harvest_file
from skillopt_sleep.store import Store
from tests.helpers.commit import (
    ACCEPTED,
    CORRECTED,
    CORRECTION,
    GAMED,
    PROMPT,
    write_commit_session,
)

NOW = dt.datetime(2026, 1, 6, 12, 0, tzinfo=dt.UTC)
ALL_PASS = {"negative": "pass", "positive": "pass", "anti_gaming": "pass"}


def hard(checks: list[Check], answer: str) -> float:
    return sum(run_check(c, answer, []) for c in checks) / len(checks)


def commit_task(store: Store, tmp_path: Path) -> Task:
    path = write_commit_session(tmp_path / "projects", "c0ffee00-0000-4000-8000-000000000001", NOW)
    harvest_file(store, "claude_code", path)
    (task,) = mine(store, Settings(), now=NOW).tasks
    assert task.intent == PROMPT
    return task


# ------------------------------------------------------------------ the measured case
def test_the_commit_tasks_checks_pass_the_accepted_answer_and_fail_the_others(
    store: Store, tmp_path: Path
) -> None:
    task = commit_task(store, tmp_path)
    assert [(c.kind, c.value) for c in task.checks] == [("imperative", ""), ("max_chars", "50")]
    assert [c.controls for c in task.checks] == [ALL_PASS, ALL_PASS]
    assert task.demoted == []
    # what the issue measured: the accepted answer scored 0.50, the gamed one 1.00
    assert hard(task.checks, ACCEPTED) == 1.0
    assert hard(task.checks, CORRECTED) == 0.0
    assert hard(task.checks, GAMED) < 1.0
    assert hard(task.checks, "under 50 characters") < 1.0
    assert hard(task.checks, CORRECTION) < 1.0
    # the rubric still says it in words, for a judge
    assert "imperative mood" in task.rubric and "50 characters" in task.rubric


def test_style_words_are_never_literal_checks() -> None:
    cases = {
        "no, use the imperative mood": [("imperative", "")],
        "no, use conventional commits": [("regex", "conventional")],
        "no, no emojis": [("no_emoji", "")],
        "no, use snake_case": [("snake_case", "")],
        "no, add type hints": [("type_hints", "")],
    }
    for words, want in cases.items():
        got = fb.derive_checks(words, "x")
        assert [c.kind for c in got] == [k for k, _ in want], words
        assert not [c for c in got if c.kind == "contains"], words
    (conv,) = fb.derive_checks("no, use conventional commits", "x")
    assert run_check(conv, "feat(fetch): add retry", [])
    assert not run_check(conv, "conventional commits", [])


@pytest.mark.parametrize(
    "answer,ok",
    [
        ("Add retry to fetch client", True),
        ("fix: handle empty input", True),
        ("```\nRefactor the parser\n```", True),
        ("```text\nRename the helper\n```", True),
        ("**Bump** the version", True),
        ('"Remove dead code"', True),
        ("Added retry to fetch client", False),
        ("Adds retry", False),
        ("Adding retry", False),
        ("This commit adds retry", False),
        ("imperative mood", False),
        ("", False),
    ],
)
def test_imperative_reads_the_first_words_verb_form(answer: str, ok: bool) -> None:
    assert run_check(Check(kind="imperative"), answer, []) is ok, first_word(answer)


def test_structured_style_checks() -> None:
    snake = Check(kind="snake_case")
    hints = Check(kind="type_hints")
    emoji = Check(kind="no_emoji")
    good = "```python\ndef get_user(user_id: int) -> str:\n    user_name = 'x'\n    return user_name\n```"
    bad = "```python\ndef getUser(userId):\n    return userId\n```"
    assert run_check(snake, good, []) and not run_check(snake, bad, [])
    assert run_check(hints, good, []) and not run_check(hints, bad, [])
    assert not run_check(snake, "snake_case", []) and not run_check(hints, "type hints", [])
    assert run_check(emoji, "Done.", []) and not run_check(emoji, "Done! \U0001f389", [])
    assert run_check(Check(kind="max_words", value="3"), "one two three", [])
    assert not run_check(Check(kind="max_words", value="3"), "one two three four", [])
    assert not run_check(Check(kind="not_regex", value=r"^\s*-"), "- a bullet", [])


# ------------------------------------------------------------------ each control
def test_a_check_the_corrected_answer_already_passed_is_demoted() -> None:
    # the corrected answer was already short: a length limit cannot be what the user meant
    f = fb.analyze(CORRECTION, "Added retry")
    assert [c.kind for c in f.checks] == ["imperative"]
    (demoted,) = f.demoted
    assert demoted.kind == "max_chars" and demoted.controls["negative"] == "fail"


def test_a_check_the_accepted_answer_fails_is_demoted() -> None:
    f = fb.analyze("no, use pnpm", "Run `npm install`.")
    assert [c.value for c in f.checks] == ["pnpm", "npm"]
    # the user accepted an answer without pnpm (they dropped the tool altogether)
    settled = fb.settle(f, "Run `yarn install`.")
    assert [c.value for c in settled.checks] == ["npm"]
    (dropped,) = settled.demoted
    assert dropped.value == "pnpm" and dropped.controls["positive"] == "fail"
    # accepted with pnpm: both kept, pnpm attested (an answer of "pnpm" is an answer)
    ok = fb.settle(f, "Run `pnpm install`.")
    assert [c.controls for c in ok.checks] == [
        {"negative": "pass", "positive": "pass", "anti_gaming": "attested"},
        ALL_PASS,
    ]


def test_a_description_passed_by_its_own_words_is_demoted() -> None:
    # "active voice" is no style the miner knows: it becomes a literal, which its own words
    # pass, so the anti-gaming control demotes it to the rubric
    f = fb.analyze("no, use active voice", "The retry was added by me.")
    assert f.checks == []
    (c,) = f.demoted
    assert (c.kind, c.value, c.controls["anti_gaming"]) == ("contains", "active voice", "fail")
    assert "active voice" in f.rubric


def test_a_lone_length_limit_is_passed_by_its_own_words() -> None:
    f = fb.analyze("keep it under 50 characters", "x" * 300)
    assert f.checks == []
    assert f.demoted[0].controls == {"negative": "pass", "positive": "n/a", "anti_gaming": "fail"}


# ------------------------------------------------------------------ tasks shows them
def test_tasks_shows_each_checks_control_results(tmp_path: Path, isolated_home: Path) -> None:
    root = isolated_home / ".claude" / "projects"
    write_commit_session(root, "c0ffee00-0000-4000-8000-000000000002", dt.datetime.now(dt.UTC))
    runner = CliRunner()
    assert runner.invoke(app, ["harvest"]).exit_code == 0
    got = runner.invoke(app, ["tasks"])
    assert got.exit_code == 0, got.output
    # a table on a wide terminal, a block per task on a narrow one (the runner's is 80)
    assert "checks (controls)" in got.output or "checks: " in got.output
    assert "rebuilt" in got.output
    rows = runner.invoke(app, ["tasks", "--json"])
    (row,) = json.loads(rows.stdout)  # stderr carries the JSON-lines progress
    assert [c["controls"] for c in row["checks"]] == [ALL_PASS, ALL_PASS]
    assert [check_line(Check.model_validate(c)) for c in row["checks"]] == [
        "imperative [neg pass pos pass gaming pass]",
        "max_chars '50' [neg pass pos pass gaming pass]",
    ]
    # each shown line is in the table (which wraps its cells: compared without the frame)
    flat = "".join(ch for ch in got.output if ch not in "│ \n")
    for part in ("imperative[neg", "max_chars", "gaming"):
        assert part in flat
