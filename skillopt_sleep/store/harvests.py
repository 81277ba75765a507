"""``harvest_runs``: one row per harvest pass of one source (what it read, what it skipped)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from skillopt_sleep.store._base import Repository

_JSON = ("sessions_filtered", "lines_skipped", "files_skipped")


@dataclass(frozen=True, slots=True)
class HarvestRow:
    """A ``harvest_runs`` row as :meth:`HarvestsRepo.recent` reads it (the three maps
    decoded); fields in the table's column order."""

    id: int
    started_at: str | None
    finished_at: str | None
    source: str
    files_seen: int | None
    files_read: int | None
    bytes_read: int | None
    sessions_new: int | None
    sessions_updated: int | None
    sessions_filtered: dict[str, int]
    lines_skipped: dict[str, int]
    files_skipped: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        """The row as a dict (column → value, in column order; the maps decoded)."""
        return dataclasses.asdict(self)


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

    def recent(self, limit: int = 50) -> list[HarvestRow]:
        """The last ``limit`` passes, newest first, the three maps decoded to dicts."""
        rows = list(self.db.table("harvest_runs").rows_where(order_by="id desc", limit=limit))
        for r in rows:
            for key in _JSON:
                r[key] = json.loads(r[key] or "{}")
        return [HarvestRow(**r) for r in rows]

    def any(self) -> bool:
        """Whether any harvest pass was ever recorded."""
        return bool(self.db.table("harvest_runs").count)
