"""Benchmark of learning on simulated personas: several nights in a row, each after a new day
of sessions, each night's proposal adopted before the next. Not a timed test: it returns
numbers; ``tests/bench/run_all.py`` writes them into ``docs/benchmarks.md``.

The world: one project whose ``CLAUDE.md`` is the trained document, Claude Code and Codex
sessions written in those agents' formats. Day *k* adds a new habit of the user's (npm → pnpm,
unittest → pytest, flake8 → ruff, docker → podman, pip → uv), asked three times over the day
(Claude Code, Codex, Claude Code) and corrected each time, plus a repeat of the previous days'
requests (so the val and test splits hold what earlier nights learnt). The simulator's target
answers with the old tool; its optimizer proposes, by persona, the edits derived from the
failed checks, a harmful edit (one that breaks earlier habits) and a useless one, in the
persona's order. Per night: held-out (test) and val scores before and after, edits applied
and rejected (and which rejected ones were the persona's harmful edits), model calls; after
the last night, the same night again (what a repeat night costs with the response cache).

Dream rollouts (``dream_samples``, ``dream_recall``): each persona runs twice, off (the
defaults) and on (:data:`DREAM`), in fresh worlds. The simulator's target then answers a
dream rollout's later samples with the habit's new tool (the persona answers' ``variants``:
a target that sometimes gets it right), so the reflect prompt gets best/worst contrasts; the
off run never asks for a later sample, so the same persona serves both.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

HABITS = [
    # (request, the target's answer, the user's correction, (new, old))
    (
        "install the dependencies",
        "Run `npm install` in the project root.",
        "no, use pnpm instead of npm",
    ),
    (
        "run the python tests",
        "Run `unittest discover` on tests/.",
        "use pytest instead of unittest",
    ),
    ("lint the python code", "Run `flake8 .` on the code.", "no, use ruff instead of flake8"),
    ("build the container image", "Run `docker build -t app .`.", "use podman instead of docker"),
    (
        "install the python requirements",
        "Run `pip install -r requirements.txt`.",
        "no, use uv instead of pip",
    ),
]
REPHRASE = ("{}", "please {}", "can you {} for me?")
#: the dream settings of the "on" runs
DREAM = {"dream_samples": 3, "dream_recall": 2}
_INSTEAD = re.compile(r"use (\S+) instead of (\S+)")

PERSONAS = {
    # the optimizer proposes what the failures suggest first, then a harmful and a useless edit
    "derived-first": ("derived", "harmful", "useless"),
    # a worse optimizer: its harmful edit comes first, then the useful one
    "harmful-first": ("harmful", "derived", "useless"),
}
HARMFUL = ["Never mention `pnpm`.", "Keep answers under 12 characters."]


def _harmful(rule: str) -> bool:
    """One of the persona's harmful edits, whatever task family the night scoped it to."""
    from skillopt_sleep.delivery.document import unscoped_text

    said = unscoped_text(rule)
    return any(said.casefold() == h.casefold() for h in HARMFUL)


USELESS = ["Be helpful and precise."]


def variant(answer: str, correction: str) -> str:
    """``answer`` as a dream rollout's later sample gives it: with the correction's new tool."""
    m = _INSTEAD.search(correction)
    return answer.replace(f"`{m.group(2)}", f"`{m.group(1)}") if m else answer


def persona_toml(order: tuple[str, ...]) -> str:
    answers = "".join(
        f'\n[[answers]]\nmatch = "{ask}"\ntext = "{answer}"\n'
        f'variants = ["{variant(answer, fix)}"]\n'
        for ask, answer, fix in HABITS
    )
    return (
        f'name = "bench-learning"\nmodels = []\ndefault_answer = "Sure: {{prompt}}"\n{answers}\n'
        f"[optimizer]\norder = {list(order)!r}\nuseless_edits = {USELESS!r}\n"
        f"harmful_edits = {HARMFUL!r}\n"
    ).replace("'", '"')


def write_day(home: Path, project: Path, day: int, base: dt.datetime) -> int:
    """Day ``day`` (0-based): the new habit asked three times, each earlier one once."""
    from skillopt_sleep.testing.sessions import write_claude_session, write_codex_session

    start = base + dt.timedelta(hours=6 * day)
    asks = [(HABITS[day], i) for i in range(3)] + [(HABITS[d], day % 3) for d in range(day)]
    for n, ((ask, answer, correction), i) in enumerate(asks):
        writer = write_codex_session if i == 1 else write_claude_session
        prompt = REPHRASE[i].format(ask)
        writer(
            home, project, [(prompt, answer, correction)], when=start + dt.timedelta(minutes=10 * n)
        )
    return len(asks)


def run_persona(
    root: Path,
    name: str,
    order: tuple[str, ...],
    nights: int,
    sim_serve: Any,
    dream: dict[str, int] | None = None,
) -> dict:
    """One persona's nights; ``dream``: the dream settings (None: the defaults)."""
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.proposals import adopt
    from skillopt_sleep.store import Store
    from tests.helpers.night import api_backend, night_settings
    from tests.helpers.store import db_rows

    home, project = root / name / "home", root / name / "project"
    project.mkdir(parents=True)
    target = project / "CLAUDE.md"
    target.write_text("# Project rules\n", encoding="utf-8")
    persona = root / name / "persona.toml"
    persona.write_text(persona_toml(order), encoding="utf-8")
    store = Store(root / name / "skillopt.db")
    base = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
    rows: list[dict[str, Any]] = []
    repeat: dict[str, Any] = {}
    with sim_serve(persona) as sim:
        backend = api_backend(sim.url, 1)
        # the val gate of a deterministic target (gate_samples = 1, no noise probe): the
        # persona's later samples are the dream rollouts' habit answers, which the noise-aware
        # gate rightly calls chance on one val occurrence; the noise gate is measured by
        # tests/bench/sleep_bench.py and tests/night/test_noise_gate.py
        settings = night_settings(
            home,
            project,
            target,
            sim.url,
            target=backend,
            optimizer=backend,
            gate_samples=1,
            **(dream or {}),
        )
        for k in range(nights):
            sessions = write_day(home, project, k, base)
            t0 = time.perf_counter()
            result = run_night(store, settings)
            wall = time.perf_counter() - t0
            edits = db_rows(store, "edits", "night_id = ?", [result.night_id])
            rejected = [e["text"] for e in edits if e["status"] == "rejected"]
            applied = [e["text"] for e in edits if e["status"] == "applied"]
            adopted = False
            if result.proposal_id and result.status == "succeeded":
                adopt(store, result.proposal_id, settings=settings)
                adopted = True
            rows.append(
                {
                    "night": k + 1,
                    "habit": HABITS[k][2].removeprefix("no, "),
                    "sessions_added": sessions,
                    "status": str(result.status),
                    "val_before": result.val_before,
                    "val_after": result.val_after,
                    "test_before": result.test_before,
                    "test_after": result.test_after,
                    "applied": applied,
                    "rejected": rejected,
                    "harmful_proposed": sum(1 for e in edits if _harmful(e["text"])),
                    "harmful_rejected": sum(1 for t in rejected if _harmful(t)),
                    "harmful_applied": sum(1 for t in applied if _harmful(t)),
                    "calls": result.cost.calls,
                    "recalled": result.summary.recalled or 0,
                    "dream_rollouts": sum(
                        1
                        for r in db_rows(store, "rollouts", "night_id = ?", [result.night_id])
                        if " sample " in r["phase"]
                    ),
                    "cached_calls": result.cost.cached_calls,
                    "seconds": wall,
                    "adopted": adopted,
                    "reason": result.summary.reason,
                }
            )
        # the last night again, nothing new: what the response cache saves
        before = sum(sim.stats.by_role.values())
        again = run_night(store, settings)
        repeat = {
            "calls": again.cost.calls,
            "cached_calls": again.cost.cached_calls,
            "simulator_calls": sum(sim.stats.by_role.values()) - before,
            "status": str(again.status),
        }
    store.close()
    document = target.read_text("utf-8")
    return {
        "order": list(order),
        "nights": rows,
        "repeat_night": repeat,
        "document_rules": [ln[2:] for ln in document.splitlines() if ln.startswith("- ")],
    }


def run_benchmark(
    root: Path, nights: int = 5, personas: tuple[str, ...] = tuple(PERSONAS)
) -> dict[str, Any]:
    from skillopt_sleep.simulator import serve

    out = {}
    for name in personas:
        res = _totals(run_persona(root, name, PERSONAS[name], nights, serve))
        res["dream"] = _totals(
            run_persona(root / "dream", name, PERSONAS[name], nights, serve, DREAM)
        )
        res["dream"]["settings"] = dict(DREAM)
        out[name] = res
        print(
            f"{name}: held-out {res['held_out_first_before']} -> {res['held_out_last_after']} over "
            f"{len(res['nights'])} nights; harmful edits rejected {res['harmful_rejected']}/"
            f"{res['harmful_proposed']}; repeat night calls {res['repeat_night']['calls']}; "
            f"calls {res['calls']}, with dream rollouts {res['dream']['calls']} (held-out "
            f"{res['dream']['held_out_first_before']} -> {res['dream']['held_out_last_after']})"
        )
    return out


def _totals(res: dict[str, Any]) -> dict[str, Any]:
    """``res`` with its held-out scores before the first and after the last night, its
    harmful edits and its model calls over all nights (the repeat night left out)."""
    first, last = res["nights"][0], res["nights"][-1]
    res["held_out_first_before"] = first["test_before"]
    res["held_out_last_after"] = last["test_after"]
    res["held_out_mean_after"] = _mean([n["test_after"] for n in res["nights"]])
    for k in ("harmful_proposed", "harmful_rejected", "harmful_applied", "calls", "recalled"):
        res[k] = sum(n[k] for n in res["nights"])
    res["dream_rollouts"] = sum(n["dream_rollouts"] for n in res["nights"])
    return res


def _mean(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


if __name__ == "__main__":
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    with tempfile.TemporaryDirectory(prefix="bench-learning-") as d:
        os.environ["SKILLOPT_SLEEP_HOME"] = str(Path(d) / "skillopt-home")
        print(json.dumps(run_benchmark(Path(d)), indent=2, default=str))
