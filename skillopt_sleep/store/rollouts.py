"""``rollouts``: every replay of a task under a document during a night, with its score."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillopt_sleep.redact import redact
from skillopt_sleep.store._base import Repository


@dataclass(frozen=True, slots=True)
class RolloutRow:
    """A ``rollouts`` row (see :class:`RolloutsRepo`); fields in the table's column order."""

    id: int
    night_id: int
    task_id: str
    split: str | None
    phase: str | None
    doc_hash: str | None
    backend: str | None
    model: str | None
    answer: str | None
    tool_calls: str | None  # JSON text
    hard: float | None
    soft: float | None
    score: float
    checks: str | None  # JSON text
    cached: int | None
    input_tokens: int | None
    output_tokens: int | None
    seconds: float | None
    created_at: str | None
    task: str | None
    occurrence: str | None
    acts: str | None = None  # what the agent did, as shown (m018)


class RolloutsRepo(Repository):
    """Rows: ``id``, ``night_id``, ``task_id``, ``split`` (train | val | test), ``phase``
    (e.g. "train e1b0", "val baseline", "test before"), ``doc_hash``, ``backend``, ``model``,
    ``answer``, ``tool_calls`` (JSON), ``hard``, ``soft``, ``score`` (0..1), ``checks``
    (JSON), ``cached`` (0/1), ``input_tokens``, ``output_tokens``, ``seconds``,
    ``created_at``; ``task_id`` is the replayed view (``<task>@<occurrence>``, or the task's
    own id), split into ``task`` (the mined task: a foreign key, NULL when no such task is
    stored) and ``occurrence`` ("" for a task replayed as itself)."""

    def add(self, **fields: Any) -> int:
        """Record one rollout (its answer and tool calls redacted); returns its id."""
        for name in ("answer", "tool_calls", "acts"):
            if isinstance(fields.get(name), str):
                fields[name] = redact(fields[name])
        view = str(fields.get("task_id") or "")
        task, _, occurrence = view.partition("@")
        with self.db.lock:  # fetched under the lock: workers' threads record rollouts too
            known = self.db.execute("select 1 from tasks where id = ?", [task]).fetchone()
        fields.setdefault("task", task if known else None)
        fields.setdefault("occurrence", occurrence)
        return self._insert("rollouts", fields)

    def of_night(self, night_id: int, split: str | None = None) -> list[RolloutRow]:
        """The night's rollouts (of one split) in the order they were recorded."""
        if split is None:
            rows = self.db.table("rollouts").rows_where("night_id = ?", [night_id], order_by="id")
        else:
            rows = self.db.table("rollouts").rows_where(
                "night_id = ? and split = ?", [night_id, split], order_by="id"
            )
        return [RolloutRow(**r) for r in rows]

    def last_splits(self, task_ids: list[str]) -> dict[str, str]:
        """``{task id: split}`` of each task's most recent rollout (tasks never replayed, or
        replayed without a split, are absent)."""
        out: dict[str, str] = {}
        for start in range(0, len(task_ids), 500):
            chunk = task_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(
                f"select task_id, split from rollouts where id in (select max(id) from rollouts "
                f"where task_id in ({marks}) group by task_id)",
                chunk,
            ).fetchall()
            out.update({tid: split for tid, split in rows if split})
        return out

    def splits_of(self, task_ids: list[str]) -> dict[str, set[str]]:
        """``{task id: the splits it was ever replayed in}`` (tasks never replayed are
        absent)."""
        out: dict[str, set[str]] = {}
        for start in range(0, len(task_ids), 500):
            chunk = task_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(
                f"select distinct task_id, split from rollouts where task_id in ({marks})", chunk
            ).fetchall()
            for tid, split in rows:
                if split:
                    out.setdefault(tid, set()).add(split)
        return out
