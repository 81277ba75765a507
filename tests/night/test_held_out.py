"""The night's test split, honestly: a task asked 3 times or more keeps its latest ask as test
unless that ask is a literal repeat; the report names what was withheld and why, and a
proposal with no test score says so in one line with the reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.cli.nights import print_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from tests.helpers.cli_run import skillopt_in_process
from tests.helpers.night import PERSONA, night_settings, night_world, write_persona

FIX = "no, use pnpm instead of npm"
TESTS = "Run `npm test` to run the suite."

#: Two tasks asked three times each, every time in other words: "run the tests" and a longer
#: request holding its words ("run the tests with coverage in the api and web packages").
#: Mining keeps them apart (one has three times the other's content words), yet each ask of
#: one is a near-duplicate of the other's (its words a subset): the split used to withhold
#: every val and test ask of both, so the night had no test score (and no val).
NEAR = [
    (agent, [(ask, TESTS, FIX)])
    for agent, ask in (
        ("claude_code", "run the tests"),
        ("claude_code", "run the tests with coverage in the api and web packages"),
        ("codex", "please run the tests for me"),
        ("codex", "please run the tests with coverage in the api and web packages for me"),
        ("claude_code", "could you run the tests now?"),
        ("claude_code", "could you run the tests with coverage in the api and web packages now?"),
    )
]

#: The install request asked twice in other words (train, val); "run the tests" three times,
#: the third time word for word as the first, in a new session (the same context): its latest
#: ask is a literal repeat of a train ask, so there is no test occurrence at all.
REPEAT = [
    (agent, [(ask, answer, FIX)])
    for agent, ask, answer in (
        ("claude_code", "how do I install the dependencies?", "Run `npm install`."),
        ("claude_code", "run the tests", TESTS),
        ("codex", "please install the dependencies for me", "Run `npm install`."),
        ("codex", "please run the tests for me", TESTS),
        ("claude_code", "Run the  tests", TESTS),
    )
]


@pytest.fixture
def night(tmp_path, isolated_home, capsys):
    """Run a night over ``conversations``; returns (result, store, printed run output)."""

    def run(conversations):
        project, target = night_world(tmp_path, isolated_home, "# rules\n", conversations)
        store = Store(paths.db_path())
        with serve(write_persona(tmp_path, PERSONA)) as sim:
            from skillopt_sleep.night.run import run_night

            result = run_night(store, night_settings(isolated_home, project, target, sim.url))
        capsys.readouterr()
        print_night(result)
        return result, store, " ".join(capsys.readouterr().out.split())

    return run


def _report(store: Store, pid: str) -> str:
    return (Path(store.proposals.get(pid).dir) / "report.md").read_text("utf-8")


def test_a_night_over_tasks_asked_three_times_reports_a_test_score(night):
    result, store, printed = night(NEAR)
    tasks = [t for t in store.tasks.all() if t.split]
    assert len(tasks) == 2 and all(len(t.occurrences) == 3 for t in tasks), tasks
    # each task: its first ask trains, its second validates, its latest is the test
    assert result.summary.val == 2 and result.summary.test == 2, result.summary
    assert not result.summary.withheld and not result.summary.test_note
    assert result.status == "succeeded" and result.proposal_id
    assert result.test_before is not None and result.test_after is not None
    assert result.test_after > result.test_before
    assert f"test {result.test_before:.3f} -> {result.test_after:.3f}" in printed, printed
    report = _report(store, result.proposal_id)
    assert re.search(r"^- test score: \d\.\d+ → \d\.\d+ \(held out; report only\)$", report, re.M)
    assert "no test score" not in report


def test_no_test_score_is_said_in_one_line_with_the_withheld_ask_named(night):
    result, store, printed = night(REPEAT)
    assert result.status == "succeeded" and result.proposal_id, result.summary
    assert result.summary.test == 0 and result.test_before is None
    tests = next(t for t in store.tasks.all() if "run the tests" in t.intent.lower())
    first, _, latest = sorted(tests.occurrences, key=lambda o: o.when)
    assert latest.split == "" and first.split == "train"
    why = (
        f"no test score: the latest occurrence of task {tests.id} ({latest.key}) repeats train "
        f"occurrence {first.key} word for word, with the same context"
    )
    assert result.summary.test_note == why
    [held] = result.summary.withheld or []
    assert (held.task_id, held.occurrence) == (tests.id, latest.key)
    assert held.why.startswith(
        f"withheld from test: the same wording and context as train occurrence {first.key} "
        "(a literal repeat"
    )
    # `run`: the withheld ask, then the one line instead of "test — -> —"
    assert f"{latest.key} (task {tests.id}): withheld from test" in printed, printed
    assert why in printed and "no test score (above)" in printed and "test — ->" not in printed
    # the proposal's report, as `show` prints it
    shown = skillopt_in_process("show", result.proposal_id)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert f"- {why}" in text and "test score: —" not in text
    assert f"- `{latest.key}` (task `{tests.id}`): withheld from test" in text


def test_a_report_without_a_test_score_says_why_in_one_line():
    """Every reason, as the report gives it: the split's (no test occurrence) and a budget cap
    met before the test was scored; a scored test keeps its scores."""
    from skillopt_sleep.night.stage import render_markdown
    from skillopt_sleep.results import NightSummary, ProposalReport, Scores

    def test_lines(summary: NightSummary, scores: Scores | None = None) -> list[str]:
        report = ProposalReport(
            id="p1",
            night_id=1,
            created_at="2026-01-06T00:00:00Z",
            target="/t/CLAUDE.md",
            base_hash="",
            new_hash="h",
            summary=summary,
            scores=scores or Scores(val_before=0.0, val_after=1.0),
        )
        md = render_markdown(report, "")
        return [line for line in md.splitlines() if "test score" in line]

    fewer = (
        "no test score: every task was asked fewer than 3 times (the latest of 3 asks or more "
        "is the test)"
    )
    assert test_lines(NightSummary(test_note=fewer)) == [f"- {fewer}"]
    assert test_lines(NightSummary(test_note="not scored: the cap of 9 model calls was met")) == [
        "- no test score: the cap of 9 model calls was met"
    ]
    assert test_lines(NightSummary(), Scores(test_before=0.25, test_after=0.75)) == [
        "- test score: 0.250 → 0.750 (held out; report only)"
    ]
