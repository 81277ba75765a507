"""The gate where the target's answers vary (``night/gate.py`` :class:`Noise`): a placebo
probe measures how val scores move by chance, each val occurrence is scored on several
samples, and a gain inside that movement is no gain. In-process against the simulator with a
prompt-sensitive (``fickle``) persona; the real-model tests run the same gate on a real model."""

from __future__ import annotations

import pytest

from skillopt_sleep import paths
from skillopt_sleep.cli.nights import print_night
from skillopt_sleep.night.gate import NOISE_Z, QUIET, Noise, gate
from skillopt_sleep.night.replay import Scored
from skillopt_sleep.night.run import run_night
from skillopt_sleep.night.train import PLACEBOS
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from tests.helpers.night import (
    NOISY_CONVERSATIONS,
    PERSONA,
    night_settings,
    night_world,
    noisy_persona,
    write_persona,
)
from tests.helpers.store import db_rows

#: edits that say nothing a coding agent does not do anyway (none of them is a placebo)
VACUOUS = (
    "Be helpful and precise.",
    "Answer in clear English.",
    "Think before you answer.",
    "Be concise.",
    "Double-check your answer.",
    "Write clean code.",
)


def _scores(**by_task: float) -> dict[str, Scored]:
    return {
        t: Scored(task_id=t, answer="", tool_calls=[], hard=x, soft=None, score=x)
        for t, x in by_task.items()
    }


def test_noise_is_the_root_mean_square_of_the_chance_moves_times_z():
    noise = Noise.measured(3, {"a": [1.0, 0.0], "b": [0.0, 0.0], "c": [-1.0, -1.0]})
    assert noise.varies and noise.samples == 3
    assert noise.of("a") == pytest.approx(NOISE_Z * 0.5**0.5)
    assert noise.of("b") == 0.0
    assert noise.of("c") == pytest.approx(NOISE_Z)
    # the mean of three tasks: sqrt(0.5 + 0 + 1) / 3
    assert noise.bound == pytest.approx(NOISE_Z * 1.5**0.5 / 3)
    assert not set(VACUOUS) & set(PLACEBOS)


def test_a_gain_inside_the_noise_is_no_gain_and_one_beyond_it_is():
    current = _scores(a=0.0, b=0.0, c=0.0, d=0.0)
    noise = Noise(
        samples=3, spread={"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0}, bound=0.3, varies=True
    )
    small = _scores(a=1.0, b=0.0, c=0.0, d=0.0)  # +0.25: what the noisy task does by chance
    assert gate(current, small).accepted  # a quiet gate takes it
    v = gate(current, small, noise=noise, margin=0.05)
    assert not v.accepted and "within the noise" in v.reason and "±0.300" in v.reason
    big = _scores(a=1.0, b=1.0, c=1.0, d=0.0)  # +0.75
    assert gate(current, big, noise=noise, margin=0.05).accepted
    # the margin holds even where nothing moved by chance
    calm = Noise(samples=1, spread={"a": 0.0, "b": 0.0}, bound=0.0, varies=True)
    tiny = gate(_scores(a=0.5, b=0.5), _scores(a=0.54, b=0.5), noise=calm, margin=0.05)
    assert not tiny.accepted


def test_no_task_may_get_worse_beyond_its_own_noise():
    current = _scores(a=0.0, b=1.0, c=0.0, d=0.0)
    noise = Noise(
        samples=3, spread={"a": 0.0, "b": 0.0, "c": 0.0, "d": 1.0}, bound=0.2, varies=True
    )
    # b never moved by chance: losing it is a regression whatever the mean does
    v = gate(current, _scores(a=1.0, b=0.0, c=1.0, d=1.0), noise=noise)
    assert not v.accepted and v.regressions == ["b"]
    # d moves by chance: its drop is within its noise
    ok = gate(_scores(a=0.0, b=0.0, c=0.0, d=1.0), _scores(a=1.0, b=1.0, c=1.0, d=0.0), noise=noise)
    assert ok.accepted and ok.regressions == []


def test_a_quiet_noise_keeps_the_deterministic_gate():
    current, better = _scores(a=0.0, b=0.0), _scores(a=0.5, b=0.0)
    assert gate(current, better, noise=QUIET, margin=0.5).accepted


@pytest.fixture
def noisy(tmp_path, isolated_home):
    """The prompt-sensitive world: 12 requests corrected to pnpm, each asked three times."""
    project, target = night_world(tmp_path, isolated_home, "# rules\n", NOISY_CONVERSATIONS)

    def night(order: list[str], useless: tuple[str, ...] = (), **extra):
        store = Store(paths.db_path())
        persona = write_persona(tmp_path, noisy_persona(order, useless))
        with serve(persona) as sim:
            settings = night_settings(isolated_home, project, target, sim.url, **extra)
            result = run_night(store, settings)
        edits = db_rows(store, "edits", "night_id = ?", [result.night_id])
        rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
        store.close()
        return result, edits, rollouts

    return night


def test_vacuous_edits_on_a_prompt_sensitive_target_are_never_certified(noisy):
    # six vacuous edits, each on four samples of the 12 val occurrences: more than the
    # default cap of 400 calls
    result, edits, rollouts = noisy(
        ["useless"], VACUOUS, no_regression=False, max_calls_per_night=800
    )
    assert result.status == "no_change" and result.proposal_id is None
    assert [e["text"] for e in edits] == list(VACUOUS)
    assert {e["status"] for e in edits} == {"rejected"}
    assert all("within the noise" in e["reason"] for e in edits), [e["reason"] for e in edits]
    noise = result.summary.noise
    # gate_samples = 4, the default
    assert noise is not None and noise.samples == 4 and noise.spread > 0.05
    assert len(noise.tasks) == result.summary.val == 12
    phases = {r["phase"] for r in rollouts}
    assert {f"val noise probe placebo {j}" for j in (1, 2, 3)} <= phases
    assert "val noise probe placebo 4" not in phases
    assert {f"val baseline sample {j}" for j in (1, 2, 3)} <= phases
    # every candidate scored on four samples per val occurrence
    tried = sum(e["epoch"] == 1 and e["batch"] == 1 for e in edits)
    for phase in (
        "val e1b1 candidate",
        "val e1b1 candidate sample 1",
        "val e1b1 candidate sample 2",
        "val e1b1 candidate sample 3",
    ):
        assert [r["phase"] for r in rollouts].count(phase) == tried * 12


def test_the_users_rule_is_certified_beyond_the_noise(noisy, capsys):
    result, edits, _ = noisy(["derived", "harmful", "useless"], ("Be helpful and precise.",))
    assert result.status == "succeeded" and result.proposal_id
    status = {e["text"]: e["status"] for e in edits}
    assert status["Use `pnpm` instead of `npm`."] == "applied"
    assert status["Never mention `pnpm`."] == "rejected"
    assert status["Be helpful and precise."] == "rejected"
    applied = next(e for e in edits if e["status"] == "applied")
    need = float(applied["reason"].split("±")[1].split(",")[0])
    assert applied["val_after"] - applied["val_before"] > need
    assert result.summary.noise is not None and "noise ±" in applied["reason"]
    # the proposal's report shows the spread the gain beat
    report = (paths.proposals_dir() / result.proposal_id / "report.md").read_text()
    assert f"- val noise: ±{result.summary.noise.spread:.3f} by chance" in report
    # and so does the night's outcome as `skillopt-sleep run` prints it
    print_night(result)
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "the target's answers vary: val scored on 4 sample(s) per occurrence, "
        f"spread ±{result.summary.noise.spread:.3f}"
    ) in said


def test_too_few_val_occurrences_to_decide_certifies_nothing_and_says_so(noisy):
    result, edits, _ = noisy(["derived"], gate_min_val=13)
    assert result.status == "no_change" and result.proposal_id is None
    assert edits == []  # no edit was tried: none could have been certified
    said = result.summary.undecided
    assert said and said.startswith("too few val occurrences to decide: 12")
    assert result.summary.reason == said


def test_gate_samples_1_turns_the_probe_off(noisy):
    result, _, rollouts = noisy(["derived"], gate_samples=1)
    assert result.summary.noise is None
    assert not any("probe" in r["phase"] or "sample" in r["phase"] for r in rollouts)


def test_a_quiet_target_is_probed_with_one_replay_and_gated_as_before(tmp_path, isolated_home):
    project, target = night_world(tmp_path, isolated_home, "# rules\n")
    store = Store(paths.db_path())
    with serve(write_persona(tmp_path, PERSONA)) as sim:
        result = run_night(store, night_settings(isolated_home, project, target, sim.url))
    rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
    store.close()
    assert result.status == "succeeded" and result.summary.noise is None
    phases = [r["phase"] for r in rollouts]
    # one placebo replay answered as the baseline did: quiet, and no more probing
    assert phases.count("val noise probe placebo 1") == result.summary.val
    assert not any("sample" in p or "placebo 2" in p for p in phases)
