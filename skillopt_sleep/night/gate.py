"""The validation gate.

An edit is accepted only when the candidate document's mean val score is *strictly* higher than
the current one's (by more than ``EPSILON``) and — with ``no_regression`` on (the default) — no
single val task scores lower. The epoch-end consolidation is gated without the strictness
(``strict=False``): a merge may keep the score equal but must not lower the mean or any task.

Size breaks ties (``shorter``: is the candidate's managed block shorter than the current
one?): with an equal mean score, a shorter document is accepted even under ``strict`` (the same
result for fewer tokens in every turn) and a longer one is refused even without it.

**Noise.** Where the target's answers vary — from one sample to the next, or when the document
changes in a way that says nothing (a *placebo* rule) — a score moves by chance, and a gain
inside that movement is no gain. :class:`Noise` is what the night measured before training
(``Trainer.probe_noise``): how many samples each val occurrence is scored on (``samples``; its
score is their mean) and, per task, how far that score moved by chance (``spread``). With
noise, a task counts as better or worse only when it moved by more than its spread, and an
edit is accepted only when the mean gain exceeds ``max(margin, mean spread)`` with at least one
task better beyond its spread and (``no_regression``) none worse beyond it; a change of the
mean within that bound is a tie, which size breaks as above. A quiet target (every probe answer
the same) is gated exactly as before: a deterministic gain is a real one.

When the val split is empty the night falls back to scoring on train; such a gate can only say
``unverified`` (the val slice overlaps train), and a night with only unverified edits stages no
proposal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from skillopt_sleep.night.replay import Scored, mean

EPSILON = 1e-9


#: how many standard deviations of chance a move must exceed to count (one-sided: a vacuous
#: edit passes by chance about once in 700 tries when the spread is measured well)
NOISE_Z = 3.0


@dataclass(frozen=True)
class Noise:
    """How the val scores move by chance (see the module docstring). ``spread``: per val task,
    how far its score may move by chance (:data:`NOISE_Z` standard deviations; 0 for a task
    the probe never moved); ``bound``: the same for the mean val score; ``samples``: the
    samples each val occurrence is scored on (1 when only a change of the document, not
    another sample, moved an answer)."""

    samples: int = 1
    spread: dict[str, float] = field(default_factory=dict)
    bound: float = 0.0
    #: a val answer changed under a placebo rule or another sample
    varies: bool = False

    @classmethod
    def measured(cls, samples: int, moves: dict[str, list[float]]) -> Noise:
        """From each val task's chance moves of its score (placebo minus baseline, another
        sample minus the first): per task the root mean square move, and for the mean of
        ``n`` tasks the square root of their summed squares over ``n``, times
        :data:`NOISE_Z`."""
        var = {tid: sum(m * m for m in ms) / len(ms) if ms else 0.0 for tid, ms in moves.items()}
        n = max(1, len(var))
        return cls(
            samples=samples,
            spread={tid: NOISE_Z * math.sqrt(v) for tid, v in var.items()},
            bound=NOISE_Z * math.sqrt(sum(var.values())) / n,
            varies=True,
        )

    def of(self, task_id: str) -> float:
        return self.spread.get(task_id, 0.0)


QUIET = Noise()


@dataclass
class Verdict:
    accepted: bool
    reason: str
    before: float
    after: float
    regressions: list[str]


def gate(
    current: dict[str, Scored],
    candidate: dict[str, Scored],
    *,
    no_regression: bool = True,
    strict: bool = True,
    shorter: bool | None = None,
    noise: Noise = QUIET,
    margin: float = 0.0,
) -> Verdict:
    before, after = mean(current), mean(candidate)
    if noise.varies:
        return _noisy(current, candidate, no_regression, strict, shorter, noise, margin)
    regressions = [
        tid
        for tid, s in candidate.items()
        if tid in current and s.score < current[tid].score - EPSILON
    ]
    tie = abs(after - before) <= EPSILON
    return _verdict(before, after, regressions, tie, no_regression, strict, shorter, "")


def _noisy(
    current: dict[str, Scored],
    candidate: dict[str, Scored],
    no_regression: bool,
    strict: bool,
    shorter: bool | None,
    noise: Noise,
    margin: float,
) -> Verdict:
    """The gate where answers vary: a move within the noise counts for nothing."""
    before, after = mean(current), mean(candidate)
    moves = {tid: s.score - current[tid].score for tid, s in candidate.items() if tid in current}
    worse = [tid for tid, d in moves.items() if d < -noise.of(tid) - EPSILON]
    need = max(margin, noise.bound)
    note = f" (noise ±{need:.3f}, {noise.samples} sample(s) per val occurrence)"
    tie = abs(after - before) <= need + EPSILON
    return _verdict(before, after, worse, tie, no_regression, strict, shorter, note)


def _verdict(
    before: float,
    after: float,
    regressions: list[str],
    tie: bool,
    no_regression: bool,
    strict: bool,
    shorter: bool | None,
    note: str,
) -> Verdict:
    said = f"val {before:.3f} -> {after:.3f}"
    same = "within the noise" if note else "same score"
    if tie and shorter is not None and not (no_regression and regressions):
        if shorter:
            return Verdict(
                True, f"{said}: {same}, shorter document{note}", before, after, regressions
            )
        return Verdict(False, f"{said}: {same}, not shorter{note}", before, after, regressions)
    if strict and (tie or after <= before):
        why = (
            "within the noise"
            if note and tie
            else "no strict improvement"
            if tie or after >= before - EPSILON
            else "worse"
        )
        return Verdict(False, f"{said}: {why}{note}", before, after, regressions)
    if not strict and not tie and after < before:
        return Verdict(False, f"{said}: lower{note}", before, after, regressions)
    if no_regression and regressions:
        return Verdict(
            False,
            f"{said} but {len(regressions)} task(s) got worse{note}",
            before,
            after,
            regressions,
        )
    return Verdict(True, f"{said}{note}", before, after, regressions)
