"""Follow-ups read by their meaning (mining/meaning.py): what the regex layer cannot decide —
another language, a complaint it has no pattern for, a second request in the same sentence —
is read by a model, compiled into checks held to the transcript's controls, and kept in the
store so it is read once. The model here is the simulator's reader (simulator/brain.py), run
in-process; tests/night/test_night_meaning.py drives it over HTTP through a night, and
tests/realmodel/test_reading.py asks the real model."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from skillopt_sleep.config import Settings
from skillopt_sleep.errors import BudgetExceeded
from skillopt_sleep.mining import corrections as fb
from skillopt_sleep.mining.meaning import Reader, compile_reading, material
from skillopt_sleep.mining.mine import mine
from skillopt_sleep.models import Task
from skillopt_sleep.simulator.brain import group_requests, read_followup
from skillopt_sleep.store import Store
from tests.helpers.store import save_turns

NOW = dt.datetime(2025, 6, 30, 12, 0, tzinfo=dt.UTC)
PROJ = "/home/u/app"


class Model:
    """The simulator's reader, counting the follow-ups it was asked to read."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.grouped: list[list[str]] = []

    def __call__(self, kind: str, shown: dict[str, Any]) -> dict[str, Any]:
        if kind == "group":
            self.grouped.append([r["text"] for r in shown["requests"]])
            return {"groups": group_requests([r["text"] for r in shown["requests"]])}
        self.asked.append(shown["follow_up"])
        return read_followup(shown["follow_up"])


def add(
    store: Store,
    key: str,
    turns: list[tuple[str, str]],
    *,
    source: str = "claude_code",
    day: int = 28,
) -> None:
    save_turns(store, key, turns, source=source, project=PROJ, day=day)


def only(tasks: list[Task], fragment: str) -> Task:
    found = [t for t in tasks if fragment in t.intent]
    assert len(found) == 1, [t.intent for t in tasks]
    return found[0]


def kinds(task: Task) -> set[tuple[str, str]]:
    return {(c.kind, c.value) for c in task.checks}


# ------------------------------------------------------------------ compiling a reading
def test_a_reading_keeps_only_checks_of_the_dsl_grounded_in_what_was_said() -> None:
    shown = material("install the deps", "npm install", "nein, `pnpm` bitte, unter 50 Zeichen")
    reading = compile_reading(
        {
            "label": "correction",
            "checks": [
                {"kind": "contains", "value": "pnpm"},
                {"kind": "contains", "value": "yarn"},  # nobody said it: invented
                {"kind": "max_chars", "value": "about 50 characters"},
                {"kind": "max_words", "value": "many"},
                {"kind": "max_words", "value": "12"},  # a number the user never said
                {"kind": "contains", "value": "install the deps"},  # the request's, not asked for
                {"kind": "not_contains", "value": "npm install"},  # the answer's: may be avoided
                {"kind": "regex", "value": "(unclosed"},
                {"kind": "exec", "value": "rm -rf /"},
                {"kind": "imperative", "value": "imperative mood"},
                "not a check",
            ],
            "rubric": ["Use pnpm.", "Use pnpm."],
        },
        shown,
    )
    assert reading.label == "correction"
    assert [(c.kind, c.value, c.origin) for c in reading.checks] == [
        ("contains", "pnpm", "reading"),
        ("max_chars", "50", "reading"),
        ("not_contains", "npm install", "reading"),
        ("imperative", "", "reading"),  # a style is a structured check, its words dropped
    ]
    assert reading.rubric == ["Use pnpm."]
    assert len(reading.dropped) == 7
    assert any("max_words 12: the user named no such number" in d for d in reading.dropped)
    assert any("'install the deps': not in the user's words" in d for d in reading.dropped)
    assert any("'yarn'" in d and "not in the user's words" in d for d in reading.dropped)
    assert any("unknown check kind 'exec'" in d for d in reading.dropped)
    # an unknown label is no correction, and a non-correction carries no checks
    assert compile_reading({"label": "maybe"}, shown).label == "neutral"
    assert (
        compile_reading(
            {"label": "positive", "checks": [{"kind": "contains", "value": "pnpm"}]}, shown
        ).checks
        == []
    )


# ------------------------------------------------------------------ the reader and its store
def test_a_follow_up_is_read_once_and_then_from_the_store(store: Store) -> None:
    model = Model()
    first = Reader(store, model, max_calls=10).read(
        "install the deps", "npm install", "Nein, verwende `pnpm` statt `npm`."
    )
    assert first is not None and first.label == "correction"
    assert {(c.kind, c.value) for c in first.checks} == {
        ("contains", "pnpm"),
        ("not_contains", "npm"),
    }
    again = Reader(store, model, max_calls=10)
    assert (
        again.read("install the deps", "npm install", "Nein, verwende `pnpm` statt `npm`.") == first
    )
    assert (again.calls, again.stored, len(model.asked)) == (0, 1, 1)
    # without a model the store still answers; what it never read stays unread
    offline = Reader(store)
    assert (
        offline.read("install the deps", "npm install", "Nein, verwende `pnpm` statt `npm`.")
        == first
    )
    assert offline.read("install the deps", "npm install", "Nein, `yarn`.") is None
    assert (offline.calls, offline.unread) == (0, 1)


def test_the_reading_cap_and_the_nights_call_cap_leave_the_rest_unread(store: Store) -> None:
    model = Model()
    capped = Reader(store, model, max_calls=1)
    assert capped.read("a", "b", "nein, `x`") is not None
    assert capped.read("a", "b", "nein, `y`") is None
    assert (capped.calls, capped.unread, len(model.asked)) == (1, 1, 1)

    def broke(kind: str, shown: dict[str, Any]) -> dict[str, Any]:
        raise BudgetExceeded("per-night cap of 3 model calls reached")

    spent = Reader(store, broke, max_calls=10)
    assert spent.read("a", "b", "nein, `z`") is None
    assert spent.read("a", "b", "nein, `w`") is None  # no second try after the cap
    assert (spent.calls, spent.unread, spent.ask) == (0, 2, None)


# ------------------------------------------------------------------ corrections by meaning
CASES = [
    # (the request, the corrected answer, the follow-up, the accepted answer, the checks kept)
    (
        "install the dependencies",
        "Run `npm install` in the project folder.",
        "Nein, verwende `pnpm` statt `npm`.",
        "Run `pnpm install` in the project folder.",
        {("contains", "pnpm"), ("not_contains", "npm")},
    ),
    (
        "write a unit test for parse_date",
        "```python\nimport unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertTrue(True)\n```",
        "No, usa `pytest` en lugar de `unittest`, y añade una sección `Pruebas`.",
        "## Pruebas\n\n```python\nimport pytest\n\ndef test_a():\n    assert True\n```",
        {("contains", "pytest"), ("not_contains", "unittest"), ("section", "Pruebas")},
    ),
    (
        "write a commit message for the retry change",
        "Added a retry mechanism to the fetch client so that transient failures are retried",
        "Non, trop long : 50 caractères au plus, à l'impératif.",
        "Add retries to the fetch client",
        {("max_chars", "50"), ("imperative", "")},
    ),
]


@pytest.mark.parametrize(("request_", "answer", "followup", "accepted", "want"), CASES)
def test_corrections_in_other_languages_become_validated_checks(
    store: Store, request_: str, answer: str, followup: str, accepted: str, want: set
) -> None:
    # the regexes know English: only the Spanish "No, …" opens like a correction to them
    assert (fb.classify(followup) == "correction") == followup.startswith("No,")
    model = Model()
    add(
        store,
        "s1",
        [
            ("user", request_),
            ("assistant", answer),
            ("user", followup),
            ("assistant", accepted),
            ("user", "Danke!"),
        ],
    )
    report = mine(store, Settings(min_sessions=1), now=NOW, reader=Reader(store, model))
    task = only(report.tasks, request_)
    assert kinds(task) == want
    # each check kept passed the transcript's controls: it fails the corrected answer and
    # passes the accepted one
    for c in task.checks:
        assert c.controls["negative"] == "pass" and c.controls["positive"] == "pass", c
    assert task.corrections and followup in task.corrections[0]
    # the correction was read; the thanks after the accepted answer is one by its words
    assert report.read == 1 and model.asked == [followup]


def test_two_requests_in_one_sentence_both_reach_a_check(store: Store) -> None:
    followup = "no, use `pytest` and add a `Testing` section"
    regex_only = fb.analyze(followup, "import unittest", correction=True)
    assert not any(c.kind == "section" for c in regex_only.derived)  # the regexes miss half
    add(
        store,
        "s1",
        [
            ("user", "write a unit test for slugify"),
            ("assistant", "```python\nimport unittest\n```"),
            ("user", followup),
            (
                "assistant",
                "## Testing\n\n```python\nimport pytest\n\ndef test_slug():\n    assert slugify('A b') == 'a-b'\n```",
            ),
            ("user", "thanks"),
        ],
    )
    report = mine(store, Settings(min_sessions=1), now=NOW, reader=Reader(store, Model()))
    task = only(report.tasks, "slugify")
    assert {("contains", "pytest"), ("section", "Testing")} <= kinds(task)


def test_a_complaint_about_form_is_a_correction_in_any_language(store: Store) -> None:
    for followup in ("that test is cut off", "the answer got truncated", "it is incomplete"):
        assert fb.classify(followup) == "correction", followup
    model = Model()
    add(
        store,
        "s1",
        [
            ("user", "schreib einen Test für parse_date"),
            ("assistant", "import pytest\nfrom dates import parse_date\n\nclass"),
            ("user", "Der Test ist abgeschnitten."),
            (
                "assistant",
                "```python\nfrom dates import parse_date\n\ndef test_iso():\n    assert parse_date('2024-01-02')\n```",
            ),
        ],
    )
    report = mine(store, Settings(min_sessions=1), now=NOW, reader=Reader(store, model))
    task = only(report.tasks, "parse_date")
    assert task.corrections == ["Der Test ist abgeschnitten."]
    assert "abgeschnitten" in task.rubric  # judged by its rubric, and every answer must be whole
    assert model.asked == ["Der Test ist abgeschnitten."]
    assert report.dropped.get("correction_by_meaning") == 1


def test_new_requests_and_thanks_in_another_language_stay_what_they_are(store: Store) -> None:
    model = Model()
    add(
        store,
        "s1",
        [
            ("user", "erkläre die Funktion parse_date"),
            ("assistant", "Sie liest ein Datum im ISO-Format."),
            ("user", "Danke, perfekt!"),
            ("user", "Jetzt füge einen Test für slugify hinzu"),
            ("assistant", "```python\ndef test_slugify():\n    assert slugify('A') == 'a'\n```"),
        ],
    )
    report = mine(store, Settings(min_sessions=1), now=NOW, reader=Reader(store, model))
    assert only(report.tasks, "parse_date").corrections == []
    assert only(report.tasks, "slugify").corrections == []  # a new request, not a correction
    # both are decided by their words in German (the fast path): nothing to read
    assert model.asked == []


def test_one_users_requests_in_another_language_across_agents_are_one_task_each(
    store: Store,
) -> None:
    """The same German requests asked in Claude Code, Codex and Copilot with German
    corrections: one task per request, every occurrence joined, every correction recognised,
    each task with a validated check."""
    model = Model()
    sessions = [
        (
            "claude_code",
            20,
            "Installiere die Abhängigkeiten des Projekts",
            "Führe `npm install` aus.",
            "Nein, verwende `pnpm` statt `npm`.",
            "Führe `pnpm install` aus.",
        ),
        (
            "codex",
            22,
            "Installiere die Abhängigkeiten des Projekts",
            "Führe `npm ci` aus.",
            None,
            None,
        ),
        (
            "copilot",
            24,
            "Installiere die Abhängigkeiten des Projekts",
            "Führe `pnpm install` aus.",
            None,
            None,
        ),
        (
            "claude_code",
            21,
            "Schreib eine Commit-Nachricht für die Änderung am Retry",
            "Added retries to the fetch client so transient failures do not fail the sync job",
            "Zu lang: höchstens 50 Zeichen, im Imperativ.",
            "Add retries to the fetch client",
        ),
        (
            "codex",
            23,
            "Schreib eine Commit-Nachricht für die Änderung am Retry",
            "Add retries to the fetch client",
            None,
            None,
        ),
        (
            "copilot",
            25,
            "Schreib eine Commit-Nachricht für die Änderung am Retry",
            "Adds retries",
            None,
            None,
        ),
    ]
    for i, (source, day, ask, answer, followup, accepted) in enumerate(sessions):
        turns = [("user", ask), ("assistant", answer)]
        if followup:
            turns += [("user", followup), ("assistant", accepted), ("user", "Danke!")]
        add(store, f"s{i}", turns, source=source, day=day)
    report = mine(store, Settings(), now=NOW, reader=Reader(store, model))
    install = only(report.tasks, "Abhängigkeiten")
    commit = only(report.tasks, "Commit-Nachricht")
    for task in (install, commit):
        assert len(task.occurrences) == 3
        assert {o.session_id.split(":")[0] for o in task.occurrences} == {
            "claude_code",
            "codex",
            "copilot",
        }
        assert task.checks and all(c.controls.get("negative") == "pass" for c in task.checks)
    assert install.corrections == ["Nein, verwende `pnpm` statt `npm`."]
    assert commit.corrections == ["Zu lang: höchstens 50 Zeichen, im Imperativ."]
    assert {("contains", "pnpm"), ("not_contains", "npm")} <= kinds(install)
    assert {("max_chars", "50"), ("imperative", "")} <= kinds(commit)


def test_mining_without_a_model_reuses_what_a_night_read_and_calls_nothing(store: Store) -> None:
    model = Model()
    add(
        store,
        "s1",
        [
            ("user", "install the deps"),
            ("assistant", "npm install"),
            ("user", "Nein, verwende `pnpm` statt `npm`."),
            ("assistant", "pnpm install"),
        ],
    )
    with_model = mine(store, Settings(min_sessions=1), now=NOW, reader=Reader(store, model))
    without = mine(store, Settings(min_sessions=1), now=NOW)
    assert [t.checks for t in without.tasks] == [t.checks for t in with_model.tasks]
    assert without.read == 0 and len(model.asked) == 1
    # a follow-up never read is no correction until a model reads it
    store.readings.clear()
    plain = mine(store, Settings(min_sessions=1), now=NOW)
    # (unread: the follow-up; no request corrected, so no grouping of the project's requests)
    assert plain.tasks[0].corrections == [] and plain.unread == 1


# ------------------------------------------------------------------ requests by meaning
def test_the_same_request_in_other_languages_and_words_is_one_task(store: Store) -> None:
    """A user asks to install the dependencies in German, English and Spanish, in other
    words each time, across Claude Code, Codex and Copilot, and corrects it in German: one
    task, every occurrence joined (by meaning, not words), the correction recognised, a
    validated check; the grouping is read once."""
    model = Model()
    asks = [
        (
            "claude_code",
            20,
            "Installiere die Abhängigkeiten des Projekts",
            "Nein, verwende `pnpm` statt `npm`.",
        ),
        ("codex", 21, "install the dependencies", None),
        ("copilot", 22, "Instala las dependencias del proyecto", None),
        ("claude_code", 23, "please install the deps for me", None),
    ]
    for i, (source, day, ask, fix) in enumerate(asks):
        turns = [("user", ask), ("assistant", "Run `npm install`.")]
        if fix:
            turns += [("user", fix), ("assistant", "Run `pnpm install`."), ("user", "Danke!")]
        add(store, f"s{i}", turns, source=source, day=day)
    report = mine(store, Settings(), now=NOW, reader=Reader(store, model))
    [task] = [t for t in report.tasks if len(t.occurrences) > 1]
    assert len(task.occurrences) == 4 and len(report.tasks) == 1
    assert {o.session_id.split(":")[0] for o in task.occurrences} == {
        "claude_code",
        "codex",
        "copilot",
    }
    assert sorted(o.joined for o in task.occurrences) == ["", "meaning", "meaning", "meaning"]
    assert report.joined == 3
    assert {("contains", "pnpm"), ("not_contains", "npm")} <= kinds(task)
    assert task.checks and all(c.controls["negative"] == "pass" for c in task.checks)
    assert len(model.grouped) == 1
    again = mine(store, Settings(), now=NOW, reader=Reader(store, model))
    assert len(model.grouped) == 1 and again.read == 0  # kept: no second reading
    assert [len(t.occurrences) for t in again.tasks] == [4]


def test_requests_for_different_things_are_not_joined(store: Store) -> None:
    model = Model()
    for i, ask in enumerate(
        [
            "run the integration tests against the staging database",
            "führe die Tests aus",
            "run the tests",
        ]
    ):
        add(
            store,
            f"s{i}",
            [
                ("user", ask),
                ("assistant", "Run `npm test`."),
                ("user", "no, use pnpm instead of npm"),
            ],
            day=20 + i,
        )
    report = mine(store, Settings(), now=NOW, reader=Reader(store, model))
    by = {t.intent: t for t in report.tasks}
    # "run the tests" in German and in English are one task; the integration tests another
    assert len(by["run the integration tests against the staging database"].occurrences) == 1
    assert len(report.tasks) == 2


def test_a_split_keeps_what_a_reading_would_join_apart(store: Store) -> None:
    from skillopt_sleep.mining.mine import normalise_intent

    model = Model()
    for i, ask in enumerate(["install the dependencies", "Installiere die Abhängigkeiten"]):
        add(
            store,
            f"s{i}",
            [
                ("user", ask),
                ("assistant", "Run `npm install`."),
                ("user", "no, use pnpm instead of npm"),
            ],
            day=20 + i,
        )
    assert len(mine(store, Settings(), now=NOW, reader=Reader(store, model)).tasks) == 1
    store.mining.link(
        PROJ,
        normalise_intent("install the dependencies"),
        normalise_intent("Installiere die Abhängigkeiten"),
        "split",
    )
    assert len(mine(store, Settings(), now=NOW, reader=Reader(store, model)).tasks) == 2


def test_a_join_the_answers_do_not_bear_out_is_refused(store: Store) -> None:
    """A model that reads every request of the project as one (a small model does): only the
    requests the agent answered with the same code are joined."""

    class Careless(Model):
        def __call__(self, kind: str, shown: dict[str, Any]) -> dict[str, Any]:
            if kind == "group":
                return {"groups": [[r["id"] for r in shown["requests"]]]}
            return super().__call__(kind, shown)

    asks = [
        (
            "Installiere die Abhängigkeiten",
            "Führe `npm install` aus.",
            "no, use pnpm instead of npm",
        ),
        ("install the dependencies", "Run `npm install`.", None),
        (
            "write a slugify function in utils.py",
            "```python\ndef slugify(s):\n    return s.lower()\n```",
            None,
        ),
    ]
    for i, (ask, answer, fix) in enumerate(asks):
        turns = [("user", ask), ("assistant", answer)] + ([("user", fix)] if fix else [])
        add(store, f"s{i}", turns, day=20 + i)
    report = mine(store, Settings(min_sessions=1), now=NOW, reader=Reader(store, Careless()))
    by = {t.intent: t for t in report.tasks}
    assert len(by["Installiere die Abhängigkeiten"].occurrences) == 2  # the same `npm install`
    assert len(by["write a slugify function in utils.py"].occurrences) == 1
    assert report.joined == 1


# (request, corrected answer, follow-up, accepted answer, checks wanted, by the words alone?)
WORDINGS = [
    # a complaint about the form: a correction, judged by its rubric and by whole answers
    (
        "write a unit test for parse_date",
        "import pytest\n\nclass",
        "that test is cut off",
        None,
        set(),
        True,
    ),
    (
        "write a unit test for parse_date",
        "import pytest\n\nclass",
        "the answer got truncated",
        None,
        set(),
        True,
    ),
    (
        "write a unit test for parse_date",
        "import pytest\n\nclass",
        "it's incomplete",
        None,
        set(),
        True,
    ),
    (
        "write a unit test for parse_date",
        "import pytest\n\nclass",
        "Der Test ist abgeschnitten.",
        None,
        set(),
        False,
    ),
    (
        "write a unit test for parse_date",
        "import pytest\n\nclass",
        "La respuesta está cortada, incompleta.",
        None,
        set(),
        False,
    ),
    (
        "write a unit test for parse_date",
        "import pytest\n\nclass",
        "La réponse est coupée.",
        None,
        set(),
        False,
    ),
    # "use X, not Y" for a style
    (
        "add a helper that formats dates",
        "def formatDate(d): ...",
        "use snake_case, not camelCase",
        "def format_date(d): ...",
        {("snake_case", "")},
        True,
    ),
    (
        "write the commit message",
        "Added retries",
        "no, imperative mood please, not past tense",
        "Add retries",
        {("imperative", "")},
        True,
    ),
    (
        "write the commit message",
        "Added retries",
        "Nein, im Imperativ, nicht in der Vergangenheit.",
        "Add retries",
        {("imperative", "")},
        False,
    ),
    (
        "write the commit message",
        "Added retries",
        "No, en imperativo, no en pasado.",
        "Add retries",
        {("imperative", "")},
        True,
    ),
    # two requests in one sentence
    (
        "write a test for slugify",
        "import unittest",
        "no, use `pytest` and add a `Testing` section",
        "## Testing\n\nimport pytest\ndef test_a(): assert 1",
        {("contains", "pytest"), ("section", "Testing")},
        True,
    ),
    (
        "write a test for slugify",
        "import unittest",
        "Nein, verwende `pytest` und füge einen Abschnitt `Tests` hinzu.",
        "## Tests\n\nimport pytest\ndef test_a(): assert 1",
        {("contains", "pytest"), ("section", "Tests")},
        False,
    ),
    (
        "write a test for slugify",
        "import unittest",
        "No, usa `pytest` y añade una sección `Pruebas`.",
        "## Pruebas\n\nimport pytest\ndef test_a(): assert 1",
        {("contains", "pytest"), ("section", "Pruebas")},
        True,
    ),
]


@pytest.mark.parametrize(
    ("request_", "answer", "followup", "accepted", "want", "by_words"), WORDINGS
)
def test_corrections_of_each_kind_in_many_wordings_and_languages(
    store: Store,
    request_: str,
    answer: str,
    followup: str,
    accepted: str | None,
    want: set,
    by_words: bool,
) -> None:
    turns = [("user", request_), ("assistant", answer), ("user", followup)]
    if accepted:
        turns += [("assistant", accepted), ("user", "thanks")]
    add(store, "s1", turns)
    # the words alone recognise the English ones (and the Spanish "No, …")
    assert (fb.classify(followup) == "correction") == by_words, followup
    report = mine(store, Settings(min_sessions=1), now=NOW, reader=Reader(store, Model()))
    task = only(report.tasks, request_)
    assert task.corrections == [followup]
    assert want <= kinds(task), (followup, kinds(task))
    assert all(c.controls["negative"] == "pass" for c in task.checks)
    assert task.rubric  # and what no check expresses is in its rubric


def test_a_reading_the_agents_next_answer_refutes_is_no_correction(store: Store) -> None:
    """A model that reads every follow-up as a correction (the 1.5B does): the user's next
    move settles it — a follow-up the agent answered with other code was a new request; one
    it redid, or acknowledged, stays a correction."""

    class Eager(Model):
        def __call__(self, kind: str, shown: dict[str, Any]) -> dict[str, Any]:
            if kind == "read":
                self.asked.append(shown["follow_up"])
                return {"label": "correction", "checks": [], "rubric": ["do what was asked"]}
            return super().__call__(kind, shown)

    add(
        store,
        "s1",
        [
            ("user", "erkläre die Funktion parse_date"),
            ("assistant", "Sie liest ein Datum im ISO-Format."),
            ("user", "und slugify in utils.py?"),  # a new request, read as a correction
            ("assistant", "```python\ndef slugify(s):\n    return s.lower()\n```"),
        ],
    )
    add(
        store,
        "s2",
        [
            ("user", "install the deps"),
            ("assistant", "Run `npm install`."),
            ("user", "lieber `pnpm`"),  # a correction: the agent redoes the command
            ("assistant", "Run `pnpm install`."),
        ],
        day=29,
    )
    model = Eager()
    report = mine(store, Settings(min_sessions=1), now=NOW, reader=Reader(store, model))
    assert set(model.asked) == {"und slugify in utils.py?", "lieber `pnpm`"}
    assert report.dropped["reading_refuted"] == 1
    assert only(report.tasks, "parse_date").corrections == []
    assert only(report.tasks, "slugify").occurrences  # a request of its own
    assert only(report.tasks, "install the deps").corrections == ["lieber `pnpm`"]


def test_a_model_answer_that_is_no_json_reads_as_nothing_once(store: Store) -> None:
    """A model that answers a reading in prose (extract_json refuses it): the follow-up reads
    as nothing, kept so, and the next run neither asks again nor fails."""
    from skillopt_sleep.errors import BackendResponseError

    asked: list[str] = []

    def prose(kind: str, shown: dict[str, Any]) -> dict[str, Any]:
        asked.append(kind)
        raise BackendResponseError(
            "expected a JSON object in the answer, got: 'Run npm'", backend="x"
        )

    reader = Reader(store, prose)
    got = reader.read("install the deps", "Run `npm install`.", "Nein, `pnpm` bitte")
    assert got is not None and got.label == "neutral" and "no JSON object" in got.dropped[0]
    assert reader.group(["install the deps", "Installiere die Abhängigkeiten"]) == []
    again = Reader(store, prose)
    assert again.read("install the deps", "Run `npm install`.", "Nein, `pnpm` bitte") == got
    assert again.group(["install the deps", "Installiere die Abhängigkeiten"]) == []
    assert asked == ["read", "group"] and again.calls == 0
