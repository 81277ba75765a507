"""What mining keeps between runs: each project's clustering (``mining/mine.py``), so a night
compares only the prompts that are new since the last one."""

from __future__ import annotations

import json
from typing import Any

from skillopt_sleep.store._base import Repository, now_iso, write_transaction


class MiningRepo(Repository):
    """``mining_state``: one row per project (its intents' keys, time, normalised words,
    cluster and correction stances; the threshold and format they were clustered with). The
    words are those of stored prompts, redacted when they were harvested."""

    def states(self, projects: list[str]) -> dict[str, dict[str, Any]]:
        """The stored states of ``projects`` (a project without one is left out)."""
        out: dict[str, dict[str, Any]] = {}
        for project in projects:
            row = self.db.execute(
                "select state from mining_state where project = ?", [project]
            ).fetchone()
            if row and row[0]:
                out[project] = json.loads(row[0])
        return out

    def save(self, states: dict[str, dict[str, Any]]) -> None:
        """Replace the stored states of these projects (not on a read-only store: ``tasks``
        reading a backup mines for its listing alone)."""
        if self.db.read_only:
            return
        at = now_iso()
        with write_transaction(self.db):
            for project, state in states.items():
                self.db.execute(
                    "insert or replace into mining_state (project, state, updated_at) "
                    "values (?, ?, ?)",
                    [project, json.dumps(state, separators=(",", ":")), at],
                )

    def clear(self) -> int:
        """Forget every stored state (the next run clusters from scratch)."""
        with write_transaction(self.db):
            return int(self.db.execute("delete from mining_state").rowcount)
