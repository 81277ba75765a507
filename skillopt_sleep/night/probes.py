"""The collateral gate: an edit that helps the tasks it is meant for must not harm the rest.

The val gate replays the tasks a night can score, so a rule such as "Keep answers under 50
characters." — learned from a commit message — may pass it while it cuts every other answer
in half. An edit the val gate accepts is therefore replayed on :func:`collateral_probes`:

* (b) the user's other tasks of the same block — the ones the val gate does not see (asked
  once, or never corrected) — one occurrence each, every task family
  (:func:`~skillopt_sleep.mining.artifact.family_of`) at least once, up to
  ``collateral_tasks``;
* (c) a built-in probe set of everyday coding requests (:data:`EVERYDAY`: write a function,
  explain an error, write a test, a shell command, a refactor, explain a command), each with
  a check of what doing it takes.

Each is judged against the document before the edit (:func:`harm`): an answer that was whole
(:mod:`~skillopt_sleep.mining.integrity`: not cut, parses, a test where a test was asked) and
is broken under the edit, or that passed a check and fails it, is harm. Where the target's
answers vary, a harm must show again on another sample. Any harm rejects the edit, the reason
naming the task or probe (:meth:`~skillopt_sleep.night.train.Trainer.collateral`).
"""

from __future__ import annotations

from collections.abc import Sequence

from skillopt_sleep.mining.artifact import family_of
from skillopt_sleep.mining.split import view_id
from skillopt_sleep.models import Check, Task
from skillopt_sleep.night.replay import Scored

#: the built-in probes: (id, request, checks of doing it)
EVERYDAY: tuple[tuple[str, str, tuple[Check, ...]], ...] = (
    (
        "probe:function",
        "Write a Python function `slugify(title)` that lowercases a title and joins its "
        "words with hyphens.",
        (Check(kind="regex", value=r"def\s+slugify\s*\(", origin="probe"),),
    ),
    (
        "probe:error",
        "Explain this error and how to fix it: TypeError: 'NoneType' object is not subscriptable",
        (Check(kind="contains", value="None", origin="probe"),),
    ),
    (
        "probe:test",
        "Write a pytest unit test for a function `add(a, b)` that returns `a + b`.",
        (Check(kind="regex", value=r"def\s+test_\w*\s*\(", origin="probe"),),
    ),
    (
        "probe:shell",
        "Give me a shell command that finds every file larger than 10 MB under the current "
        "directory.",
        (Check(kind="contains", value="find", origin="probe"),),
    ),
    (
        "probe:refactor",
        "Rename the variable `tmp` to `total` in this function:\n\n```python\ndef total_of(xs):\n"
        "    tmp = 0\n    for x in xs:\n        tmp += x\n    return tmp\n```",
        (Check(kind="contains", value="total", origin="probe"),),
    ),
    (
        "probe:explain",
        "What does `git rebase -i HEAD~3` do?",
        (Check(kind="contains", value="rebase", origin="probe"),),
    ),
)


def everyday() -> list[Task]:
    """The built-in probe set as tasks (no project, no context, no rubric)."""
    return [
        Task(id=pid, intent=text, checks=list(checks), split="", synthetic=True)
        for pid, text, checks in EVERYDAY
    ]


def is_everyday(task_id: str) -> bool:
    return task_id.startswith("probe:")


def user_probes(others: Sequence[Task], limit: int) -> list[Task]:
    """Up to ``limit`` of the user's ``others`` (tasks the val gate does not see), one
    occurrence each (the latest, with its own context), the most recent task of every family
    first, then the most recent of the rest. No rubric (no judge call): they are judged whole,
    and by their rule checks when they have some."""
    if limit <= 0:
        return []

    def latest(t: Task) -> str:
        return max((o.when for o in t.occurrences), default="")

    ordered = sorted(others, key=latest, reverse=True)
    first: dict[str, Task] = {}
    for t in ordered:
        first.setdefault(family_of(t.intent).key, t)
    picked = list(first.values())
    picked += [t for t in ordered if t not in picked]
    out: list[Task] = []
    for t in picked[:limit]:
        update: dict = {"split": "", "rubric": ""}
        if t.occurrences:
            o = max(t.occurrences, key=lambda o: (o.when, o.session_id, o.seq))
            update |= {
                "id": view_id(t.id, o),
                "intent": o.prompt or t.intent,
                "occurrences": [o],
                "context": o.context if o.context is not None else t.context,
            }
        out.append(t.model_copy(update=update))
    return out


def _faults(sc: Scored) -> list[str]:
    return list(dict.fromkeys(str(c["value"]) for c in sc.checks if c.get("kind") == "whole"))


def harm(before: Scored, after: Scored, cap: int | None = None) -> str:
    """How ``after`` (the answer under the edit) is worse than ``before`` (under the document
    before it): broken where it was whole, or a check failed that passed ("" when it is not
    worse). ``cap``: the target's answer length in tokens; an answer that reached it was cut
    by the cap, not by the edit, and tells nothing."""
    if cap and any(sc.usage.output_tokens >= cap for sc in (before, after)):
        return ""
    was, now = _faults(before), _faults(after)
    if not was and now:
        return "whole before, " + ", ".join(now) + " after"
    if was:
        return ""
    passed = {(c["kind"], c["value"]) for c in before.checks if c.get("passed")}
    lost = [
        f"{c['kind']} {c['value']}".strip()
        for c in after.checks
        if not c.get("passed") and (c["kind"], c["value"]) in passed
    ]
    return "fails " + ", ".join(lost) + " (passed before)" if lost else ""


def label(task: Task) -> str:
    """How a report names a probe: an everyday request, or the user's own task."""
    said = " ".join(task.intent.split())
    said = said if len(said) <= 70 else said[:69] + "…"
    if is_everyday(task.id):
        return f'the everyday request "{said}"'
    return f'your task "{said}"'
