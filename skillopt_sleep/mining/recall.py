"""Dream recall: similar past tasks as extra train tasks (``dream_recall``).

A night trains on the tasks it mined. With ``dream_recall = N`` it also replays, as train
tasks, up to N tasks an earlier night stored and tonight's mining did not find (asked before
the lookback window, or left out by ``max_tasks``), from the projects of tonight's train
tasks (within ``project`` when set), ranked by the mining similarity of their intent to
tonight's train prompts (:func:`~skillopt_sleep.mining.mine.similar`, at least
:data:`RECALL_SIMILARITY`).

No leak: a recalled task brings one view of its latest *train* occurrence only. An occurrence
that was ever held out (its stored role ``val`` or ``test``, or replayed as val or test by an
earlier night) is never recalled, nor one whose prompt is a near-duplicate
(:func:`~skillopt_sleep.mining.mine.near_duplicate` at the mining threshold) of one of
tonight's val or test prompts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from skillopt_sleep.mining.mine import near_duplicate, normalise_intent, similar
from skillopt_sleep.mining.split import view_id
from skillopt_sleep.models import Occurrence, Task
from skillopt_sleep.store import Store

#: the least mining similarity (0..1) of a recalled task's intent to a train prompt of tonight
RECALL_SIMILARITY = 0.5


def _in_scope(project: str | None, scope: Path | None, projects: set[str]) -> bool:
    if not project:
        return False
    if scope is not None:
        root = str(scope).rstrip("/")
        return project == root or project.startswith(root + "/")
    return project in projects


def recall(
    store: Store,
    *,
    mined: list[Task],
    train: list[Task],
    held_out: list[Task],
    limit: int,
    threshold: float,
    scope: Path | None = None,
    is_scorable: Callable[[Task], bool] = lambda t: True,
) -> list[Task]:
    """Up to ``limit`` train views of past tasks similar to ``train`` (see the module
    docstring). ``mined``: tonight's tasks (never recalled); ``held_out``: tonight's val and
    test views (no recalled prompt may be a near-duplicate of theirs); ``threshold``: the
    mining similarity (0..1)."""
    if limit <= 0 or not train:
        return []
    tonight = {t.id for t in mined}
    projects = {t.project for t in train if t.project}
    trained = [normalise_intent(t.intent) for t in train]
    withheld = [normalise_intent(t.intent) for t in held_out]
    cut = threshold * 100
    candidates = [
        t
        for t in store.tasks.all()
        if t.id not in tonight
        and not t.synthetic
        and t.occurrences
        and _in_scope(t.project, scope, projects)
        and is_scorable(t)
    ]
    replayed = store.rollouts.splits_of(
        [view_id(t.id, o) for t in candidates for o in t.occurrences]
    )

    def eligible(t: Task, o: Occurrence) -> bool:
        if o.split != "train" or replayed.get(view_id(t.id, o), set()) & {"val", "test"}:
            return False
        norm = normalise_intent(o.prompt or t.intent)
        return not any(near_duplicate(norm, h, cut) for h in withheld)

    ranked: list[tuple[float, str, Task]] = []
    for t in candidates:
        latest = next(
            (
                o
                for o in sorted(t.occurrences, key=lambda o: (o.when, o.seq), reverse=True)
                if eligible(t, o)
            ),
            None,
        )
        if latest is None:
            continue
        norm = normalise_intent(latest.prompt or t.intent)
        score = max((similar(norm, x, RECALL_SIMILARITY * 100) for x in trained), default=0.0)
        if score:
            view = t.model_copy(
                update={
                    "id": view_id(t.id, latest),
                    "intent": latest.prompt or t.intent,
                    "split": "train",
                    "occurrences": [latest],
                }
            )
            ranked.append((score, t.id, view))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    return [view for _, _, view in ranked[:limit]]
