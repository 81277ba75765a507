"""Train / val / test assignment of mined tasks, deterministic and stable across nights.

The rule (:func:`assign_splits`):

0. Only *scorable* tasks get a split (a rule check, or a rubric the night's judge will score:
   see :func:`~skillopt_sleep.night.replay.scorable`). An unscorable task gets ``""``
   (unassigned): the night cannot replay it, so it must not take a val or test slot nor count
   towards the quotas below. It gets a split, by this same rule, on the night it becomes
   scorable (a correction arrives).
1. Synthetic tasks are always ``train`` (they are never used to judge a document).
2. A real task that already had a split (``previous``, i.e. what the store holds) keeps it, so
   a task never leaks from val/test into train between nights.
3. Let ``n`` be the number of real scorable tasks. With ``n >= 3`` the targets are
   ``max(1, floor(n * fraction + 0.5))`` for test and for val (a fraction of 0 means 0), capped
   so that at least one real task stays in train; with ``n < 3`` every new task goes to train
   (there is too little to hold anything out).
4. New real tasks are sorted by a stable hash of their id (``sha256(id)`` read as a number in
   [0, 1)); the first ones fill the test deficit, the next ones the val deficit, the rest go
   to train. Existing splits count towards the targets.
5. Only if val or test would still be empty with ``n >= 3`` (every new task already placed, the
   old ones all train) are previously-train tasks moved, again in hash order, so that val and
   test each hold at least one task. Tasks are never moved out of val or test.

What counts as ``previous`` is the miner's business (:func:`~skillopt_sleep.night.mine.mine`):
a stored split given to a task while it was unscorable (by versions before rule 0) is not one,
and a task stored unassigned has the split it was last replayed in, if any (so a val/test task
that was unscorable for a while comes back to val/test, not train).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Literal

from skillopt_sleep.models import Task

Split = Literal["train", "val", "test"]
#: The split of a task that has none (it is not scorable).
UNASSIGNED = ""
_SPLITS = ("train", "val", "test")


def stable_hash(task_id: str) -> float:
    """``sha256(task_id)`` as a number in [0, 1)."""
    digest = hashlib.sha256(task_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _target(n: int, fraction: float) -> int:
    if n < 3 or fraction <= 0:
        return 0
    return max(1, int(n * fraction + 0.5))


def assign_splits(
    tasks: list[Task],
    previous: Mapping[str, str],
    val_fraction: float,
    test_fraction: float,
    is_scorable: Callable[[Task], bool] | None = None,
) -> list[Task]:
    """Return copies of ``tasks`` (same order) with ``split`` set by the module's rule.

    ``previous`` maps task ids to the split they had before (typically every stored task).
    ``is_scorable`` says which tasks the night can score (default: all); the others get
    :data:`UNASSIGNED` and take no part in the assignment.
    """
    ok = {t.id for t in tasks if is_scorable is None or is_scorable(t)}
    real = [t for t in tasks if not t.synthetic and t.id in ok]
    n = len(real)
    split: dict[str, str] = {}
    for t in real:
        old = previous.get(t.id)
        if old in _SPLITS:
            split[t.id] = old
    want_test = _target(n, test_fraction)
    want_val = _target(n, val_fraction)
    while n >= 3 and want_test + want_val > n - 1:  # keep at least one task to learn from
        if want_val >= want_test and want_val > (1 if val_fraction > 0 else 0):
            want_val -= 1
        elif want_test > (1 if test_fraction > 0 else 0):
            want_test -= 1
        else:
            break

    def count(name: str) -> int:
        return sum(1 for s in split.values() if s == name)

    new = sorted((t for t in real if t.id not in split), key=lambda t: (stable_hash(t.id), t.id))
    for t in new:
        if count("test") < want_test:
            split[t.id] = "test"
        elif count("val") < want_val:
            split[t.id] = "val"
        else:
            split[t.id] = "train"
    # Last resort: an empty val/test with enough tasks would make the night unable to gate.
    for name, want in (("test", want_test), ("val", want_val)):
        if want and count(name) == 0:
            movable = sorted(
                (t for t in real if split[t.id] == "train"), key=lambda t: (stable_hash(t.id), t.id)
            )
            if len(movable) > 1:
                split[movable[0].id] = name
    out = []
    for t in tasks:
        value = UNASSIGNED if t.id not in ok else "train" if t.synthetic else split[t.id]
        out.append(t.model_copy(update={"split": value}))
    return out
