"""What the store holds: harvest and mine into it, search and read it, forget from it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt_sleep.config import KNOWN_SOURCES
from skillopt_sleep.errors import BadArgument
from skillopt_sleep.results import (
    AnswerScore,
    CheckVerdict,
    OnProgress,
    SearchHit,
    SearchResult,
    SessionMessage,
    SessionView,
    TaskInfo,
    TaskList,
)
from skillopt_sleep.service.core import Core, _project_arg, _under
from skillopt_sleep.store.sessions import Place

if TYPE_CHECKING:
    from skillopt_sleep.mining.mine import MineReport
    from skillopt_sleep.models import Task
    from skillopt_sleep.results import ForgetResult
    from skillopt_sleep.sources.ingest import HarvestReport
    from skillopt_sleep.store.outbox import OutboxRow


class RecordsService:
    """Harvest, mine, browse and forget the stored sessions and tasks."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def harvest(self, *, on_progress: OnProgress | None = None) -> HarvestReport:
        """Harvest every enabled source now; returns the ``HarvestReport``. ``on_progress``:
        a ``harvest`` event per file."""
        from skillopt_sleep.sources.ingest import harvest

        settings = self.core.settings()
        # the harvest checks the file before it writes what it read, and a pass that read
        # nothing only the table its record goes to (Store.check_table): a no-change harvest
        # of a large store does not read every page of it (issue 14)
        with self.core.use(on_open=False) as store:
            report = harvest(store, settings, on_progress=on_progress)
            if store.adoptions.in_place():  # else there is no reach to judge (nothing imported)
                from skillopt_sleep.delivery.wild import record_reach

                store.check()
                record_reach(store, similarity=settings.similarity)
            return report

    def forget(
        self,
        *,
        project: str | None = None,
        session: str | None = None,
        before: str | None = None,
        dry_run: bool = False,
    ) -> ForgetResult:
        """Delete stored data for good (:func:`skillopt_sleep.forgetting.forget`); returns
        the ``ForgetResult``."""
        from skillopt_sleep.forgetting import forget

        with self.core.use(check=True) as store:
            return forget(store, project=project, session=session, before=before, dry_run=dry_run)

    def outbox(self, limit: int = 50) -> list[OutboxRow]:
        """The last ``limit`` outbound model calls, newest first (texts past
        ``privacy.outbox_days`` are emptied first)."""
        days = self.core.settings().privacy.outbox_days
        with self.core.use() as store:
            if not store.read_only:
                store.outbox.expire(days)
            cutoff = store.outbox.cutoff(days)  # read-only: expired texts are not shown
            return [
                dataclasses.replace(r, prompt="") if str(r.at or "") < cutoff else r
                for r in store.outbox.recent(limit)
            ]

    def mine(
        self, project: Path | None = None, *, on_progress: OnProgress | None = None
    ) -> MineReport:
        """Mine tasks from the store now (and save them); returns the ``MineReport``."""
        from skillopt_sleep.mining.mine import mine

        settings = self.core.settings(project=project)
        with self.core.use(check=True) as store:
            return mine(store, settings, on_progress=on_progress)

    def harvested_yet(self) -> bool:
        with self.core.use() as store:
            return store.harvests.any()

    def link_tasks(self, first: str, second: str | None = None) -> str:
        """``tasks join A B`` (``second`` given): the requests of tasks ``first`` and
        ``second`` (ids or unique prefixes, of one project) are one task; ``tasks split A``:
        the requests joined to task ``first`` by their meaning are tasks of their own. Kept
        for every later mining run; returns what was done in a sentence."""
        from skillopt_sleep.mining.mine import normalise_intent

        with self.core.use(check=True) as store:
            tasks = store.tasks.all()
            a = _one_task(tasks, first)
            project = a.project or ""
            if second is not None:
                b = _one_task(tasks, second)
                if (b.project or "") != project:
                    raise BadArgument(
                        f"{a.id} and {b.id} are tasks of two projects: only one project's "
                        "requests can be one task"
                    )
                pair = sorted((normalise_intent(a.intent), normalise_intent(b.intent)))
                if a.id == b.id or (project, *pair, "join") in set(store.mining.links()):
                    raise BadArgument(f"{a.id} and {b.id} are one task already")
                store.mining.link(
                    project, normalise_intent(a.intent), normalise_intent(b.intent), "join"
                )
                return (
                    f"{a.id} and {b.id} are one task from the next mining on (unless their "
                    "corrections contradict: then they stay apart)"
                )
            joined = [o for o in a.occurrences if o.joined]
            if not joined:
                raise BadArgument(
                    f"{a.id} has no request joined by its meaning or by you: nothing to split"
                )
            head = normalise_intent(a.intent)
            for o in joined:
                store.mining.link(project, head, normalise_intent(o.prompt), "split")
            return (
                f"{len(joined)} request(s) joined to {a.id} are tasks of their own from the "
                "next mining on"
            )

    def score_answer(self, task_id: str, answer: str) -> AnswerScore:
        """How the stored task ``task_id`` (its id or a unique prefix) judges ``answer``:
        the answer's integrity first (mining/integrity.py), then the task's checks, as a
        night's replay scores them (no model is called: a rubric is listed, not judged)."""
        from skillopt_sleep.mining.judges import describe, judge_answer

        with self.core.use() as store:
            tasks = store.tasks.all()
        task = _one_task(tasks, task_id)
        judged = judge_answer(task, answer, [])
        verdicts = [
            CheckVerdict(kind="whole", value=f.kind, passed=False, why=f.why) for f in judged.faults
        ]
        ran = [
            CheckVerdict(kind=c.kind, value=c.value, passed=ok, why=describe(c))
            for c, ok in judged.results
        ]
        verdicts += ran
        score = judged.hard
        faults = judged.faults
        return AnswerScore(
            task_id=task.id,
            intent=task.intent,
            score=score,
            whole=not faults,
            verdicts=verdicts,
            rubric=task.rubric or "",
        )

    def stored_tasks(self, project: str | None = None, limit: int = 50) -> TaskList:
        """The tasks as the last night or ``tasks`` stored them, newest mining first."""
        from skillopt_sleep.mining.judges import capsule_state, context_state

        root = _project_arg(project, must_exist=False)
        with self.core.use() as store:
            tasks = store.tasks.all()
            if root is not None:
                tasks = [t for t in tasks if _under(t.project, root)]
            places = store.sessions.places(
                (o.session_id, o.seq) for t in tasks[:limit] for o in t.occurrences
            )
        return TaskList(
            total=len(tasks),
            tasks=[
                TaskInfo.of(
                    t,
                    sessions=len(t.sessions),
                    checks=[c.model_dump() for c in t.checks],
                    occurrences=[
                        _occurrence(
                            o.model_dump(exclude={"context"})
                            | {"context": capsule_state(o.context or t.context)},
                            places.get((o.session_id, o.seq)),
                        )
                        for o in t.occurrences
                    ],
                    demoted=[c.model_dump() for c in t.demoted],
                    context=context_state(t),
                )
                for t in tasks[:limit]
            ],
        )

    def search(
        self, query: str, *, agent: str | None = None, project: str | None = None, limit: int = 20
    ) -> SearchResult:
        """Full-text search over the harvested (redacted) messages, best match first.
        ``agent``: a source name (``claude_code``, ``copilot_cli`` …)."""
        if not query.strip():
            raise BadArgument("query is empty")
        root = _project_arg(project, must_exist=False)
        if agent and agent not in KNOWN_SOURCES:
            raise BadArgument(f"unknown agent {agent!r}; known: {', '.join(KNOWN_SOURCES)}")
        with self.core.use() as store:
            rows = store.sessions.search(
                query, source=agent, project=None if root is None else str(root), limit=limit
            )
        return SearchResult(
            query=query,
            hits=[SearchHit.of(r, renamed={"agent": "source"}) for r in rows],
        )

    def session(self, session_id: str) -> SessionView:
        """A harvested session with its (redacted) messages in order. ``session_id`` is its
        id (``codex:KEY``), its key alone, a unique prefix of either, or the shortened
        ``head…tail`` that ``search`` prints on a narrow terminal. BadArgument when no session
        or more than one matches (naming them)."""
        with self.core.use() as store:
            row = store.sessions.get(session_id)
            if row is None:
                head, _, tail = session_id.partition("…")
                found = store.sessions.ids_matching(head, tail, limit=6) if head else []
                if len(found) > 1:
                    shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
                    raise BadArgument(f"session {session_id!r} is ambiguous: {shown}")
                row = store.sessions.get(found[0]) if found else None
            if row is None:
                raise BadArgument(f"no session {session_id!r}")
            messages = store.sessions.messages(row.id)
        return SessionView.of(
            row,
            renamed={"agent": "source"},
            messages=[SessionMessage.of(m, text=m.text or "") for m in messages],
        )


def _occurrence(occ: dict[str, Any], place: Place | None) -> dict[str, Any]:
    """A stored occurrence with where it is: ``agent`` (the session's source), ``project``
    and ``message_id`` (all None when the session is no longer stored)."""
    return occ | {
        "agent": place.source if place else None,
        "project": place.project if place else None,
        "message_id": place.message_id if place else None,
    }


def _one_task(tasks: list[Task], task_id: str) -> Task:
    """The task ``task_id`` names (its id or a unique prefix), or a one-line refusal."""
    found = [t for t in tasks if t.id == task_id] or [t for t in tasks if t.id.startswith(task_id)]
    if not found:
        raise BadArgument(
            f"no stored task with the id {task_id!r}; `skillopt-sleep tasks` lists them"
        )
    if len(found) > 1:
        raise BadArgument(
            f"{task_id!r} begins the ids of {len(found)} stored tasks: give more of the id "
            "(`skillopt-sleep tasks` lists them)"
        )
    return found[0]
