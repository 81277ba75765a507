"""The gate_samples sweep's arithmetic (tests/realmodel/gate_sweep.py), on made-up score pools:
no model is involved, only the night's own gate drawn the way the sweep draws it."""

from __future__ import annotations

import random

from tests.realmodel.gate_sweep import sweep

DOCS = ("baseline", "placebo 1", "placebo 2", "placebo 3", "placebo 4", "vacuous")


def noisy_pools(p: float, rule: float, tasks: int = 4, n: int = 8) -> dict:
    """Every document but the rule passes each val occurrence with chance ``p`` per sample;
    the rule with chance ``rule``."""
    rng = random.Random(7)
    val = [f"task-{i}" for i in range(tasks)]
    scores = {
        doc: {
            t: [float(rng.random() < (rule if doc == "rule" else p)) for _ in range(n)] for t in val
        }
        for doc in (*DOCS, "rule")
    }
    return {"val": val, "scores": scores}


def test_one_sample_certifies_noise_and_more_samples_do_not():
    rows = {r["k"]: r for r in sweep(noisy_pools(0.2, 1.0, tasks=8), [1, 3, 5], trials=2000)}
    # one sample each: a vacuous edit that is as good as the baseline wins by chance
    assert rows[1]["false_accept"] > 0.05
    # the probe measures the spread: the vacuous edit stays out, the real rule gets in
    assert rows[3]["false_accept"] < 0.01 and rows[5]["false_accept"] < 0.01
    assert rows[3]["power"] > 0.5 and rows[5]["power"] >= rows[3]["power"] - 0.05
    assert rows[3]["calls_per_edit"] == 8 * 3 and rows[3]["probe_calls"] == 8 * (1 + 2 + 1)


def test_a_quiet_target_certifies_the_rule_and_never_the_vacuous_edit():
    pools = noisy_pools(0.0, 1.0)
    rows = sweep(pools, [1, 2, 3], trials=200)
    assert all(r["false_accept"] == 0.0 and r["power"] == 1.0 for r in rows), rows


def test_too_few_val_occurrences_decide_nothing():
    rows = sweep(noisy_pools(0.4, 1.0, tasks=2), [3], trials=200)
    assert rows[0]["power"] == 0.0 and rows[0]["false_accept"] == 0.0
