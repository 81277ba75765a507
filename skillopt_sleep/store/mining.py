"""What mining keeps between runs: each project's clustering (``mining/mine.py``), so a night
compares only the prompts that are new since the last one; and the user's links between
requests (``tasks join`` / ``tasks split``)."""

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

    def links(self) -> list[tuple[str, str, str, str]]:
        """Every ``(project, a, b, link)`` the user set (``a`` < ``b``: normalised requests;
        ``link``: ``join`` or ``split``)."""
        rows = self.db.execute("select project, a, b, link from task_links").fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def link(self, project: str, a: str, b: str, link: str) -> None:
        """Say that requests ``a`` and ``b`` of ``project`` are one task (``join``) or are
        not (``split``); a later word on the same pair replaces the earlier one."""
        a, b = sorted((a, b))
        with write_transaction(self.db):
            self.db.execute(
                "insert or replace into task_links (project, a, b, link, created_at) "
                "values (?, ?, ?, ?, ?)",
                [project, a, b, link, now_iso()],
            )
