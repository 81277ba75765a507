"""Row counts for ``status``."""

from __future__ import annotations

from skillopt_sleep.store._base import Repository


class Counts(Repository):
    """How much the store holds."""

    def totals(self) -> dict[str, int]:
        """``{"sessions": n, "messages": n, "tasks": n}``."""
        return {t: int(self.db.table(t).count) for t in ("sessions", "messages", "tasks")}

    def sessions_by_source(self) -> dict[str, int]:
        """``{source: number of sessions}``."""
        rows = self.db.execute("select source, count(*) from sessions group by source").fetchall()
        return {r[0]: int(r[1]) for r in rows}
