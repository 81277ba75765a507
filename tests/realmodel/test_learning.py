"""The night against a real model: Qwen2.5-Coder-1.5B-Instruct as the target
(docs/realmodel.md), the simulator as the optimizer. (b) The null experiment: the target
samples at temperature 0.7, so its answers vary, and an optimizer that proposes only vacuous
edits, night after night, gets none certified (the deterministic gate, computed on the same
replays, is reported beside it). (c) The same world at the default temperature 0 with an
optimizer that derives the user's rules from the corrections: the rules the user asked for
are certified, a harmful and a vacuous one are not. The nights share one store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from skillopt_sleep import paths
from skillopt_sleep.night.gate import gate
from skillopt_sleep.night.replay import Scored
from skillopt_sleep.night.run import run_night
from skillopt_sleep.results import NightResult
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.night import NO_COLLATERAL, night_settings
from tests.helpers.store import db_rows

pytestmark = [pytest.mark.realmodel, pytest.mark.xdist_group("realmodel"), pytest.mark.slow]

#: the recurring requests: each asked three times in other words (train, val, test), answered
#: as the 1.5B tends to answer, and corrected the same way each time
REQUESTS = {
    "install the node dependencies": ("Run `npm install`.", "no, use pnpm instead of npm"),
    "run the python unit tests": (
        "Run `python -m unittest discover`.",
        "use pytest instead of unittest",
    ),
    "reformat the source files": ("Run `black .`.", "no, use ruff instead of black"),
    "check the type annotations": ("Run `mypy .`.", "use pyright instead of mypy"),
}
WORDINGS = ("how do I {}?", "please {} for me", "could you {} now?")
CONVERSATIONS = [
    (agent, [(wording.format(ask), answer, fix)])
    for ask, (answer, fix) in REQUESTS.items()
    for agent, wording in zip(("claude_code", "codex", "claude_code"), WORDINGS, strict=True)
]
#: vacuous edits, a different set each night (none of them a placebo of the noise probe)
VACUOUS_NIGHTS = (
    ("Be helpful and precise.", "Answer in clear English."),
    ("Be concise.", "Double-check your answer."),
    ("Stay focused on the task.", "Prefer simple solutions."),
)
#: what the 1.5B target is given per answer (short commands; 2 shared cores)
TARGET = {
    "name": "openai_compatible",
    "model": "qwen2.5-coder-1.5b-instruct",
    "api_key": "local",
    "max_retries": 0,
    "timeout": 900,
    "max_tokens": 32,
}
#: the null experiment's target samples (its answers vary from sample to sample, as an API
#: that allows no temperature 0 does); the rules' night keeps the default, 0
SAMPLING = 0.7


@dataclass
class World:
    home: Path
    project: Path
    document: Path
    state: Path
    model_url: str


@pytest.fixture(scope="module")
def world(real_model: str, tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("learning")
    home, project = root / "home", root / "webapp"
    home.mkdir()
    project.mkdir()
    write_conversations(home, project, CONVERSATIONS)
    document = project / "CLAUDE.md"
    # the user's own line (outside the trained block): answers short enough for 2 cores
    document.write_text("# Project rules\n\nAnswer with one shell command.\n", encoding="utf-8")
    return World(home, project, document, root / "skillopt-home", real_model)


@pytest.fixture
def night(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``night(order, useless=())``: one night against the real target with the simulator as
    the optimizer proposing ``order``'s groups; returns (result, edits, rollouts)."""
    monkeypatch.setenv("HOME", str(world.home))
    monkeypatch.setenv("SKILLOPT_SLEEP_HOME", str(world.state))
    store = Store(paths.db_path())

    def run(
        order: list[str], useless: tuple[str, ...] = (), temperature: float = 0.0, **extra: Any
    ) -> tuple[NightResult, list, list]:
        persona = world.state.parent / "persona.toml"
        persona.write_text(
            'name = "optimizer"\n[optimizer]\n'
            f"order = {json.dumps(order)}\nuseless_edits = {json.dumps(list(useless))}\n"
            'harmful_edits = ["Never mention `pnpm`."]\n',
            encoding="utf-8",
        )
        with serve(persona) as sim:
            settings = night_settings(
                world.home,
                world.project,
                world.document,
                sim.url,
                target={**TARGET, "base_url": world.model_url + "/v1", "temperature": temperature},
                rubric=False,
                batch_size=4,
                notify={"desktop": False},
                # the target's answers are capped at 32 tokens (2 shared cores): the everyday
                # requests' answers are cut short before an edit as after it, so the
                # collateral gate could hardly see a harm here, only cost replays
                **NO_COLLATERAL,
                **extra,
            )
            result = run_night(store, settings)
        edits = db_rows(store, "edits", "night_id = ?", [result.night_id])
        rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
        return result, edits, rollouts

    yield run
    store.close()


def _old_gate_takes(rollouts: list[dict[str, Any]]) -> tuple[int, int]:
    """How many of the night's candidates the deterministic gate (one sample, no noise)
    would have taken, with ``no_regression`` and without it: each candidate's sample 0 (one
    document hash) against the val baseline's sample 0."""

    def scores(rows: list[dict[str, Any]]) -> dict[str, Scored]:
        return {
            r["task_id"]: Scored(r["task_id"], r["answer"], [], r["hard"], None, r["score"])
            for r in rows
        }

    base = scores([r for r in rollouts if r["phase"] == "val baseline"])
    candidates: dict[str, list[dict[str, Any]]] = {}
    for r in rollouts:
        if r["phase"].startswith("val e") and r["phase"].endswith(" candidate"):
            candidates.setdefault(r["doc_hash"], []).append(r)
    return (
        sum(gate(base, scores(rows)).accepted for rows in candidates.values()),
        sum(gate(base, scores(rows), no_regression=False).accepted for rows in candidates.values()),
    )


@pytest.mark.timeout(1200)
def test_null_experiment_no_vacuous_edit_is_certified_night_after_night(night):
    tried, moved, old_gate, mean_gate = 0, 0, 0, 0
    for useless in VACUOUS_NIGHTS:
        result, edits, rollouts = night(["useless"], useless, temperature=SAMPLING)
        assert result.status == "no_change", (result.summary, edits)
        assert result.proposal_id is None
        assert [e["text"] for e in edits] == list(useless)
        assert {e["status"] for e in edits} == {"rejected"}, edits
        # the target's answers vary: the night measured it, and scored on samples
        noise = result.summary.noise
        assert noise is not None and noise.samples == 4, result.summary  # the default
        tried += len(edits)
        moved += sum(e["val_after"] != e["val_before"] for e in edits)
        took = _old_gate_takes(rollouts)
        old_gate, mean_gate = old_gate + took[0], mean_gate + took[1]
    print(
        f"null experiment: {tried} vacuous edits, 0 certified; {moved} moved the val score; "
        f"the deterministic gate would have certified {old_gate} ({mean_gate} without "
        "no_regression)"
    )
    assert tried == 2 * len(VACUOUS_NIGHTS)
    assert moved > 0  # the answers did vary under the vacuous edits: the gate had noise to face


@pytest.mark.timeout(900)
def test_the_users_rules_are_certified_and_nothing_else(night):
    # the harmful and the vacuous edit first, then the rules derived from the failed checks
    # (up to four), in one mini-batch
    result, edits, _ = night(
        ["harmful", "useless", "derived"], ("Be helpful and precise.",), edit_budget=6
    )
    status = {e["text"]: (e["status"], e["reason"]) for e in edits}
    applied = [t for t, (st, _) in status.items() if st == "applied"]
    print("the rules' night:", {t: st for t, (st, _) in status.items()}, result.summary.noise)
    assert result.status == "succeeded" and result.proposal_id, status
    # what was applied is what the user asked for: a rule of a correction, nothing else
    assert applied and all(
        any(word in t for word in ("pnpm", "pytest", "ruff", "pyright")) for t in applied
    ), status
    assert status["Never mention `pnpm`."][0] == "rejected"
    assert status["Be helpful and precise."][0] == "rejected"
    assert result.val_after > result.val_before
