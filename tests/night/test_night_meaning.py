"""A night for a user who does not write in English: their corrections are read by the
optimizer model (mining/meaning.py, the simulator's reader over HTTP), compiled into checks,
and the night learns from them; a repeat night with nothing new makes no model call."""

from __future__ import annotations

from skillopt_sleep import paths
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from tests.helpers.night import PERSONA, night_settings, night_world, write_persona
from tests.helpers.store import db_rows

ASK = "Installiere die Abhängigkeiten des Projekts"
FIX = "Nein, verwende `pnpm` statt `npm`."
#: the same request four times, each in other words (asked in the same words, a later ask
#: would replay as a cache hit of an earlier one and be withheld)
GERMAN = [
    ("claude_code", [(ASK, "Führe `npm install` aus.", FIX)]),
    (
        "codex",
        [("Installiere bitte die Abhängigkeiten des Projekts", "Führe `npm install` aus.", FIX)],
    ),
    (
        "claude_code",
        [("Installiere jetzt die Abhängigkeiten im Projekt", "Führe `npm install` aus.", None)],
    ),
    (
        "codex",
        [
            (
                "Kannst du die Abhängigkeiten des Projekts installieren",
                "Führe `npm install` aus.",
                None,
            )
        ],
    ),
]
GERMAN_PERSONA = (
    PERSONA + '\n[[answers]]\nmatch = "Abhängigkeiten"\ntext = "Führe `npm install` aus."\n'
)


def test_a_night_learns_from_corrections_in_another_language_and_rereads_nothing(
    tmp_path, isolated_home
):
    project, target = night_world(tmp_path, isolated_home, "# Regeln\n", GERMAN)
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path, GERMAN_PERSONA)) as sim:
        settings = night_settings(isolated_home, project, target, sim.url)
        first = run_night(store, settings)
        assert sim.stats.by_role["read"] == 2  # each correction, read once
        assert first.cost.calls == sum(sim.stats.by_role.values())
        (task,) = [t for t in store.tasks.all() if "Abhängigkeiten" in t.intent]
        assert len(task.occurrences) == 4
        assert {(c.kind, c.value, c.origin) for c in task.checks} >= {
            ("contains", "pnpm", "reading"),
            ("not_contains", "npm", "reading"),
        }
        assert task.corrections == [FIX]
        edits = {
            e["text"]: e["status"]
            for e in db_rows(store, "edits", "night_id = ?", [first.night_id])
        }
        # learned from the one install request (in German and English): scoped to it
        rule = "When installing dependencies or adding packages: use `pnpm` instead of `npm`."
        assert edits.get(rule) == "applied", edits
        assert first.status == "succeeded", first.summary

        sim.reset()
        again = run_night(store, settings)
        assert sum(sim.stats.by_role.values()) == 0, dict(sim.stats.by_role)
        assert again.cost.calls == 0
    assert store.readings.count() == 2


def test_readings_over_read_calls_are_said_left_and_read_by_the_next_night(tmp_path, isolated_home):
    """A night that meets ``read_calls`` says how many readings it left for the next night and
    records it: the next night reads them (calls with nothing new), the one after makes none."""
    project, target = night_world(tmp_path, isolated_home, "# Regeln\n", GERMAN)
    store = Store(paths.db_path())
    lines: list[str] = []
    with serve(write_persona(tmp_path, GERMAN_PERSONA)) as sim:
        settings = night_settings(isolated_home, project, target, sim.url, read_calls=1)
        first = run_night(store, settings, progress=lines.append)
        assert sim.stats.by_role["read"] == 1
        unread = first.summary.unread
        assert unread and unread >= 1
        said = f"mine: {unread} reading(s) by meaning left for the next night (read_calls = 1"
        assert any(said in line for line in lines), lines
        sim.reset()
        second = run_night(store, settings)
        assert sim.stats.by_role["read"] == 1 and second.summary.unread is None
        sim.reset()
        third = run_night(store, settings)
        assert sum(sim.stats.by_role.values()) == 0, dict(sim.stats.by_role)
        assert third.summary.unread is None
    store.close()


def test_a_rubric_whose_judge_cannot_tell_the_corrected_answer_scores_nothing(
    tmp_path, isolated_home
):
    """The simulator's judge scores any answer 1.0 against a rubric without a backticked
    term, so it fails the transcript's control (the corrected answer must score below 0.5):
    the task judged by that rubric alone leaves the night instead of certifying noise."""
    cut = "Schreib einen Test für parse_date"
    conversations = GERMAN + [
        ("claude_code", [(cut, "import pytest\n\nclass", "Der Test ist abgeschnitten.")])
    ]
    project, target = night_world(tmp_path, isolated_home, "# Regeln\n", conversations)
    store = Store(paths.db_path())
    lines: list[str] = []
    with serve(write_persona(tmp_path, GERMAN_PERSONA)) as sim:
        settings = night_settings(isolated_home, project, target, sim.url)
        result = run_night(store, settings, progress=lines.append)
    (task,) = [t for t in store.tasks.all() if t.intent == cut]
    assert task.checks == [] and "abgeschnitten" in task.rubric
    assert any("judge: 'Schreib einen Test" in line and "invalid" in line for line in lines), lines
    rollouts = store.rollouts.of_night(result.night_id, None)
    replayed = {r.task_id.split("@")[0] for r in rollouts if r.split}
    assert task.id not in replayed and replayed  # the install task trained, this one did not


def test_a_judge_answer_that_is_no_json_is_no_score_and_no_failure(tmp_path):
    """A judge that once answered in prose: its answer is in the response cache, and every
    later night gets it back. It is no score (the rubric says nothing of that answer), not a
    failed night."""
    from skillopt_sleep.backends import get_backend
    from skillopt_sleep.config import BackendConfig
    from skillopt_sleep.models import CompletionRequest
    from skillopt_sleep.night import prompts
    from skillopt_sleep.night.replay import Cost, Meter, rubric_score
    from skillopt_sleep.store.cache import CachedResponse

    store = Store(tmp_path / "t.db")
    backend = get_backend(
        BackendConfig(name="openai_compatible", base_url="http://127.0.0.1:9/v1", api_key="k")
    )
    meter = Meter(backend, store, Cost(), max_calls=5, max_tokens=10**6, role="optimizer")
    req = CompletionRequest(
        prompt=prompts.judge_prompt(task="install the deps", rubric="use `pnpm`", answer="x"),
        purpose="judge",
        max_tokens=200,
    )
    store.cache.put(meter.key(req), CachedResponse("I think it is fine.", "[]", 10, 5, 0.1))
    assert rubric_score(meter, "install the deps", "use `pnpm`", "x") is None
    assert (meter.cost.calls, meter.cost.cached_calls) == (0, 1)  # the dead port never asked
    store.close()
