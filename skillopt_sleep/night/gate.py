"""The validation gate.

An edit is accepted only when the candidate document's mean val score is *strictly* higher than
the current one's (by more than ``EPSILON``) and — with ``no_regression`` on (the default) — no
single val task scores lower. The epoch-end consolidation is gated without the strictness
(``strict=False``): a merge may keep the score equal but must not lower the mean or any task.

Size breaks ties (``shorter``: is the candidate's managed block shorter than the current
one?): with an equal mean score, a shorter document is accepted even under ``strict`` (the same
result for fewer tokens in every turn) and a longer one is refused even without it.

When the val split is empty the night falls back to scoring on train; such a gate can only say
``unverified`` (the val slice overlaps train), and a night with only unverified edits stages no
proposal.
"""

from __future__ import annotations

from dataclasses import dataclass

from skillopt_sleep.night.replay import Scored, mean

EPSILON = 1e-9


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
) -> Verdict:
    before, after = mean(current), mean(candidate)
    regressions = [
        tid
        for tid, s in candidate.items()
        if tid in current and s.score < current[tid].score - EPSILON
    ]
    tie = abs(after - before) <= EPSILON
    if tie and shorter is not None and not (no_regression and regressions):
        if shorter:
            return Verdict(
                True,
                f"val {before:.3f} -> {after:.3f}: same score, shorter document",
                before,
                after,
                regressions,
            )
        return Verdict(
            False,
            f"val {before:.3f} -> {after:.3f}: same score, not shorter",
            before,
            after,
            regressions,
        )
    if strict and after <= before + EPSILON:
        why = "worse" if after < before - EPSILON else "no strict improvement"
        return Verdict(False, f"val {before:.3f} -> {after:.3f}: {why}", before, after, regressions)
    if not strict and after < before - EPSILON:
        return Verdict(False, f"val {before:.3f} -> {after:.3f}: lower", before, after, regressions)
    if no_regression and regressions:
        return Verdict(
            False,
            f"val {before:.3f} -> {after:.3f} but {len(regressions)} task(s) got worse",
            before,
            after,
            regressions,
        )
    return Verdict(True, f"val {before:.3f} -> {after:.3f}", before, after, regressions)
