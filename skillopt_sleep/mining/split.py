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
   test score uses only occurrences never replayed for training or gating (its ``note`` then
   says so), or it is a literal repeat (rules 5 and 7). A task asked once trains only, and
   the night's report says it is not yet validated on a recurrence.
4. ``val_fraction`` / ``test_fraction`` of 0 switch that held-out role off (its occurrences
   train); any other value leaves the rule above as it is.
5. A held-out occurrence is no literal repeat of *another* task's occurrence either: a val
   occurrence with the same wording and context (:func:`replay_key`) as another task's train
   occurrence, or a test occurrence with those of another task's train or val occurrence, is
   withheld (role ``""``, its ``note`` names the twin) — when both train the same block: the
   default night trains one block per project (``block_of``), so another project's task
   never withholds this one's (:func:`withhold`). Only a literal repeat: its replay is the
   same request as the train (or val) replay, a cache hit of it, so it would report what
   training (or gating) already saw. A near-duplicate in other words is not withheld: it is
   a later ask of a like request, no closer to the train prompts than a task's own
   recurrences are to its earlier asks (mining clusters near-copies into one task), which is
   what held out measures.
6. Synthetic tasks (no occurrences) are ``train``.
7. A held-out occurrence is a *distinct* recurrence: one with the same wording (:func:`wording`:
   case and spacing aside) and the same context (its capsule) as a train occurrence of its
   task would be replayed as a cache hit of that train replay, so it is no held-out evidence.
   Val is then the latest earlier occurrence (before the test) that is distinct; with none,
   the task has no val ("not yet validated on a distinct recurrence", :func:`undistinct`) and
   the test stays the test. Such a twin of a train (or val) occurrence is withheld (role
   ``""``, its ``note`` names the twin and says it is a literal repeat).

:func:`no_test` says in one line why a block has no test occurrence; :func:`withheld` lists
the occurrences withheld from val or test, for the night's report.

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


#: the note of a held-out occurrence withheld as a twin of a train or val one (rules 5 and 7)
_TWIN = (
    "withheld from {role}: the same wording and context as {twin} occurrence {key} (a literal "
    "repeat: its replay would be a cache hit of that one's, no held-out evidence)"
)
#: the note of a latest occurrence an earlier night replayed for training or gating (rule 3)
_REPLAYED = (
    "not the test: an earlier night replayed it for {role} (the test uses only occurrences "
    "never replayed for training or gating)"
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
        before = replayed.get(view_id(task.id, occs[-1]), set()) & {"train", "val"}
        if before:
            notes[-1] = _REPLAYED.format(role=" and ".join(sorted(before)))
        else:
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
        else:  # no distinct recurrence to validate on (the test, if any, stays the test)
            first = next(j for j in range(last) if keys[j] == keys[last])
            roles[last], notes[last] = (
                "",
                _TWIN.format(role="val", twin="train", key=occs[first].key),
            )
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
    occurrence before the test is worded and seen like a train one, so it is not yet
    validated on a distinct recurrence."""
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
    block_of: Callable[[Task], object] | None = None,
) -> list[Task]:
    """Return copies of ``tasks`` (same order) with ``split`` and every occurrence's role set
    by the module's rules.

    ``replayed`` maps view ids (:func:`view_id`) to the splits earlier nights replayed them
    in. ``is_scorable`` says which tasks the night can score (default: all); ``block_of``
    which block a task trains (rule 5: a literal repeat of another task's occurrence is
    withheld within a block; None: one block for all)."""
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
    return withhold(out, block_of)


def withhold(tasks: list[Task], block_of: Callable[[Task], object] | None = None) -> list[Task]:
    """Rule 5 on ``tasks`` (roles assigned): copies with every val occurrence that is a
    literal repeat (:func:`replay_key`) of another task's train occurrence, and every test
    occurrence that is one of another task's train or val occurrence, withheld — tasks
    training the same block (``block_of``; None: one block for all) only."""
    out = list(tasks)
    seen: dict[tuple[object, str], list[tuple[str, str, str]]] = {}
    for t in out:
        block = block_of(t) if block_of else None
        for o in t.occurrences:
            if o.split in ("train", "val"):
                seen.setdefault((block, replay_key(t, o)), []).append((t.id, o.split, o.key))
    for i, t in enumerate(out):
        occs = list(t.occurrences)
        changed = False
        block = block_of(t) if block_of else None
        for j, o in enumerate(occs):
            if o.split not in ("val", "test"):
                continue
            roles = ("train",) if o.split == "val" else ("train", "val")
            twin = next(
                (
                    (tid, role, key)
                    for tid, role, key in seen.get((block, replay_key(t, o)), [])
                    if tid != t.id and role in roles
                ),
                None,
            )
            if twin is not None:
                tid, role, key = twin
                note = _TWIN.format(role=o.split, twin=f"task {tid}'s {role}", key=key)
                occs[j] = o.model_copy(update={"split": "", "note": note})
                changed = True
        if changed:
            out[i] = t.model_copy(update={"occurrences": occs})
    return out


def withheld(tasks: list[Task]) -> list[tuple[str, Occurrence]]:
    """The occurrences of ``tasks`` withheld from val or test (rules 5 and 7), each with its
    task id, oldest first within a task: what the night's report names, with its ``note``."""
    return [
        (t.id, o)
        for t in tasks
        if t.split
        for o in _ordered(t.occurrences)
        if not o.split and o.note
    ]


def no_test(tasks: list[Task], test_on: bool = True) -> str | None:
    """Why ``tasks`` (roles assigned) have no test occurrence, in one line (``no test score:
    …``); None when one has."""
    scored = [t for t in tasks if t.split and t.occurrences]
    if any(o.split == "test" for t in scored for o in t.occurrences):
        return None
    if not test_on:
        return "no test score: the test split is off (test_fraction = 0)"
    asked = [t for t in scored if len(t.occurrences) >= 3]
    if not asked:
        return (
            "no test score: every task was asked fewer than 3 times (the latest of 3 asks or "
            "more is the test)"
        )
    why: list[str] = []
    for t in asked:
        latest = _ordered(t.occurrences)[-1]
        if latest.note.startswith("withheld from test: the same wording and context as "):
            twin = latest.note.removeprefix("withheld from test: the same wording and context as ")
            twin = twin.split(" (", 1)[0]
            why.append(
                f"the latest occurrence of task {t.id} ({latest.key}) repeats {twin} word for "
                "word, with the same context"
            )
        elif latest.note.startswith("not the test: "):
            role = latest.note.split("replayed it for ", 1)[-1].split(" (", 1)[0]
            why.append(
                f"the latest occurrence of task {t.id} ({latest.key}) was replayed for {role} by "
                "an earlier night"
            )
    if not why:
        return None
    more = f"; and {len(why) - 2} more task(s) alike" if len(why) > 2 else ""
    return "no test score: " + "; ".join(why[:2]) + more


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
