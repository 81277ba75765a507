"""``wild_sessions``: whether an adopted document reached a session harvested after adopt."""

from __future__ import annotations

from skillopt_sleep.store._base import Repository, now_iso


class WildRepo(Repository):
    """Rows: ``session_id``, ``adoption_id``, ``reached`` (0/1), ``checked_at``, ``judged``
    (the rubric judge's score of its first answer, when its task is judged by a rubric)."""

    def verdicts(self, adoption_id: int) -> dict[str, bool]:
        """``{session id: reached}`` recorded for ``adoption_id``."""
        rows = self.db.execute(
            "select session_id, reached from wild_sessions where adoption_id = ?", [adoption_id]
        ).fetchall()
        return {r[0]: bool(r[1]) for r in rows}

    def record(
        self, session_id: str, adoption_id: int, reached: bool, observed: bool = False
    ) -> None:
        """Record a verdict once (a later one for the same pair is ignored); ``observed``: the
        transcript showed it (the memory the agent loaded), not inferred."""
        self.db.execute(
            "insert or ignore into wild_sessions "
            "(session_id, adoption_id, reached, checked_at, observed) values (?, ?, ?, ?, ?)",
            [session_id, adoption_id, int(reached), now_iso(), int(observed)],
        )

    def observed(self, adoption_id: int) -> set[str]:
        """The sessions whose verdict for ``adoption_id`` the transcript showed."""
        rows = self.db.execute(
            "select session_id from wild_sessions where adoption_id = ? and observed = 1",
            [adoption_id],
        ).fetchall()
        return {r[0] for r in rows}

    def judge(self, session_id: str, adoption_id: int, score: float) -> None:
        """Keep the rubric judge's score of a reached session's first answer."""
        self.db.execute(
            "update wild_sessions set judged = ? where session_id = ? and adoption_id = ?",
            [score, session_id, adoption_id],
        )

    def judged(self, adoption_id: int) -> dict[str, float]:
        """``{session id: score}`` the rubric judge gave for ``adoption_id``."""
        rows = self.db.execute(
            "select session_id, judged from wild_sessions where adoption_id = ? "
            "and judged is not null",
            [adoption_id],
        ).fetchall()
        return {r[0]: float(r[1]) for r in rows}
