"""sleep-bench (``python -m tests.bench.sleep_bench``): its users' sessions as the real CLIs
wrote them, what a seed changes, and a ``--quick --json`` run on the simulator whose numbers
must say what the arms are: the full night learns the users' habits on their held-out
occurrences where no document cannot, at least as well as one optimizer call or a night
without its gate, with fewer items made worse than the gateless night."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillopt_sleep.night import train
from tests.bench import sleep_bench as sb


def test_the_users_sessions_are_the_real_clis_and_small() -> None:
    for user in sb.USERS:
        path = sb.USERS_DIR / f"{user.name}.json.xz"
        assert path.stat().st_size < 100_000, path
        data = sb.load_sessions(user.name)
        assert data["written_by"] == "the real CLIs", data["written_by"]
        assert {s["agent"] for s in data["sessions"]} == {"claude_code", "codex"}
        # every task asked four times, each ask in a session of its own, corrected there
        asked = sorted((s["task"], s["ask"]) for s in data["sessions"])
        assert asked == sorted((t.key, i) for t in user.tasks for i in range(4))
        for s in data["sessions"]:
            assert s["prompt"] in s["text"] and s["correction"] in s["text"]


def test_a_seed_changes_which_wording_is_held_out(tmp_path: Path) -> None:
    user = sb.USERS[0]
    latest = {}
    for seed in range(3):
        order = sb.held_out_order(user, seed)
        assert all(sorted(o) == [0, 1, 2, 3] for o in order.values())
        latest[seed] = tuple(order[t.key][-1] for t in user.tasks)
        home, project = sb.build_world(tmp_path / str(seed), user, seed)
        files = list(home.rglob("*.jsonl"))
        assert len(files) == 12
        texts = [f.read_text("utf-8") for f in files]
        assert all(str(project) in t and "__PROJECT__" not in t for t in texts)
    assert sb.held_out_order(user, 0)["install"] == [0, 1, 2, 3]  # seed 0: as recorded
    assert len(set(latest.values())) > 1
    assert [sb.order_of(s)[0] for s in range(3)] == ["derived", "harmful", "useless"]


def test_gate_off_is_the_benchs_own_and_undone() -> None:
    shipped = train.gate
    with sb.gate_off():
        assert train.gate is not shipped
        assert train.gate({}, {}).accepted
    assert train.gate is shipped


@pytest.mark.slow  # every arm for 2 users × 3 seeds on the simulator: ~10 s
def test_a_quick_run_prints_the_arms_and_the_night_learns_what_no_document_cannot() -> None:
    printed: list[str] = []
    sb.main(["--quick", "--json"], out=printed.append)
    data = json.loads(printed[-1])
    arms = data["arms"]
    assert list(arms) == list(sb.ARMS)
    for a in arms.values():
        assert 0.0 <= a["heldout"] <= 1.0
        assert isinstance(a["collateral"], int) and a["collateral"] >= 0
        assert isinstance(a["calls"], int) and a["tokens_per_turn"] > 0
        assert len(a["per_seed"]) == 3
        assert a["heldout"] == pytest.approx(sum(p["heldout"] for p in a["per_seed"]) / 3, abs=1e-3)
    assert list(data) == ["arms"]

    none, one, off, night = (arms[k] for k in sb.ARMS)
    # the target's habits: no held-out occurrence passes without rules, nothing trained
    assert none["heldout"] == 0.0 and none["calls"] == 0 and none["collateral"] == 0
    assert night["heldout"] > none["heldout"]
    assert night["heldout"] >= one["heldout"] and night["heldout"] >= off["heldout"]
    # one optimizer call per user and seed, against a night's replays
    assert one["calls"] == 2 * 3 < night["calls"]
    # without the gate the careless edits stay: more items made worse than the full night
    assert off["collateral"] > night["collateral"]
    assert off["tokens_per_turn"] > night["tokens_per_turn"]

    # seed 0 (the optimizer's derived edits first): every habit learnt, and nothing made worse:
    # the uv rule is scoped to installing dependencies, so the probe that must name pip (to
    # upgrade pip itself) keeps its answer — the rule for every task broke it (one-shot)
    s0 = night["per_seed"][0]
    assert s0["heldout"] == 1.0
    assert s0["worse"] == {"maya": [], "ravi": []}
    assert (
        "When installing dependencies or adding packages: use `uv` instead of `pip`."
        in (s0["rules"]["ravi"])
    )
    assert "probe:upgrade-pip" in one["per_seed"][0]["worse"]["ravi"]
    # each night's ending is recorded with the seed (an arm without a night says nothing)
    assert all(said.startswith("succeeded") for said in s0["nights"].values()), s0["nights"]
    assert none["per_seed"][0]["nights"] == {"maya": "", "ravi": ""}
    # one-shot takes the careless rule the optimizer offers, and the publish probe breaks
    s1 = one["per_seed"][1]
    assert "Never mention `npm`." in s1["rules"]["maya"]
    assert "probe:publish" in s1["worse"]["maya"]


def test_the_page_runner_keeps_the_sleep_bench_section_and_write_docs_fills_its_block(
    tmp_path: Path,
) -> None:
    from tests.bench import run_all

    page = tmp_path / "benchmarks.md"
    assert run_all.kept_sections(page) == []  # no page yet
    page.write_text(
        "# Benchmarks\n\n## Learning\n\nold\n\n## sleep-bench: x\n\nprose\n\n"
        "<!-- sleep-bench:sim:begin -->\nstale\n<!-- sleep-bench:sim:end -->\n\n"
        "<!-- sleep-bench:real:begin -->\nthe lead's\n<!-- sleep-bench:real:end -->\n\n"
        "## What the simulator can and cannot tell\n\nnotes\n",
        encoding="utf-8",
    )
    kept = run_all.kept_sections(page)
    assert kept[0] == "## sleep-bench: x" and "## What the simulator" not in "\n".join(kept)
    assert "the lead's" in kept and "stale" in kept

    fake = {
        "target": "simulator",
        "optimizer": "simulator",
        "sessions": {"maya": "the real CLIs"},
        "seeds": [0],
        "eval_calls": 7,
        "seconds": 1.0,
        "arms": {
            arm: {
                "per_seed": [
                    {
                        "seed": 0,
                        "order": list(sb.order_of(0)),
                        "heldout": h,
                        "collateral": c,
                        "tokens_per_turn": 4.0,
                        "calls": n,
                        "worse": {"maya": []},
                        "rules": {"maya": []},
                    }
                ]
            }
            for arm, h, c, n in (
                ("no_document", 0.0, 0, 0),
                ("one_shot", 0.5, 1, 1),
                ("gate_off", 1.0, 2, 40),
                ("full_night", 1.0, 0, 38),
            )
        },
    }
    sb.write_docs(page, fake)
    text = page.read_text("utf-8")
    assert "stale" not in text and "the lead's" in text and "notes" in text
    assert "| one_shot | 0.50 | 0.50 | 0.50–0.50 |" in text
    # computed, not typed: the full night ties gate-off on held-out and costs more calls
    assert "seed 0, heldout: full_night 1.0 vs gate_off 1.0 (equal)" in text
    assert "seed 0, calls: full_night 38 vs one_shot 1 (worse)" in text
    assert "seed 0, collateral" not in text
