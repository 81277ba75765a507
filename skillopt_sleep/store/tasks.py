"""``tasks``: the recurring tasks the miner found, with their splits."""

from __future__ import annotations

import json
from collections.abc import Iterable

from skillopt_sleep.models import ContextCapsule, Task
from skillopt_sleep.redact import redact, redact_json
from skillopt_sleep.store._base import Repository, now_iso


class TasksRepo(Repository):
    """Tasks as :class:`~skillopt_sleep.models.Task` (JSON columns decoded)."""

    def save(self, tasks: Iterable[Task]) -> None:
        """Insert or update each task (its texts redacted); ``first_seen`` is kept,
        ``last_seen`` set to now. On a read-only store (``tasks`` reading a backup) nothing is
        saved: the tasks were mined for the listing alone."""
        if self.db.read_only:
            return
        now = now_iso()
        for t in tasks:
            old = self._one("tasks", "id = ?", [t.id])
            self.db.table("tasks").upsert(
                {
                    "id": t.id,
                    "project": t.project,
                    "intent": redact(t.intent),
                    "sessions": json.dumps(t.sessions),
                    "checks": json.dumps(redact_json([c.model_dump() for c in t.checks])),
                    "rubric": redact(t.rubric),
                    "corrections": json.dumps(redact_json(t.corrections)),
                    "split": t.split,
                    "synthetic": int(t.synthetic),
                    "tools": json.dumps(t.tools),
                    "occurrences": json.dumps(redact_json([o.model_dump() for o in t.occurrences])),
                    "apart": json.dumps(redact_json(t.apart)),
                    "demoted": json.dumps(redact_json([c.model_dump() for c in t.demoted])),
                    "context": (
                        json.dumps(redact_json(t.context.model_dump())) if t.context else ""
                    ),
                    "first_seen": old["first_seen"] if old else now,
                    "last_seen": now,
                    "updated_at": now,
                },
                pk="id",
            )

    def all(self, project: str | None = None) -> list[Task]:
        """Every task (of one exact ``project``), ordered by id."""
        if project:
            rows = self.db.table("tasks").rows_where("project = ?", [project], order_by="id")
        else:
            rows = self.db.table("tasks").rows_where(order_by="id")
        return [
            Task(
                id=r["id"],
                project=r["project"],
                intent=r["intent"],
                sessions=json.loads(r["sessions"] or "[]"),
                checks=json.loads(r["checks"] or "[]"),
                rubric=r["rubric"] or "",
                corrections=json.loads(r["corrections"] or "[]"),
                split=r["split"],
                synthetic=bool(r["synthetic"]),
                tools=json.loads(r["tools"] or "[]"),
                occurrences=json.loads(r.get("occurrences") or "[]"),
                apart=json.loads(r.get("apart") or "[]"),
                demoted=json.loads(r.get("demoted") or "[]"),
                context=(
                    ContextCapsule.model_validate_json(r["context"]) if r.get("context") else None
                ),
            )
            for r in rows
        ]
