"""Splits by occurrence in time: each task trains on its earlier occurrences, a later one
validates, the latest is test (when there are enough); the invariants of
``mining/split.py``, each tested."""

from __future__ import annotations

from skillopt_sleep.mining.split import (
    assign_splits,
    no_test,
    undistinct,
    view_id,
    views,
    withheld,
    withhold,
    wording,
)
from skillopt_sleep.models import CapsuleItem, Check, ContextCapsule, Occurrence, Task
from skillopt_sleep.night.gate import gate
from skillopt_sleep.night.replay import Scored


def occ(session: str, day: int, prompt: str = "run the tests", seen: str = "") -> Occurrence:
    """An occurrence asked on ``day``; ``seen``: the output its agent saw before answering."""
    items = [CapsuleItem(kind="output", name="git status", text=seen)] if seen else []
    return Occurrence(
        session_id=session,
        seq=0,
        when=f"2025-06-{day:02d}T10:00:00Z",
        prompt=prompt,
        context=ContextCapsule(items=items),
    )


def task(
    tid: str, days: list[int], prompt: str = "run the tests", *, repeated: bool = False, **kw
) -> Task:
    """A task asked on ``days`` in the same words; each time its agent saw a different
    ``git status`` (distinct recurrences, and none seen by another task: no literal repeat
    across tasks either) unless ``repeated`` (the same request seen alike)."""
    return Task(
        id=tid,
        intent=prompt,
        checks=[Check(kind="contains", value="pnpm")],
        occurrences=[
            occ(f"{tid}-s{d}", d, prompt, "" if repeated else f"modified: {tid}/day{d}.py")
            for d in days
        ],
        **kw,
    )


def roles(t: Task) -> list[str]:
    return [o.split for o in sorted(t.occurrences, key=lambda o: o.when)]


def assign(tasks: list[Task], replayed=None, vf=0.25, tf=0.25, **kw) -> list[Task]:
    return assign_splits(tasks, replayed or {}, vf, tf, **kw)


def test_earlier_occurrences_train_a_later_one_validates_the_latest_is_test() -> None:
    one, two, three, four = assign(
        [task("a", [1]), task("b", [1, 2]), task("c", [3, 1, 2]), task("d", [1, 2, 3, 4])]
    )
    assert roles(one) == ["train"]  # asked once: trains, not yet validated on a recurrence
    assert roles(two) == ["train", "val"]
    assert roles(three) == ["train", "val", "test"]  # by time, not by the order given
    assert roles(four) == ["train", "train", "val", "test"]
    # every scorable task learns: none is locked in a held-out split
    assert all(t.split == "train" for t in (one, two, three, four))


def test_no_occurrence_is_used_in_two_roles_in_one_night() -> None:
    tasks = assign([task("a", [1, 2, 3, 4, 5]), task("b", [1, 2]), task("c", [7])])
    replayed = views(tasks)
    keys = [(t.id, t.occurrences[0].key) for t in replayed]
    assert len({k for _, k in keys}) == len(keys)  # each occurrence replayed in one role only
    assert len({i for i, _ in keys}) == len(keys)
    for v in replayed:
        [o] = v.occurrences
        assert v.split == o.split and v.intent == o.prompt
    by_role = {
        r: {v.occurrences[0].key for v in replayed if v.split == r}
        for r in ("train", "val", "test")
    }
    assert not (by_role["train"] & by_role["val"] or by_role["train"] & by_role["test"])
    assert not by_role["val"] & by_role["test"]


def test_the_test_score_uses_only_occurrences_never_replayed_for_training_or_gating() -> None:
    t = task("a", [1, 2, 3])
    latest = sorted(t.occurrences, key=lambda o: o.when)[-1]
    for earlier in ("train", "val"):
        [got] = assign([t], {view_id("a", latest): {earlier}})
        assert "test" not in roles(got)
        assert roles(got) == ["train", "train", "val"]
    # replayed as test before (report only): still the test
    [got] = assign([t], {view_id("a", latest): {"test"}})
    assert roles(got) == ["train", "val", "test"]


def test_no_test_occurrence_is_said_in_one_line_with_its_reason() -> None:
    """Why a block has no test occurrence: every task asked fewer than 3 times, the test
    split switched off, the latest occurrence replayed by an earlier night (its note says
    so), or a literal repeat (above)."""
    tasks = assign([task("a", [1]), task("b", [1, 2])])
    assert no_test(tasks) == (
        "no test score: every task was asked fewer than 3 times (the latest of 3 asks or more "
        "is the test)"
    )
    assert no_test(assign([task("a", [1, 2, 3])], tf=0.0), test_on=False) == (
        "no test score: the test split is off (test_fraction = 0)"
    )
    t = task("a", [1, 2, 3])
    [got] = assign([t], {view_id("a", t.occurrences[2]): {"val"}})
    latest = sorted(got.occurrences, key=lambda o: o.when)[-1]
    assert latest.split == "val" and latest.note.startswith(
        "not the test: an earlier night replayed it for val"
    )
    assert withheld([got]) == []  # not withheld: it validates
    assert no_test([got, *tasks]) == (
        "no test score: the latest occurrence of task a (a-s3#0) was replayed for val by an "
        "earlier night"
    )
    # one task's test is enough for a test score
    assert no_test([got, *assign([task("c", [1, 2, 3])])]) is None


def test_a_recurring_corrected_task_is_never_locked_out_of_learning() -> None:
    """The pnpm task, corrected in two sessions of two agents, arrives over several nights:
    it trains every night (before, a task-level split could keep it in test for good)."""
    for n in range(1, 7):
        [t] = assign([task("pnpm", list(range(1, n + 1)))])
        assert t.split == "train" and roles(t).count("train") >= 1
        assert any(v.split == "train" for v in views([t]))


def test_a_near_duplicate_of_another_tasks_train_occurrence_is_held_out_still() -> None:
    """Another task's like request in other words is a later ask, no closer to the train
    prompts than a task's own recurrences: both tasks keep their val and their test (before,
    each withheld the other's, and the test split was empty)."""
    a = task("a", [1, 2, 3], prompt="add a unit test for parse_date")
    b = task("b", [4, 5, 6], prompt="add a unit test for parse_date in the other project")
    got = {t.id: t for t in assign([a, b])}
    assert roles(got["a"]) == ["train", "val", "test"]
    assert roles(got["b"]) == ["train", "val", "test"]
    assert not any(o.note for t in got.values() for o in t.occurrences)
    assert withheld(list(got.values())) == [] and no_test(list(got.values())) is None


def repeat(o: Occurrence, session: str, day: int, prompt: str | None = None) -> Occurrence:
    """``o`` asked again on ``day`` in ``session``: its wording (``prompt``: the same words,
    case and spacing aside) and context."""
    return o.model_copy(
        update={
            "session_id": session,
            "when": f"2025-06-{day:02d}T10:00:00Z",
            "prompt": prompt if prompt is not None else o.prompt,
        }
    )


def test_a_literal_repeat_of_another_tasks_occurrence_is_withheld_and_named() -> None:
    """The same words and context as another task's train (or, for a test, val) occurrence:
    the replay is the same request, a cache hit of the one training or gating replayed, so it
    is withheld, and its note names the twin."""
    a = task("a", [1, 2, 3])  # a-s1 train, a-s2 val, a-s3 test
    b = task("b", [4, 5, 6], prompt="Run the  tests")
    b.occurrences[2] = repeat(a.occurrences[0], "b-s6", 6, "RUN the tests")
    got = {t.id: t for t in assign([a, b])}
    assert roles(got["a"]) == ["train", "val", "test"]
    assert roles(got["b"]) == ["train", "val", ""]
    [(tid, held)] = withheld(list(got.values()))
    assert tid == "b" and held.key == "b-s6#0"
    assert held.note == (
        "withheld from test: the same wording and context as task a's train occurrence a-s1#0 "
        "(a literal repeat: its replay would be a cache hit of that one's, no held-out evidence)"
    )
    # b alone has no test occurrence: the one line says why
    assert no_test([got["b"]]) == (
        "no test score: the latest occurrence of task b (b-s6#0) repeats task a's train "
        "occurrence a-s1#0 word for word, with the same context"
    )
    # a val repeating another task's train ask is withheld; one repeating its val ask is no
    # leak (both gate); a test repeating that val ask is withheld
    c = task("c", [7, 8])
    c.occurrences[1] = repeat(a.occurrences[0], "c-s8", 8)
    e = task("e", [7, 8])
    e.occurrences[1] = repeat(a.occurrences[1], "e-s8", 8)
    d = task("d", [9, 10, 11])
    d.occurrences[2] = repeat(a.occurrences[1], "d-s11", 11)
    got = {t.id: t for t in assign([a, c, e, d])}
    assert roles(got["c"]) == ["train", ""]
    assert (
        got["c"]
        .occurrences[1]
        .note.startswith(
            "withheld from val: the same wording and context as task a's train occurrence a-s1#0"
        )
    )
    assert roles(got["e"]) == ["train", "val"]
    assert roles(got["d"]) == ["train", "val", ""]
    assert (
        got["d"]
        .occurrences[2]
        .note.startswith(
            "withheld from test: the same wording and context as task a's val occurrence a-s2#0"
        )
    )
    assert [(tid, o.key) for tid, o in withheld(list(got.values()))] == [
        ("c", "c-s8#0"),
        ("d", "d-s11#0"),
    ]


def test_another_projects_literal_repeat_withholds_nothing() -> None:
    """The default night trains one block per project: rule 5 applies within a block only.
    The same request in two projects keeps each its own held-out occurrences; a literal repeat
    in the same project is withheld."""
    web = task("web", [1, 2, 3], project="/src/web")
    api = task("api", [4, 5, 6], project="/src/api")
    api.occurrences[2] = repeat(web.occurrences[0], "api-s6", 6)
    twin = task("twin", [7, 8, 9], project="/src/web")
    twin.occurrences[2] = repeat(web.occurrences[0], "twin-s9", 9)
    got = {t.id: t for t in assign([web, api, twin], block_of=lambda t: t.project)}
    assert roles(got["web"]) == ["train", "val", "test"]
    assert roles(got["api"]) == ["train", "val", "test"]  # web's train ask: another block
    assert roles(got["twin"]) == ["train", "val", ""]  # web's train ask: the same block
    [(tid, held)] = withheld(list(got.values()))
    assert tid == "twin" and "as task web's train occurrence web-s1#0" in held.note
    # one block for all (a night with a project, or a skill): withheld across projects too
    one = {t.id: t for t in assign([web, api])}
    assert roles(one["api"]) == ["train", "val", ""]
    assert roles(withhold(assign([web, api], block_of=lambda t: t.project))[1]) == [
        "train",
        "val",
        "",
    ]


def test_the_gate_still_refuses_an_edit_that_makes_any_other_val_task_worse() -> None:
    tasks = assign([task("a", [1, 2]), task("b", [1, 2], prompt="lint"), task("c", [1, 2, 3])])
    val = [v for v in views(tasks) if v.split == "val"]
    assert len(val) == 3 and len({v.id for v in val}) == 3

    def scored(values: list[float]) -> dict[str, Scored]:
        return {
            v.id: Scored(task_id=v.id, answer="", tool_calls=[], hard=s, soft=None, score=s)
            for v, s in zip(val, values, strict=True)
        }

    verdict = gate(scored([0.0, 1.0, 0.0]), scored([1.0, 0.5, 1.0]))
    assert not verdict.accepted and verdict.regressions == [val[1].id]


def test_zero_fraction_switches_that_held_out_role_off() -> None:
    [t] = assign([task("a", [1, 2, 3])], tf=0.0)
    assert roles(t) == ["train", "train", "val"]
    [t] = assign([task("a", [1, 2, 3])], vf=0.0)
    assert roles(t) == ["train", "train", "test"]
    [t] = assign([task("a", [1, 2, 3])], vf=0.0, tf=0.0)
    assert roles(t) == ["train"] * 3


def test_unscorable_and_synthetic_tasks() -> None:
    unscorable = task("u", [1, 2, 3]).model_copy(update={"checks": []})
    synthetic = Task(id="s", intent="x", synthetic=True, checks=[Check(kind="contains", value="y")])
    u, s = assign([unscorable, synthetic], is_scorable=lambda t: bool(t.checks))
    assert u.split == "" and roles(u) == ["", "", ""] and views([u]) == []
    assert s.split == "train" and [v.id for v in views([s])] == ["s"]


def test_views_replay_at_most_three_train_occurrences_one_per_prompt() -> None:
    t = task("a", list(range(1, 9)), repeated=True)
    t.occurrences[0] = occ("a-first", 1, "run the unit tests with pytest")
    t.occurrences[-1] = occ("a-last", 8, "run the unit tests again")
    [t] = assign([t])
    train = [v for v in views([t]) if v.split == "train"]
    # eight occurrences: six train, the latest repeat withheld from val (no distinct earlier
    # one to validate on), the last one test; the same words seen alike are replayed once
    assert [v.intent for v in train] == ["run the unit tests with pytest", "run the tests"]
    t = task("b", [1, 2, 3, 4, 5, 6])
    t.occurrences = [occ(f"b{d}", d, f"run test suite {d}") for d in range(1, 7)]
    [t] = assign([t])
    train = [v for v in views([t]) if v.split == "train"]
    assert [v.intent for v in train] == ["run test suite 2", "run test suite 3", "run test suite 4"]


# ------------------------------------------------------------------ rule 7: distinct recurrences
def test_a_repeat_in_the_same_words_and_context_is_not_held_out() -> None:
    """Asked again in the same words (case and spacing aside) with the same context: its
    replay would be a cache hit of the train replay, so it is no val; the task says it is not
    yet validated on a distinct recurrence."""
    t = task("a", [1, 2], repeated=True)
    t.occurrences[1] = occ("a-s2", 2, "Run  the tests")
    assert wording("Run  the tests") == wording("run the tests") != wording("run the tests?")
    [got] = assign([t])
    assert roles(got) == ["train", ""] and got.split == "train"
    held = sorted(got.occurrences, key=lambda o: o.when)[1]
    assert held.note.startswith("withheld from val: the same wording and context as train")
    assert "a-s1#0" in held.note
    assert undistinct(got)
    assert [v.split for v in views([got])] == ["train"]  # nothing replayed as held out
    # the same words with a different context (another staged diff): a distinct recurrence
    [other] = assign([task("b", [1, 2])])
    assert roles(other) == ["train", "val"] and not undistinct(other)
    # other words, the same (empty) context: distinct too
    c = task("c", [1, 2], repeated=True)
    c.occurrences[1] = occ("c-s2", 2, "run the tests with coverage")
    [other] = assign([c])
    assert roles(other) == ["train", "val"] and not undistinct(other)


def test_val_moves_to_the_latest_distinct_occurrence() -> None:
    # days 1 and 3 are the same request seen alike; 2 and 4 differ
    t = task("a", [1, 2, 3, 4], repeated=True)
    t.occurrences[1] = occ("a-s2", 2, "run the tests in the api package")
    t.occurrences[3] = occ("a-s4", 4, "run the tests and the linter")
    [got] = assign([t])
    # by time day 3 would be val, but it repeats day 1: day 2 validates, day 3 trains
    assert roles(got) == ["train", "val", "train", "test"]
    assert not any(o.note for o in got.occurrences) and not undistinct(got)
    # no distinct earlier one: the latest, distinct, stays the test (it was made the val
    # before, and the test split was empty); the task is not yet validated
    t = task("b", [1, 2, 3], repeated=True)
    t.occurrences[2] = occ("b-s3", 3, "run the tests and the linter")
    [got] = assign([t])
    assert roles(got) == ["train", "", "test"] and undistinct(got)
    assert [o.key for _, o in withheld([got])] == ["b-s2#0"] and no_test([got]) is None


def test_a_test_occurrence_repeating_a_train_or_val_one_is_withheld() -> None:
    t = task("a", [1, 2, 3], repeated=True)
    t.occurrences[1] = occ("a-s2", 2, "run the tests in the api package")
    [got] = assign([t])
    assert roles(got) == ["train", "val", ""]
    latest = sorted(got.occurrences, key=lambda o: o.when)[-1]
    assert latest.note.startswith("withheld from test: the same wording and context as train")
    # a test repeating the val occurrence is no distinct evidence either
    t = task("b", [1, 2, 3], repeated=True)
    t.occurrences[0] = occ("b-s1", 1, "run the tests in the api package")
    [got] = assign([t])
    assert roles(got) == ["train", "val", ""]
    latest = sorted(got.occurrences, key=lambda o: o.when)[-1]
    assert latest.note.startswith("withheld from test: the same wording and context as val")


def test_a_request_always_asked_alike_keeps_its_roles_from_night_to_night() -> None:
    """Four asks in the same words, seen alike: no later one is a distinct recurrence, so
    none validates or tests (each would replay as a cache hit of a train one) — and the next
    night, told what this one replayed, assigns the same roles (a night that gated with a
    twin of a train ask, then trained on the ask it had withheld, sent the optimizer another
    prompt on a night with nothing new)."""
    [first] = assign([task("a", [1, 2, 3, 4], repeated=True)])
    assert roles(first) == ["train", "train", "", ""]
    assert all(o.note.startswith("withheld from") for o in first.occurrences if not o.split)
    replayed = {view_id("a", o): {o.split} for o in first.occurrences if o.split}
    [second] = assign([task("a", [1, 2, 3, 4], repeated=True)], replayed)
    assert roles(second) == roles(first)
