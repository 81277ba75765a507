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
        assert edits.get("Use `pnpm` instead of `npm`.") == "applied", edits
        assert first.status == "succeeded", first.summary

        sim.reset()
        again = run_night(store, settings)
        assert sum(sim.stats.by_role.values()) == 0, dict(sim.stats.by_role)
        assert again.cost.calls == 0
    assert store.readings.count() == 2


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
    replayed = {r.task_id.split("@")[0] for r in store.rollouts.of_night(result.night_id, None)}
    assert task.id not in replayed and replayed  # the install task trained, this one did not
