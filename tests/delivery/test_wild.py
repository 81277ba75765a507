"""In the wild, with sessions in the agents' real formats (the real-CLI case is in
test_certified_deployed.py): another agent's sessions never count for or against a
document that agent does not load."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.delivery.wild import in_the_wild, record_reach
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.night.run import run_night
from skillopt_sleep.proposals import adopt
from skillopt_sleep.simulator import serve
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_codex_session, write_conversations


def _world(tmp_path: Path, home: Path, conversations=DEMO_CONVERSATIONS) -> tuple[Path, Store]:
    """The demo's sessions (or ``conversations``) in ``home`` for ``tmp_path/webapp``, and
    the store."""
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(home, project, conversations)
    return project, Store(paths.db_path())


def _settings(home: Path, project: Path, url: str):
    """The demo's settings against the simulator at ``url`` (Claude Code's memory file)."""
    return load_settings(Path("/nonexistent/config.toml"), **demo_settings(home, project, url))


def test_another_agents_sessions_are_not_evidence_and_raise_no_flag(tmp_path, isolated_home):
    project, store = _world(tmp_path, isolated_home)
    with serve("demo") as sim:
        settings = _settings(isolated_home, project, sim.url)
        result = run_night(store, settings)
    assert result.status == "succeeded" and result.summary.delivery is not None
    assert result.summary.delivery.agent == "claude_code"
    adopt(store, result.proposal_id)

    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    for i in range(3):  # Codex asks the task again: CLAUDE.md is not a file Codex reads
        write_codex_session(
            isolated_home,
            project,
            [("how do I install the dependencies?", "Run `npm install`.", None)],
            when=later + dt.timedelta(minutes=i),
        )
    harvest(store, settings)
    record_reach(store)
    [wild] = in_the_wild(store)
    assert wild.mode == "memory" and wild.other_agents == 3
    assert (wild.sessions, wild.reached, wild.flag) == (0, 0, None)


def test_a_broken_answer_in_the_wild_is_no_success(tmp_path, isolated_home):
    """In the user's later sessions an answer counts as passed only when it is whole: a bare
    keyword that mentions pnpm (the task's check) is no success."""
    from skillopt_sleep.testing.sessions import write_claude_session

    project, store = _world(tmp_path, isolated_home)
    with serve("demo") as sim:
        settings = _settings(isolated_home, project, sim.url)
        result = run_night(store, settings)
    assert result.status == "succeeded"
    adopt(store, result.proposal_id)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    for i, answer in enumerate(["Run `pnpm install` in the project root.", "pnpm"]):
        write_claude_session(
            isolated_home,
            project,
            [("how do I install the dependencies?", answer, None)],
            when=later + dt.timedelta(minutes=i),
        )
    harvest(store, settings)
    record_reach(store)
    [wild] = in_the_wild(store)
    assert wild.sessions == 2 and wild.reached == 2, wild
    assert wild.passed == 1, wild


RELEASE = "Wie veröffentliche ich ein Release?"


def test_a_task_judged_by_its_rubric_alone_passes_in_the_wild_once_a_night_judged_it(
    tmp_path, isolated_home
):
    """A German user's correction the regexes cannot read ("`make release` is missing")
    gives a task with a rubric and no check. Its judge passed the transcript's control (it
    scores the corrected answer 0), so after adopt the next night judges the first answers of
    the sessions the document reached, once, and ``status`` counts the good one as passed."""
    from skillopt_sleep.testing.sessions import write_claude_session

    fix = "Das ist unvollständig, `make release` fehlt."
    project, store = _world(
        tmp_path,
        isolated_home,
        DEMO_CONVERSATIONS + [("claude_code", [(RELEASE, "Führe `make build` aus.", fix)])],
    )
    with serve("demo") as sim:
        settings = _settings(isolated_home, project, sim.url)
        result = run_night(store, settings)
        assert result.status == "succeeded"
        (release,) = [t for t in store.tasks.all() if t.intent == RELEASE]
        assert release.checks == [] and "`make release`" in release.rubric
        assert any(
            r.task_id.startswith(release.id) for r in store.rollouts.of_night(result.night_id, None)
        )
        adopt(store, result.proposal_id)

        later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
        for i, (answer, followup) in enumerate(
            [
                ("Führe `make build` und dann `make release` aus.", None),
                ("Führe `make build` aus.", None),
                ("Führe `make build` aus.", fix),  # corrected again, in German
            ]
        ):
            write_claude_session(
                isolated_home,
                project,
                [(RELEASE, answer, followup)],
                when=later + dt.timedelta(minutes=i),
            )
        harvest(store, settings)
        record_reach(store)
        [wild] = in_the_wild(store)
        assert (wild.sessions, wild.reached, wild.unjudged) == (3, 0, 3), wild

        sim.reset()
        run_night(store, settings)  # judges the three answers, once
        assert sim.stats.by_role["judge"] >= 3
        [wild] = in_the_wild(store)
        assert (wild.sessions, wild.reached, wild.passed, wild.unjudged) == (3, 3, 1, 0), wild
        # the German correction is one by what the night read in it (the words say nothing)
        assert wild.corrected == 1, wild

        sim.reset()
        run_night(store, settings)
        assert sum(sim.stats.by_role.values()) == 0  # nothing new: nothing judged again
