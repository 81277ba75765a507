"""Row counts for ``status``."""

from __future__ import annotations

from skillopt_sleep.store._base import Repository


class Counts(Repository):
    """How much the store holds."""

    def totals(self) -> dict[str, int]:
        """``{"sessions": n, "messages": n, "tasks": n, "headless": n}``; ``headless``: the
        harvested headless / programmatic sessions that are not our own replays."""
        out = {t: int(self.db.table(t).count) for t in ("sessions", "messages", "tasks")}
        row = self.db.execute(
            "select count(*) from sessions where headless = 1 and self_generated = 0"
        ).fetchone()
        out["headless"] = int(row[0])
        return out

    def sessions_by_source(self) -> dict[str, int]:
        """``{source: number of sessions}``."""
        rows = self.db.execute("select source, count(*) from sessions group by source").fetchall()
        return {r[0]: int(r[1]) for r in rows}
