"""The night against a real model: Qwen2.5-Coder-1.5B-Instruct as the target
(docs/realmodel.md; it samples at a temperature, so its answers vary), the simulator as the
optimizer. (b) the null experiment: an optimizer that proposes only vacuous edits, night after
night, gets none certified; (c) the same world with an optimizer that derives the user's rules
from the corrections: the rules the user asked for are certified, a harmful and a vacuous one
are not. The nights share one store, so what one replayed the next takes from the cache."""

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
from tests.helpers.night import night_settings
from tests.helpers.store import db_rows

pytestmark = [pytest.mark.realmodel, pytest.mark.xdist_group("realmodel"), pytest.mark.slow]

#: the recurring requests: each asked three times in other words (train, val, test), answered
#: as the 1.5B tends to answer, and corrected the same way each time
REQUESTS = {
    "install the dependencies of this node project": (
        "Run `npm install`.",
        "no, use pnpm instead of npm",
    ),
    "run the tests of this python project": (
        "Run `python -m unittest discover`.",
        "use pytest instead of unittest",
    ),
    "format the python code of this project": ("Run `black .`.", "no, use ruff instead of black"),
    "create a virtual environment for this python project": (
        "Run `python -m venv .venv`.",
        "use uv instead of venv",
    ),
}
WORDINGS = ("how do I {}?", "please {} for me", "could you {} now?")
CONVERSATIONS = [
    (agent, [(wording.format(ask), answer, fix)])
    for ask, (answer, fix) in REQUESTS.items()
    for agent, wording in zip(("claude_code", "codex", "claude_code"), WORDINGS, strict=True)
]
#: vacuous edits, a different set each night (none of them a placebo of the noise probe)
VACUOUS_NIGHTS = (
    ("Be helpful and precise.", "Answer in clear English.", "Think before you answer."),
    ("Be concise.", "Double-check your answer.", "Write clean code."),
    ("Stay focused on the task.", "Use good judgement.", "Explain your reasoning briefly."),
    ("Be accurate.", "Prefer simple solutions.", "Be polite and professional."),
)
#: what the 1.5B target is given per answer (short commands; 2 shared cores)
TARGET = {
    "name": "openai_compatible",
    "model": "qwen2.5-coder-1.5b-instruct",
    "api_key": "local",
    "max_retries": 0,
    "timeout": 900,
    "max_tokens": 64,
    "temperature": 0.7,
}


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
    document.write_text("# Project rules\n", encoding="utf-8")
    return World(home, project, document, root / "skillopt-home", real_model)


@pytest.fixture
def night(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``night(order, useless=())``: one night against the real target with the simulator as
    the optimizer proposing ``order``'s groups; returns (result, edits, rollouts)."""
    monkeypatch.setenv("HOME", str(world.home))
    monkeypatch.setenv("SKILLOPT_SLEEP_HOME", str(world.state))
    store = Store(paths.db_path())

    def run(order: list[str], useless: tuple[str, ...] = ()) -> tuple[NightResult, list, list]:
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
                target={**TARGET, "base_url": world.model_url + "/v1"},
                rubric=False,
                batch_size=4,
                notify={"desktop": False},
            )
            result = run_night(store, settings)
        edits = db_rows(store, "edits", "night_id = ?", [result.night_id])
        rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
        return result, edits, rollouts

    yield run
    store.close()


def _old_gate_takes(rollouts: list[dict[str, Any]]) -> int:
    """How many of the night's candidates the deterministic gate (one sample, no noise)
    would have taken: each candidate's sample 0 (one document hash) against the val
    baseline's sample 0."""

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
    return sum(gate(base, scores(rows)).accepted for rows in candidates.values())


def test_null_experiment_no_vacuous_edit_is_certified_night_after_night(night):
    tried, moved, old_gate = 0, 0, 0
    for useless in VACUOUS_NIGHTS:
        result, edits, rollouts = night(["useless"], useless)
        assert result.status == "no_change", (result.summary, edits)
        assert result.proposal_id is None
        assert [e["text"] for e in edits] == list(useless)
        assert {e["status"] for e in edits} == {"rejected"}, edits
        # the target's answers vary: the night measured it, and scored on samples
        noise = result.summary.noise
        assert noise is not None and noise.samples == 3, result.summary
        tried += len(edits)
        moved += sum(e["val_after"] != e["val_before"] for e in edits)
        old_gate += _old_gate_takes(rollouts)
    print(
        f"null experiment: {tried} vacuous edits, 0 certified; {moved} moved the val score; "
        f"the deterministic gate would have certified {old_gate}"
    )
    assert tried == 3 * len(VACUOUS_NIGHTS)
    assert moved > 0  # the answers did vary under the vacuous edits: the gate had noise to face


def test_the_users_rules_are_certified_and_nothing_else(night):
    result, edits, _ = night(["derived", "harmful", "useless"], ("Be helpful and precise.",))
    status = {e["text"]: (e["status"], e["reason"]) for e in edits}
    applied = [t for t, (st, _) in status.items() if st == "applied"]
    assert result.status == "succeeded" and result.proposal_id, status
    # what was applied is what the user asked for: a rule of a correction, nothing else
    assert applied and all(
        any(word in t for word in ("pnpm", "pytest", "ruff", "uv")) for t in applied
    ), status
    assert status["Never mention `pnpm`."][0] == "rejected"
    assert status["Be helpful and precise."][0] == "rejected"
    assert result.val_after > result.val_before
