"""Dream rollouts (``dream_samples``: K attempts per train task, contrastive reflection) and
dream recall (``dream_recall``: similar past tasks as extra train tasks), against the
simulator on loopback."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import pytest

from skillopt_sleep import paths
from skillopt_sleep.backends import get_backend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.mining.mine import near_duplicate, normalise_intent, similar
from skillopt_sleep.mining.recall import RECALL_SIMILARITY, recall
from skillopt_sleep.mining.split import view_id
from skillopt_sleep.models import Check, CompletionRequest, Occurrence, Task
from skillopt_sleep.night import lifecycle, prompts
from skillopt_sleep.night.replay import Cost, Meter
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store, now_iso
from tests.helpers.night import PERSONA, night_settings, night_world, write_persona
from tests.helpers.store import db_rows

#: the engine persona, whose install answer gets it right on a dream rollout's later samples
DREAM_PERSONA = PERSONA.replace(
    'text = "Run `npm install` in the project root."',
    'text = "Run `npm install` in the project root."\n'
    'variants = ["Run `pnpm install` in the project root."]',
    1,
)


def _meter(store: Store) -> Meter:
    backend = get_backend(
        BackendConfig(
            name="openai_compatible", base_url="http://127.0.0.1:9/v1", model="m", api_key="k"
        )
    )
    return Meter(backend, store, Cost(), max_calls=10, max_tokens=1000, role="target")


def test_a_sample_index_keys_the_cache_apart_and_sample_0_keeps_todays_key(isolated_home):
    store = Store(paths.db_path())
    meter = _meter(store)
    req = CompletionRequest(system="rules", prompt="install the deps", tools=["b", "a"])
    # the key as it was before samples existed: the same blob, nothing appended
    blob = json.dumps(
        ["openai_compatible", "m", "http://127.0.0.1:9/v1", "rules", "install the deps"]
        + [["a", "b"], 1024],
        ensure_ascii=False,
    )
    assert meter.key(req) == hashlib.sha256(blob.encode()).hexdigest()
    keys = [meter.key(req.model_copy(update={"sample": k})) for k in range(4)]
    assert keys[0] == meter.key(req)
    assert len(set(keys)) == 4
    store.close()


@pytest.mark.parametrize("name", ["anthropic", "openai_compatible"])
def test_an_http_backend_sends_the_sample_index_and_the_simulator_answers_by_it(
    isolated_home, tmp_path, name
):
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path, DREAM_PERSONA), api_key="sim-key") as sim:
        url = sim.url if name == "anthropic" else sim.url + "/v1"
        backend = get_backend(BackendConfig(name=name, base_url=url, model="m", api_key="sim-key"))
        meter = Meter(backend, store, Cost(), max_calls=10, max_tokens=10**9, role="target")
        answers = [
            meter.complete(CompletionRequest(prompt="install the dependencies", sample=k))[0].text
            for k in (0, 1, 2, 0)
        ]
        seen = [r.get("sample") for r in sim.stats.snapshot()["requests"]]
    assert answers[0] == answers[3] == "Run `npm install` in the project root."
    assert answers[1] == answers[2] == "Run `pnpm install` in the project root."
    assert seen == [0, 1, 2]  # the fourth came from the cache: sample 0's key
    store.close()


def test_the_reflect_prompt_shows_best_and_worst_only_when_there_are_contrasts():
    base: dict[str, Any] = {
        "rules": [],
        "failures": [],
        "successes": [],
        "rejected": [],
        "budget": 2,
    }
    plain = prompts.reflect_prompt(**base)
    assert prompts.reflect_prompt(**base, contrasts=[]) == plain
    assert "contrasts" not in prompts.material_of(plain)
    contrast = {
        "task": "install the deps",
        "best": {"answer": "Run `pnpm install`.", "score": 1.0},
        "worst": {"answer": "Run `npm install`.", "score": 0.0, "failed_checks": []},
    }
    text = prompts.reflect_prompt(**base, contrasts=[contrast])
    assert "distinguishes the best" in text
    assert prompts.material_of(text)["contrasts"] == [contrast]


@pytest.fixture
def world(tmp_path, isolated_home):
    project, target = night_world(tmp_path, isolated_home, "# Project rules\n")
    return isolated_home, project, target


def _sample_requests(sim) -> list[dict]:
    return [r for r in sim.stats.requests if r.get("role") == "target" and r.get("sample")]


def test_a_night_with_three_samples_contrasts_best_and_worst_and_counts_its_calls(world, tmp_path):
    home, project, target = world
    persona = write_persona(tmp_path, DREAM_PERSONA)
    store = Store(paths.db_path())
    with serve(persona, full_log=True) as sim:
        # the val gate of a deterministic target (no noise probe): this persona's later
        # samples answer right, which the noise-aware gate rightly calls chance on 3 val
        # occurrences (tests/night/test_noise_gate.py); here the dream rollouts are the point
        settings = night_settings(home, project, target, sim.url, dream_samples=3, gate_samples=1)
        result = run_night(store, settings)
        assert result.status == "succeeded", result.summary
        assert result.cost.calls == sum(sim.stats.by_role.values())

        # every train rollout of sample 0 has its samples 1 and 2, each one model call
        rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
        first = [
            r for r in rollouts if r["phase"].startswith("train e") and "sample" not in r["phase"]
        ]
        more = [r for r in rollouts if " sample " in r["phase"]]
        assert first and len(more) == 2 * len(first)
        assert {r["phase"].rsplit(" ", 1)[1] for r in more} == {"1", "2"}
        assert all(r["split"] == "train" for r in more)
        fresh = [r for r in more if not r["cached"]]
        assert len(_sample_requests(sim)) == len(fresh) > 0
        assert {r["sample"] for r in _sample_requests(sim)} == {1, 2}

        # the samples of the tasks the persona answers `npm install` or `pnpm install` (the
        # install task, the set-up task) differ: the reflect prompt shows their best and worst
        # (which of them the mini-batch holds follows the task ids, which name tmp_path)
        reflects = [r for r in sim.stats.requests if r.get("role") == "reflect"]
        contrasts = [
            (c, r["prompt_full"])
            for r in reflects
            for c in prompts.material_of(r["prompt_full"])["contrasts"]
        ]
        install = [(c, text) for c, text in contrasts if "`pnpm install`" in c["best"]["answer"]]
        assert install, [c["task"] for c, _ in contrasts]
        best_worst, prompt = install[0]
        assert "`npm install`" in best_worst["worst"]["answer"]
        assert best_worst["best"]["score"] > best_worst["worst"]["score"]
        assert "distinguishes the best" in prompt
        edits = db_rows(store, "edits", "night_id = ?", [result.night_id])
        assert any(
            e["text"] == "Use `pnpm` instead of `npm`." and e["status"] == "applied" for e in edits
        )
        # the gate is unchanged: the harmful edit is still rejected
        assert all(e["status"] != "applied" for e in edits if e["text"] == "Never mention `pnpm`.")

        # the same night again: every sample comes from the cache
        before = sum(sim.stats.by_role.values())
        again = run_night(store, settings)
        assert again.cost.calls == 0 and sum(sim.stats.by_role.values()) == before
    store.close()


def test_one_sample_makes_no_sample_call_and_no_contrast(world, tmp_path):
    home, project, target = world
    persona = write_persona(tmp_path, DREAM_PERSONA)
    store = Store(paths.db_path())
    with serve(persona, full_log=True) as sim:
        # gate_samples = 1: no noise probe either, whose samples would be sample calls too
        settings = night_settings(home, project, target, sim.url, gate_samples=1)
        result = run_night(store, settings)
        assert result.status == "succeeded", result.summary
        assert _sample_requests(sim) == []
        for r in sim.stats.requests:
            if r.get("role") == "reflect":
                assert "contrasts" not in prompts.material_of(r["prompt_full"])
        rows = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
        assert not [r for r in rows if " sample " in r["phase"]]
    store.close()


# ------------------------------------------------------------------------------ recall
WHEN = "2026-01-0{}T10:00:00+00:00"


def _task(tid: str, intent: str, roles: list[tuple[str, str]], project: str) -> Task:
    """A stored task whose occurrences have (prompt, role), oldest first."""
    occs = [
        Occurrence(session_id=f"s-{tid}-{i}", seq=i, when=WHEN.format(i + 1), prompt=p, split=r)
        for i, (p, r) in enumerate(roles)
    ]
    checks = [Check(kind="contains", value="pnpm")]
    return Task(id=tid, project=project, intent=intent, checks=checks, occurrences=occs)


def _view(t: Task, o: Occurrence) -> Task:
    return t.model_copy(
        update={"id": view_id(t.id, o), "intent": o.prompt, "split": o.split, "occurrences": [o]}
    )


def test_recall_never_pulls_a_held_out_occurrence(isolated_home, tmp_path):
    store = Store(paths.db_path())
    here = str(tmp_path)
    tonight = _task(
        "t-now",
        "install the dependencies",
        [("install the dependencies", "train"), ("install the dependencies please", "val")],
        here,
    )
    train = [_view(tonight, tonight.occurrences[0])]
    held_out = [_view(tonight, tonight.occurrences[1])]
    past = [
        # its latest occurrences were held out: only its train one may come back
        _task(
            "p-held",
            "install node modules",
            [
                ("install node modules", "train"),
                ("install the node modules", "val"),
                ("install all node modules", "test"),
            ],
            here,
        ),
        # its train occurrence was replayed as val by an earlier night: never recalled
        _task("p-replayed", "install node packages", [("install node packages", "train")], here),
        # its train prompt is a near-copy of tonight's val prompt: never recalled
        _task(
            "p-twin",
            "install the dependencies please now",
            [("install the dependencies please now", "train")],
            here,
        ),
        # held out only
        _task("p-test", "install node deps", [("install node deps", "test")], here),
        # another project
        _task("p-else", "install node modules", [("install node modules", "train")], "/else"),
        # not similar
        _task("p-far", "draw a diagram", [("draw a diagram", "train")], here),
    ]
    store.tasks.save([tonight, *past])
    settings = night_settings(isolated_home, tmp_path, tmp_path / "CLAUDE.md")
    night = lifecycle.begin(store, settings, "cli")
    replayed = past[1]
    store.rollouts.add(
        night_id=night,
        task_id=view_id(replayed.id, replayed.occurrences[0]),
        split="val",
        phase="val baseline",
        created_at=now_iso(),
    )
    got = recall(store, mined=[tonight], train=train, held_out=held_out, limit=10, threshold=0.72)
    assert [v.id for v in got] == [view_id("p-held", past[0].occurrences[0])]
    assert got[0].split == "train" and [o.split for o in got[0].occurrences] == ["train"]
    assert got[0].intent == "install node modules"
    # the invariant, whatever the ranking: nothing recalled was ever held out or is a twin
    held_prompts = [normalise_intent(h.intent) for h in held_out]
    for v in recall(
        store, mined=[tonight], train=train, held_out=held_out, limit=10, threshold=0.1
    ):
        assert all(o.split == "train" for o in v.occurrences)
        assert not any(near_duplicate(normalise_intent(v.intent), h, 10) for h in held_prompts)
        assert not store.rollouts.splits_of([v.id]).get(v.id, set()) & {"val", "test"}
    assert (
        recall(store, mined=[tonight], train=train, held_out=held_out, limit=0, threshold=0.72)
        == []
    )
    assert (
        similar(normalise_intent("install node modules"), normalise_intent(train[0].intent), 0)
        >= RECALL_SIMILARITY * 100
    )
    store.close()


def test_a_night_with_recall_trains_a_similar_past_task_and_never_holds_it_out(world):
    home, project, target = world
    store = Store(paths.db_path())
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(days=60)).isoformat()
    past = _task(
        "p-old",
        "install node modules",
        [("install node modules", "train"), ("install node modules again", "val")],
        project=str(project.resolve()),
    )
    past = past.model_copy(
        update={"occurrences": [o.model_copy(update={"when": old}) for o in past.occurrences]}
    )
    store.tasks.save([past])
    with serve(write_persona(project.parent)) as sim:
        settings = night_settings(home, project, target, sim.url, dream_recall=2)
        result = run_night(store, settings)
        assert result.status == "succeeded", result.summary
        assert result.summary.recalled == 1
        rows = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
        recalled = [r for r in rows if r["task_id"].startswith("p-old@")]
        assert recalled and {r["split"] for r in recalled} == {"train"}
        assert {r["task_id"] for r in recalled} == {view_id("p-old", past.occurrences[0])}
        assert result.cost.calls == sum(sim.stats.by_role.values())
    store.close()
