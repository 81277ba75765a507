"""Train / val / test by occurrence in time: for a personal tool, *held out* means the next
time the user asks.

A task (:class:`~skillopt_sleep.models.Task`) is one recurring request; each time the user
asked it is an :class:`~skillopt_sleep.models.Occurrence`. :func:`assign_splits` gives every
occurrence a role, oldest first:

0. Only *scorable* tasks get roles (a rule check, or a rubric the night's judge will score:
   see :func:`~skillopt_sleep.mining.judges.scorable`). An unscorable task's split and its
   occurrences' roles are ``""`` (unassigned): the night cannot replay it.
1. Every scorable task trains: its split is ``train`` and its earlier occurrences are
   ``train``. No recurring corrected task is ever locked out of learning.
2. With two occurrences or more, the latest but one (or the latest, with two) is ``val``:
   the gate judges an edit on the next time the user asked.
3. With three or more, the latest is ``test`` — unless it was ever replayed for training or
   gating (``replayed``: the roles each occurrence was replayed in by earlier nights), so the
   test score uses only occurrences never replayed for training or gating. A task asked once
   trains only, and the night's report says it is not yet validated on a recurrence.
4. ``val_fraction`` / ``test_fraction`` of 0 switch that held-out role off (its occurrences
   train); any other value leaves the rule above as it is.
5. Near-duplicates never serve as each other's held-out copy across *different* tasks: a
   val or test occurrence whose prompt is a near-duplicate (``near``) of another task's
   train occurrence is withheld (role ``""``, with a ``note`` saying which) — when both
   train the same block: the default night trains one block per project
   (:func:`withhold`), so another project's task never withholds or validates it.
6. Synthetic tasks (no occurrences) are ``train``.
7. A held-out occurrence is a *distinct* recurrence: one with the same wording (:func:`wording`:
   case and spacing aside)
   and the same context (its capsule) as a train occurrence of its task would be replayed as
   a cache hit of that train replay, so it is no held-out evidence. Val is then the latest
   earlier occurrence that is distinct, else the test occurrence (which then is val, not
   test); with none, the task has no val ("not yet validated on a distinct recurrence",
   :func:`undistinct`). Such a twin of a train (or val) occurrence is withheld (role ``""``,
   its ``note`` names the twin).

No occurrence has two roles in one night, by construction: each has exactly one ``split``.
:func:`views` turns the tasks into what a night replays: one task per occurrence with a
role (its prompt, its role, an id of its own, ``<task id>@<8 hex>``, so its rollouts are
told apart across nights).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Literal

from skillopt_sleep.models import Occurrence, Task

Split = Literal["train", "val", "test"]
#: The split of a task that has none (it is not scorable).
UNASSIGNED = ""
#: At most this many train occurrences of one task are replayed (the latest ones).
MAX_TRAIN_VIEWS = 3
#: What a task whose later asks repeat a train one (rule 7) is, as reports say it.
NOT_DISTINCT = (
    "asked again only in the same words with the same context: not yet validated on a "
    "distinct recurrence (the repeat would replay as a cache hit of the train replay)"
)
#: What "held out" means, as the night's report says it.
HELD_OUT = (
    "held out = the next time you asked: each task trains on its earlier occurrences, "
    "the gate judges edits on a later one (val) and the latest, never replayed before, is "
    "the test"
)


def stable_hash(task_id: str) -> float:
    """``sha256(task_id)`` as a number in [0, 1)."""
    digest = hashlib.sha256(task_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def view_id(task_id: str, occurrence: Occurrence) -> str:
    """The id of ``occurrence``'s replays: ``<task id>@<sha256(key)[:8]>``."""
    return f"{task_id}@{hashlib.sha256(occurrence.key.encode()).hexdigest()[:8]}"


def _ordered(occurrences: list[Occurrence]) -> list[Occurrence]:
    return sorted(occurrences, key=lambda o: (o.when, o.session_id, o.seq))


def wording(prompt: str) -> str:
    """A prompt's wording, normalised: lowercase, whitespace collapsed ("Run  the tests" and
    "run the tests" are worded alike; "run the tests?" is worded otherwise)."""
    return " ".join(prompt.lower().split())


def replay_key(task: Task, occurrence: Occurrence) -> str:
    """What a replay of ``occurrence`` sends besides the document: its wording and the
    context it carries (its own capsule, else the task's). Two occurrences with the same key
    are replayed alike: the later one's replay is a cache hit of the earlier one's."""
    ctx = occurrence.context if occurrence.context is not None else task.context
    items = [i.model_dump() for i in ctx.items] if ctx is not None else []
    return json.dumps([wording(occurrence.prompt or task.intent), items], ensure_ascii=False)


#: the note of a held-out occurrence withheld as a twin of a train or val one (rule 7)
_TWIN = (
    "withheld from {role}: the same wording and context as {twin} occurrence {key} (its replay "
    "would be a cache hit of that one's, no held-out evidence)"
)


def _roles(
    task: Task, replayed: Mapping[str, set[str]], val_on: bool, test_on: bool
) -> list[Occurrence]:
    occs = _ordered(task.occurrences)
    roles = ["train"] * len(occs)
    notes = [""] * len(occs)
    n = len(occs)
    keys = [replay_key(task, o) for o in occs]
    if n >= 3 and test_on:
        latest = view_id(task.id, occs[-1])
        if not replayed.get(latest, set()) & {"train", "val"}:
            roles[-1] = "test"
    if n >= 2 and val_on:
        last = n - 2 if roles[-1] == "test" else n - 1
        # rule 7: the latest occurrence (from the time-chosen one back) that no train
        # occurrence shares a replay with; at least one train occurrence stays before it
        at = next(
            (
                i
                for i in range(last, 0, -1)
                if keys[i] not in {k for j, k in enumerate(keys) if j != i and roles[j] == "train"}
            ),
            None,
        )
        if at is not None:
            roles[at] = "val"
        else:
            first = next(j for j in range(last) if keys[j] == keys[last])
            roles[last], notes[last] = (
                "",
                _TWIN.format(role="val", twin="train", key=occs[first].key),
            )
            trained = {k for j, k in enumerate(keys) if roles[j] == "train"}
            if roles[-1] == "test" and keys[-1] not in trained:
                roles[-1] = "val"  # the one distinct later ask gates rather than reports
    if roles[-1] == "test":
        twin = next(
            (j for j in range(n - 1) if roles[j] in ("train", "val") and keys[j] == keys[-1]), None
        )
        if twin is not None:
            roles[-1], notes[-1] = (
                "",
                _TWIN.format(role="test", twin=roles[twin], key=occs[twin].key),
            )
    return [
        o.model_copy(update={"split": r, "note": why})
        for o, r, why in zip(occs, roles, notes, strict=True)
    ]


def undistinct(task: Task) -> bool:
    """A scorable task asked more than once whose val role rule 7 left empty: every later
    occurrence is worded and seen like a train one, so it is not yet validated on a distinct
    recurrence."""
    return (
        bool(task.split)
        and len(task.occurrences) >= 2
        and not any(o.split == "val" for o in task.occurrences)
        and any(o.note.startswith("withheld from val: the same wording") for o in task.occurrences)
    )


def assign_splits(
    tasks: list[Task],
    replayed: Mapping[str, set[str]],
    val_fraction: float,
    test_fraction: float,
    is_scorable: Callable[[Task], bool] | None = None,
    near: Callable[[str, str], bool] | None = None,
    block_of: Callable[[Task], object] | None = None,
) -> list[Task]:
    """Return copies of ``tasks`` (same order) with ``split`` and every occurrence's role set
    by the module's rule.

    ``replayed`` maps view ids (:func:`view_id`) to the splits earlier nights replayed them
    in. ``is_scorable`` says which tasks the night can score (default: all). ``near(a, b)``
    says whether two prompts are near-duplicates (default: never); ``block_of`` which block
    a task trains (see :func:`withhold`)."""
    out: list[Task] = []
    for t in tasks:
        if is_scorable is not None and not is_scorable(t):
            occs = [o.model_copy(update={"split": "", "note": ""}) for o in t.occurrences]
            out.append(t.model_copy(update={"split": UNASSIGNED, "occurrences": occs}))
        elif t.synthetic or not t.occurrences:
            out.append(t.model_copy(update={"split": "train"}))
        else:
            occs = _roles(t, replayed, val_fraction > 0, test_fraction > 0)
            out.append(t.model_copy(update={"split": "train", "occurrences": occs}))
    if near is None:
        return out
    return withhold(out, near, block_of)


def withhold(
    tasks: list[Task],
    near: Callable[[str, str], bool],
    block_of: Callable[[Task], object] | None = None,
) -> list[Task]:
    """Rule 5 on ``tasks`` (roles assigned): copies with every val or test occurrence that
    is a near-copy (``near``) of another task's train occurrence *training the same block*
    withheld. ``block_of(task)`` names the block a task trains (the default night trains one
    block per project: another project's task neither withholds nor validates this one's
    held-out occurrence); None: one block for all."""
    out = list(tasks)
    trained = [
        (t.id, block_of(t) if block_of else None, o.prompt)
        for t in out
        for o in t.occurrences
        if o.split == "train"
    ]
    for i, t in enumerate(out):
        occs = list(t.occurrences)
        changed = False
        block = block_of(t) if block_of else None
        for j, o in enumerate(occs):
            if o.split not in ("val", "test"):
                continue
            twin = next(
                (tid for tid, b, p in trained if tid != t.id and b == block and near(o.prompt, p)),
                None,
            )
            if twin is not None:
                occs[j] = o.model_copy(
                    update={
                        "split": "",
                        "note": f"withheld from {o.split}: a near-duplicate of task {twin}'s "
                        "train occurrence",
                    }
                )
                changed = True
        if changed:
            out[i] = t.model_copy(update={"occurrences": occs})
    return out


def views(tasks: list[Task]) -> list[Task]:
    """What a night replays: one task per occurrence with a role (at most
    :data:`MAX_TRAIN_VIEWS` train occurrences per task, the latest, one per distinct replay:
    wording and context, :func:`replay_key`), each with its occurrence's own context,
    in the order of ``tasks``; a task without occurrences (synthetic, or stored before
    occurrences were) is its own view. Unassigned tasks have none."""
    out: list[Task] = []
    for t in tasks:
        if not t.split:
            continue
        if not t.occurrences:
            out.append(t)
            continue
        occs = _ordered(t.occurrences)
        train: list[Occurrence] = []
        seen: set[str] = set()
        for o in reversed(occs):
            key = replay_key(t, o)
            if o.split == "train" and key not in seen and len(train) < MAX_TRAIN_VIEWS:
                seen.add(key)
                train.append(o)
        keep = {o.key for o in train} | {o.key for o in occs if o.split in ("val", "test")}
        for o in occs:
            if o.key in keep:
                out.append(
                    t.model_copy(
                        update={
                            "id": view_id(t.id, o),
                            "intent": o.prompt or t.intent,
                            "split": o.split,
                            "occurrences": [o],
                            # the occurrence's own context (the task's for one mined before
                            # occurrences kept theirs)
                            "context": o.context if o.context is not None else t.context,
                        }
                    )
                )
    return out


def task_of(view: str) -> str:
    """The task id of a view id (the id itself for a task that is its own view)."""
    return view.split("@", 1)[0]
