"""``harvest_runs``: one row per harvest pass of one source (what it read, what it skipped)."""

from __future__ import annotations

import json
from typing import Any

from skillopt_sleep.store._base import Repository, Row

_JSON = ("sessions_filtered", "lines_skipped", "files_skipped")


class HarvestsRepo(Repository):
    """Rows: ``id``, ``started_at``, ``finished_at``, ``source``, ``files_seen``,
    ``files_read``, ``bytes_read``, ``sessions_new``, ``sessions_updated`` and the
    ``{reason: count}`` maps ``sessions_filtered``, ``lines_skipped``, ``files_skipped``."""

    def record(self, row: dict[str, Any]) -> None:
        """Record a pass; the three maps may be given as dicts (encoded here)."""
        row = dict(row)
        for key in _JSON:
            if not isinstance(row.get(key), str):
                row[key] = json.dumps(row.get(key) or {})
        self._insert_plain("harvest_runs", row)

    def recent(self, limit: int = 50) -> list[Row]:
        """The last ``limit`` passes, newest first, the three maps decoded to dicts."""
        rows = list(self.db.table("harvest_runs").rows_where(order_by="id desc", limit=limit))
        for r in rows:
            for key in _JSON:
                r[key] = json.loads(r[key] or "{}")
        return rows

    def any(self) -> bool:
        """Whether any harvest pass was ever recorded."""
        return bool(self.db.table("harvest_runs").count)
