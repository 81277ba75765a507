"""``nights``: one row per night, written by :mod:`skillopt_sleep.night.lifecycle`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillopt_sleep.store._base import Repository


@dataclass(frozen=True, slots=True)
class NightRow:
    """A ``nights`` row (see :class:`NightsRepo`); fields in the table's column order."""

    id: int
    started_at: str
    finished_at: str | None
    status: str
    project: str | None
    dry_run: int | None
    trigger: str | None
    pid: int | None
    error: str | None
    target_path: str | None
    calls: int | None
    cached_calls: int | None
    input_tokens: int | None
    output_tokens: int | None
    seconds: float | None
    val_before: float | None
    val_after: float | None
    test_before: float | None
    test_after: float | None
    proposal_id: str | None
    summary: str | None  # JSON text
    #: the order the nights were started in (m013): what lists them newest first
    seq: int | None = None


class NightsRepo(Repository):
    """Rows: ``id``, ``started_at``, ``finished_at``, ``status`` (see
    :class:`~skillopt_sleep.night.lifecycle.NightStatus`), ``project``, ``dry_run`` (0/1),
    ``trigger``, ``pid``, ``error``, ``target_path``, ``calls``, ``cached_calls``,
    ``input_tokens``, ``output_tokens``, ``seconds`` (wall time), ``val_before``,
    ``val_after``, ``test_before``, ``test_after``, ``proposal_id``, ``summary`` (JSON text)."""

    def add(self, **fields: Any) -> int:
        """Insert a night row; returns its id. A dry run takes no night number: its id is the
        next negative one (-1, -2, …; shown ``d1``, ``d2``), so the next real night is
        numbered as if it had not run."""
        # SQLite's own next id is one more than the largest, which a dry run's -1 would make 0
        sql = (
            "select min(0, coalesce(min(id), 0)) - 1 from nights"
            if fields.get("dry_run")
            else "select max(0, coalesce(max(id), 0)) + 1 from nights"
        )
        with self.db.lock:  # ids and the insert under one lock: no other thread between
            seq = int(self.db.execute("select coalesce(max(seq), 0) + 1 from nights").fetchone()[0])
            if "id" in fields:
                return self._insert("nights", {**fields, "seq": seq})
            night_id = int(self.db.execute(sql).fetchone()[0])
            return self._insert("nights", {**fields, "id": night_id, "seq": seq})

    def set(self, night_id: int, **fields: Any) -> None:
        """Update columns of one night."""
        self.db.table("nights").update(night_id, fields)

    def interrupt(self, night_id: int, *, finished_at: str, error: str) -> bool:
        """Mark a night ``interrupted`` if it is still ``running``; returns whether it was."""
        cur = self.db.execute(
            "update nights set status = 'interrupted', finished_at = ?, error = ? "
            "where id = ? and status = 'running'",
            [finished_at, error, night_id],
        )
        return cur.rowcount > 0

    def get(self, night_id: int) -> NightRow | None:
        """The night's row, or None."""
        row = self._one("nights", "id = ?", [night_id])
        return NightRow(**row) if row is not None else None

    def running(self) -> list[NightRow]:
        """Rows whose status is ``running``, newest first (stale ones included: see
        :func:`skillopt_sleep.night.lifecycle.running` for whether a night really runs)."""
        return [
            NightRow(**r)
            for r in self.db.table("nights").rows_where(
                "status = ?", ["running"], order_by="id desc"
            )
        ]

    def recent(self, limit: int = 5) -> list[NightRow]:
        """The last ``limit`` nights, newest first: in the order they were started
        (``seq``; times are kept to the second, and two nights may start in the same one)."""
        order = "seq desc"
        return [
            NightRow(**r) for r in self.db.table("nights").rows_where(order_by=order, limit=limit)
        ]

    def last_real(self) -> NightRow | None:
        """The newest night that is not a dry run that only planned (or found no task)."""
        rows = self.db.table("nights").rows_where(
            "not (dry_run = 1 and status in ('planned', 'no_tasks'))", order_by="id desc", limit=1
        )
        row = next(iter(rows), None)
        return NightRow(**row) if row is not None else None

    def max_id(self) -> int:
        """The newest night's id, 0 when there is none."""
        return int(self.db.execute("select coalesce(max(id), 0) from nights").fetchone()[0])

    def newest_after(
        self, before: int, *, trigger: str | None = None, pid: int | None = None
    ) -> int | None:
        """The id of the newest night with an id above ``before`` (and the given trigger and
        pid), or None."""
        where: list[str] = ["id > ?"]
        args: list[Any] = [before]
        if trigger is not None:
            where.append("trigger = ?")
            args.append(trigger)
        if pid is not None:
            where.append("pid = ?")
            args.append(pid)
        row = self.db.execute(
            f"select id from nights where {' and '.join(where)} order by id desc limit 1", args
        ).fetchone()
        return int(row[0]) if row else None

    def completed_since(self, since: str) -> bool:
        """Whether a real (not dry-run, not demo) night started at or after ``since`` (ISO
        UTC) and completed (succeeded, no_change or no_tasks)."""
        rows = self.db.table("nights").rows_where(
            "started_at >= ? and dry_run = 0 and trigger != 'demo' "
            "and status in ('succeeded', 'no_change', 'no_tasks')",
            [since],
            limit=1,
        )
        return next(iter(rows), None) is not None
