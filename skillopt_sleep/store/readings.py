"""What the optimizer model read in the user's follow-ups (``mining/meaning.py``): one row per
reading, keyed by a hash of the prompt it was asked with, so a reading is asked once."""

from __future__ import annotations

import json
from typing import Any

from skillopt_sleep.store._base import Repository, now_iso, write_transaction


class ReadingsRepo(Repository):
    """``readings``: ``key`` → the reading as JSON (the model it came from beside it)."""

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("select reading from readings where key = ?", [key]).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def put(self, key: str, reading: dict[str, Any], model: str) -> None:
        """Keep one reading (not on a read-only store)."""
        if self.db.read_only:
            return
        with write_transaction(self.db):
            self.db.execute(
                "insert or replace into readings (key, reading, model, created_at) "
                "values (?, ?, ?, ?)",
                [key, json.dumps(reading, separators=(",", ":")), model, now_iso()],
            )

    def count(self) -> int:
        return int(self.db.execute("select count(*) from readings").fetchone()[0])

    def clear(self) -> int:
        """Forget every reading (they hold the words of the user's follow-ups)."""
        with write_transaction(self.db):
            return int(self.db.execute("delete from readings").rowcount)
