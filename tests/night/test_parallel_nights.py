"""Parallel nights that cannot corrupt: with ``workers > 1`` and a model API whose latency
varies per request, every night ends as the same night with one worker ends (scores,
verdicts, rollouts, staged document), and the val replays of a batch's candidate edits and
the judge calls are in flight together (measured where the requests arrive: the simulator)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep import paths
from skillopt_sleep.mining.split import views
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from tests.helpers.night import (
    WIDER_CONVERSATIONS,
    WIDER_PERSONA,
    api_backend,
    night_settings,
    night_world,
    write_persona,
)
from tests.helpers.store import clear_response_cache, db_rows

NIGHTS = 50


@pytest.fixture
def world(tmp_path, isolated_home):
    project, target = night_world(tmp_path, isolated_home, "# Project rules\n", WIDER_CONVERSATIONS)
    return isolated_home, project, write_persona(tmp_path, WIDER_PERSONA), target


def _settings(world: tuple[Path, Path, Path, Path], url: str, workers: int) -> Any:
    home, project, _persona, target = world
    backend = api_backend(url, workers)
    return night_settings(home, project, target, url, target=backend, optimizer=backend)


def _night(store: Store, result: Any) -> dict[str, Any]:
    """What a night decided, without what depends on timing (ids, times, cache hits)."""
    nid = result.night_id
    return {
        "status": result.status,
        "scores": [result.val_before, result.val_after, result.test_before, result.test_after],
        "proposal": result.proposal_id,
        "rules_after": result.summary.rules_after,
        "edits": [
            (e["epoch"], e["batch"], e["op"], e["text"], e["status"], e["reason"])
            + (e["val_before"], e["val_after"])
            for e in db_rows(store, "edits", "night_id = ?", [nid], order_by="id")
        ],
        "rollouts": [
            (r["phase"], r["task_id"], r["split"], r["doc_hash"], r["answer"], r["score"])
            for r in db_rows(store, "rollouts", "night_id = ?", [nid], order_by="id")
        ],
    }


@pytest.mark.slow  # fifty nights, twice
def test_fifty_nights_with_eight_workers_and_random_latency_end_as_with_one(world):
    """The reference night runs with one worker; then 50 nights with 8 workers, each with
    an empty response cache (every call is made again) and another seed for the 0-20 ms
    jitter (another order in which the workers finish). None fails, each decides exactly
    what the reference decided, and the database stays sound."""
    store = Store(paths.db_path())
    with serve(world[2], jitter=0.02, seed=0) as sim:
        reference = run_night(store, _settings(world, sim.url, 1))
        assert reference.status == "succeeded" and reference.proposal_id, reference.summary
        want = _night(store, reference)
        assert want["edits"] and want["rollouts"]
        assert sim.stats.max_in_flight == 1  # one worker: one call at a time

        parallel = _settings(world, sim.url, 8)
        concurrent = 0
        for seed in range(1, NIGHTS + 1):
            clear_response_cache(store)
            sim.seed = seed
            sim.stats.reset()
            result = run_night(store, parallel, harvest_first=False)
            assert result.cost.calls > 0  # made again, not served from the cache
            assert _night(store, result) == want, f"night {seed} differs"
            concurrent += sim.stats.max_in_flight > 1
    nights = db_rows(store, "nights")
    assert len(nights) == NIGHTS + 1
    assert [n["status"] for n in nights] == ["succeeded"] * (NIGHTS + 1)
    assert [n["error"] for n in nights] == [None] * (NIGHTS + 1)
    assert concurrent == NIGHTS  # the workers did run together in every night
    assert store.db.execute("pragma integrity_check").fetchone()[0] == "ok"
    store.close()


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["started"] < b["finished"] and b["started"] < a["finished"]


def _measure(world: tuple[Path, Path, Path, Path], workers: int) -> dict[str, int]:
    """A night with ``workers`` against a simulator answering each call after 50 ms: how
    many pairs of val replays of different documents, and of judge calls, were in flight
    at the same time, and the most calls in flight at once."""
    store = Store(paths.db_path())
    clear_response_cache(store)
    with serve(world[2], latency=0.05, full_log=True) as sim:
        sim.stats.keep = 10_000
        result = run_night(store, _settings(world, sim.url, workers))
        assert result.status == "succeeded", result.summary
        snap = sim.stats.snapshot()
    val_ids = {
        r["task_id"]
        for r in db_rows(store, "rollouts", "night_id = ? and split = 'val'", [result.night_id])
    }
    # a val replay: a target call whose prompt is a val task's (its document in the context)
    # rollouts name the occurrence each replay asked (a view of its task)
    val_intents = {v.intent[:200] for v in views(store.tasks.all()) if v.id in val_ids}
    store.close()
    assert val_intents
    calls = [r for r in snap["requests"] if r.get("finished")]
    val = [r for r in calls if r["role"] == "target" and r["prompt"] in val_intents]
    judges = [r for r in calls if r["role"] == "judge"]
    return {
        "val_docs_together": sum(
            _overlap(a, b) and a["context_full"] != b["context_full"]
            for i, a in enumerate(val)
            for b in val[i + 1 :]
        ),
        "judges_together": sum(
            _overlap(a, b) for i, a in enumerate(judges) for b in judges[i + 1 :]
        ),
        "val_calls": len(val),
        "max_in_flight": snap["max_in_flight"],
    }


def test_val_candidates_and_judge_calls_are_in_flight_together(world):
    """With 8 workers (two candidates' val replays at once: the world has 3 val tasks) the
    val replays of a batch's candidate edits (different documents) overlap in time at the
    simulator, and so do judge calls; with one worker nothing does (the measurement can tell
    the two apart)."""
    one = _measure(world, 1)
    assert one["val_calls"] >= 3
    assert one == {**one, "val_docs_together": 0, "judges_together": 0, "max_in_flight": 1}
    eight = _measure(world, 8)
    assert eight["val_docs_together"] >= 1, eight
    assert eight["judges_together"] >= 1, eight
    assert eight["max_in_flight"] > 1, eight


def test_a_judge_call_queues_behind_the_target_calls_asked_before_it(tmp_path, isolated_home):
    """10 rubric tasks on 8 workers: the 9th and 10th tasks' target calls start as soon as a
    first target call is answered, before any judge call is (a worker that ran a task's
    target call and then its judge call would start them only after a judge call)."""
    from skillopt_sleep.backends import get_backend
    from skillopt_sleep.config import BackendConfig
    from skillopt_sleep.models import Task
    from skillopt_sleep.night.replay import Cost, Meter, Replayer
    from skillopt_sleep.simulator.persona import persona_from_dict

    store = Store(tmp_path / "t.db")
    persona = persona_from_dict({"name": "queue", "default_answer": "Sure: {prompt}"})
    tasks = [
        Task(id=f"t{i}", intent=f"task number {i}", rubric="answers the task", split="val")
        for i in range(10)
    ]
    with serve(persona, latency=0.3, full_log=True) as sim:
        config = BackendConfig(**api_backend(sim.url, 8))
        backend = get_backend(config)
        meter = Meter(backend, store, Cost(), max_calls=100, max_tokens=10**9, role="target")
        scored = Replayer(meter, meter, metric="mean", workers=8).run(tasks, "# rules\n")
        calls = [r for r in sim.stats.snapshot()["requests"] if r.get("finished")]
    store.close()
    assert list(scored) == [t.id for t in tasks]  # in the order asked
    target = {r["prompt"]: r for r in calls if r["role"] == "target"}
    judges = [r for r in calls if r["role"] == "judge"]
    assert len(target) == 10 and len(judges) == 10, [r["role"] for r in calls]
    first_judge_answered = min(r["finished"] for r in judges)
    late = [target[f"task number {i}"]["started"] for i in (8, 9)]
    assert max(late) < first_judge_answered, (late, first_judge_answered)
