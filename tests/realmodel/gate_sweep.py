"""How many samples per val occurrence the noise gate needs (``gate_samples``), measured
against the real model (docs/realmodel.md, "Choosing gate_samples"):

    python -m tests.realmodel.gate_sweep [--users maya,ravi] [--samples 8]
        [--temperature 1.0] [--trials 4000] [--ks 1,2,3,4,5] [--json] [--save FILE]
    python -m tests.realmodel.gate_sweep --pools FILE   # the sweep again, no model

For each sleep-bench user (tests/bench/sleep_bench.py, seed 0) the night's val split is mined
from the sessions the real CLIs wrote, as a night mines it. Every val occurrence is then
replayed through the real 1.5B (``openai_compatible``, at ``--temperature``; 1.0 is what a
request without one gets, as the agent CLIs send it) under seven documents, ``--samples``
samples each (sample index j: the server's seed for it): the user's document as it is (the
baseline), under each of four placebo rules (:data:`~skillopt_sleep.night.train.PLACEBOS`),
with the vacuous edit the null experiment proposes ("Be helpful and precise."), and with the
user's real rule (``Use `pnpm` instead of `npm`.`` / ``Use `pytest` instead of
`unittest`.``). Each replay is scored by the night's own checks.

Then, for each ``k``, ``--trials`` nights are drawn from those pools (samples without
replacement, as the night takes sample indices 0..k-1) and gated by the night's own code, as
:meth:`~skillopt_sleep.night.train.Trainer.probe_noise` does it: k = 1 is the gate without
the probe (every gain counts); for k >= 2 the probe's moves (placebo 1..k-1 and sample 1
against sample 0) give :meth:`Noise.measured`, the baseline and the candidate are each the mean
of k samples, and :func:`~skillopt_sleep.night.gate.gate` decides, after the night's
"too few val occurrences to decide" check. Printed per user and ``k``: how often the vacuous
edit is certified (a false accept), how often the real rule is (power), and the target calls
that one probe and one gated edit cost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.bench import sleep_bench
from tests.helpers import realmodel

VACUOUS = "Be helpful and precise."
RULES = {"maya": "Use `pnpm` instead of `npm`.", "ravi": "Use `pytest` instead of `unittest`."}


def pools(
    user: sleep_bench.User, base_url: str, samples: int, temperature: float, root: Path
) -> dict[str, Any]:
    """Each val occurrence's scores under each document: ``{doc: {task_id: [score at sample
    j]}}``, plus the val task ids and the calls made."""
    from skillopt_sleep.delivery.document import Document
    from skillopt_sleep.mining.judges import scorable
    from skillopt_sleep.mining.mine import mine
    from skillopt_sleep.mining.split import views
    from skillopt_sleep.night.train import PLACEBOS
    from skillopt_sleep.simulator import serve
    from skillopt_sleep.sources.ingest import harvest
    from skillopt_sleep.store import Store
    from tests.helpers.night import api_backend, night_settings

    target = {**sleep_bench.REAL_TARGET, "temperature": temperature, "base_url": base_url}
    persona = root / "persona.toml"
    persona.write_text(sleep_bench.persona(user), encoding="utf-8")
    with serve(persona) as sim:
        shutil.rmtree(sleep_bench.WORLD, ignore_errors=True)
        home, project = sleep_bench.build_world(sleep_bench.WORLD, user, 0)
        doc = project / "CLAUDE.md"
        settings = night_settings(
            home,
            project,
            doc,
            sim.url,
            target=target,
            optimizer=api_backend(sim.url, 1),
            mine_headless=True,
        )
        store = Store(root / f"{user.name}.db")
        harvest(store, settings)
        tasks = [t for t in mine(store, settings).tasks if scorable(t, settings.rubric)]
        val = [t for t in views(tasks) if t.split == "val"]
        scoring = sleep_bench.Scoring(settings, store, doc)
        base = Document.parse(sleep_bench.DOCUMENT)
        docs = {"baseline": base.render([])}
        docs |= {f"placebo {i}": base.render([p]) for i, p in enumerate(PLACEBOS[:4], 1)}
        docs |= {"vacuous": base.render([VACUOUS]), "rule": base.render([RULES[user.name]])}
        out: dict[str, dict[str, list[float]]] = {}
        for name, text in docs.items():
            out[name] = scoring.samples(val, text, samples)
        calls = scoring.calls
        store.close()
    return {"val": [t.id for t in val], "scores": out, "calls": calls}


def _scored(task_id: str, score: float) -> Any:
    from skillopt_sleep.night.replay import Scored

    return Scored(task_id=task_id, answer="", tool_calls=[], hard=score, soft=None, score=score)


def trial(
    scores: dict[str, dict[str, list[float]]],
    val: list[str],
    k: int,
    candidate: str,
    rng: random.Random,
    margin: float,
    min_val: int,
) -> bool:
    """One night's probe and one gated edit, drawn from the pools: is ``candidate``
    certified?"""
    from skillopt_sleep.night.gate import QUIET, Noise, gate

    n = len(next(iter(scores["baseline"].values())))

    def draw(doc: str, m: int) -> list[int]:
        # each document's samples drawn on their own: a real API samples every request
        # afresh (only our server ties an answer to its sample index)
        return rng.sample(range(n), m)

    if k == 1:
        b, c = draw("baseline", 1)[0], draw(candidate, 1)[0]
        current = {t: _scored(t, scores["baseline"][t][b]) for t in val}
        cand = {t: _scored(t, scores[candidate][t][c]) for t in val}
        return gate(current, cand, noise=QUIET, margin=margin).accepted
    base = draw("baseline", k)
    base0 = {t: scores["baseline"][t][base[0]] for t in val}
    # placebo j (j = 1..k-1) at a sample of its own, and the baseline's second sample
    placebo = {j: draw(f"placebo {j}", 1)[0] for j in range(1, k)}
    moves = {
        t: [scores[f"placebo {j}"][t][placebo[j]] - base0[t] for j in range(1, k)]
        + [scores["baseline"][t][base[1]] - base0[t]]
        for t in val
    }
    noise = Noise.measured(k, moves)
    current = {t: _scored(t, sum(scores["baseline"][t][i] for i in base) / k) for t in val}
    need = max(margin, noise.bound)
    room = 1.0 - sum(s.score for s in current.values()) / len(current)
    if len(val) < min_val or (room > 0 and need >= room):
        return False  # "too few val occurrences to decide": no edit is tried
    c = draw(candidate, k)
    cand = {t: _scored(t, sum(scores[candidate][t][i] for i in c) / k) for t in val}
    return gate(current, cand, noise=noise, margin=margin).accepted


def sweep(measured: dict[str, Any], ks: list[int], trials: int, seed: int = 0) -> list[dict]:
    from skillopt_sleep.config import Settings

    fields = Settings.model_fields
    margin = float(fields["gate_margin"].default)
    min_val = int(fields["gate_min_val"].default)
    rows = []
    for k in ks:
        rng = random.Random(f"{seed}:{k}")
        row: dict[str, Any] = {"k": k}
        for cand, key in (("vacuous", "false_accept"), ("rule", "power")):
            hits = sum(
                trial(measured["scores"], measured["val"], k, cand, rng, margin, min_val)
                for _ in range(trials)
            )
            row[key] = round(hits / trials, 4)
        n = len(measured["val"])
        # the probe (placebo 1, then sample 1 and k-2 placebos, then k-2 baseline samples)
        # and each edit's k samples, in target calls
        row["probe_calls"] = 0 if k == 1 else n * (1 + (k - 1) + (k - 2))
        row["calls_per_edit"] = n * k
        rows.append(row)
    return rows


def measure(
    users: str, samples: int, temperature: float, threads: int | None = None
) -> dict[str, Any]:
    """The pools of every user in ``users`` (comma-separated), through the real model."""
    saved: dict[str, Any] = {"temperature": temperature, "samples": samples, "users": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["SKILLOPT_SLEEP_HOME"] = str(root / "skillopt-home")
        model = realmodel.fetch()
        with realmodel.serve(model, root / "realmodel.log", threads=threads) as server:
            for name in [u for u in users.split(",") if u]:
                user = sleep_bench._user(name)
                base_url = server.base_url + "/v1"
                saved["users"][name] = pools(user, base_url, samples, temperature, root)
    return saved


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m tests.realmodel.gate_sweep")
    p.add_argument("--users", default="maya,ravi")
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--trials", type=int, default=4000)
    p.add_argument("--ks", default="1,2,3,4,5")
    p.add_argument("--threads", type=int, help="the model server's threads (default: by load)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--save", type=Path, help="write the measured pools (JSON) here")
    p.add_argument("--pools", type=Path, help="sweep pools saved by --save (no model is started)")
    args = p.parse_args(argv)
    ks = [int(x) for x in args.ks.split(",")]
    samples = json.loads(args.pools.read_text("utf-8"))["samples"] if args.pools else args.samples
    if max(ks) > min(samples, 5):
        p.error(f"each k needs k samples and k-1 placebos: k <= {min(samples, 5)}")
    if args.pools:
        saved = json.loads(args.pools.read_text("utf-8"))
    else:
        saved = measure(args.users, args.samples, args.temperature, args.threads)
        if args.save:
            args.save.write_text(json.dumps(saved, indent=1), encoding="utf-8")
    result: dict[str, Any] = {k: saved[k] for k in ("temperature", "samples")}
    for name, measured in saved["users"].items():
        result[name] = {
            "val": len(measured["val"]),
            "calls": measured["calls"],
            "sweep": sweep(measured, ks, args.trials),
        }
        if not args.json:
            print(f"{name}: {len(measured['val'])} val occurrences, {measured['calls']} calls")
            for doc, per in measured["scores"].items():
                means = [round(sum(v) / len(v), 2) for v in per.values()]
                print(f"  {doc:10} pass rate per val occurrence {means}")
            for row in result[name]["sweep"]:
                print("  " + json.dumps(row))
    if args.json:
        print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
