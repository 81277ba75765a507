"""``proposals`` (what a night staged) and ``adoptions`` (what the user wrote live)."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from skillopt_sleep.store._base import Repository, Row, write_transaction


@dataclass(frozen=True, slots=True)
class ProposalRow:
    """A ``proposals`` row (see :class:`ProposalsRepo`); fields in the table's column order."""

    id: str
    night_id: int
    created_at: str
    status: str
    target_path: str
    base_hash: str  # "" when the file did not exist
    new_hash: str
    dir: str
    val_before: float | None
    val_after: float | None
    test_before: float | None
    test_after: float | None
    summary: str | None  # JSON text
    reason: str | None
    agent: str
    kind: str
    report_hash: str

    def as_dict(self) -> dict[str, Any]:
        """The row as the dict the table holds (column → value, in column order)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class AdoptionRow:
    """An ``adoptions`` row (see :class:`AdoptionsRepo`); fields in the table's column order."""

    id: int
    proposal_id: str
    target_path: str
    adopted_at: str
    backup_path: str
    existed_before: int
    before_hash: str
    after_hash: str
    rolled_back_at: str | None
    #: JSON: the proposal's rules this adoption did not write (m017; None before)
    left_out: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row as the dict the table holds (column → value, in column order)."""
        return dataclasses.asdict(self)


def _proposal(row: Row | None) -> ProposalRow | None:
    return None if row is None else ProposalRow(**row)


def _adoption(row: Row | None) -> AdoptionRow | None:
    return None if row is None else AdoptionRow(**row)


def block_of(row: Row | ProposalRow) -> str | None:
    """The block of its target a proposal's row trains: the ``section`` (a project path) of
    its ``summary`` (JSON text, or decoded), None for the block every project reads (or an unreadable summary)."""
    summary = (row.get("summary") if isinstance(row, dict) else row.summary) or "{}"
    if isinstance(summary, str):
        try:
            summary = json.loads(summary)
        except ValueError:
            return None
    section = summary.get("section") if isinstance(summary, dict) else None
    return section if isinstance(section, str) else None


class ProposalsRepo(Repository):
    """Rows: ``id`` (``p1``, ``p2``, … numbered by the proposals themselves, not the nights;
    an agent's copy of a proposal's rules ``p<n>-<agent>``, see :meth:`next_id`), ``night_id``, ``created_at``, ``status`` (staged |
    adopted | rejected | rolled_back | superseded), ``target_path``, ``base_hash`` (sha256 of
    the live file when the night started, "" = absent), ``new_hash``, ``dir`` (the proposal
    folder), ``val_before``, ``val_after``, ``test_before``, ``test_after``, ``summary``
    (JSON text), ``reason``, ``agent`` and ``kind`` (whose document it writes: an agent's
    canonical name, and ``memory``, ``managed_skill`` or ``path``; "" in a row staged before
    they were recorded)."""

    def get(self, proposal_id: str) -> ProposalRow | None:
        """The proposal's row, or None."""
        return _proposal(self._one("proposals", "id = ?", [proposal_id]))

    def next_id(self, after: str | None = None) -> str:
        """The next free proposal id: ``p<n>`` with ``n`` one more than the highest number
        any proposal (or an agent's copy, ``p<n>-<agent>``) took, and more than ``after``'s
        (an id reserved but not staged yet); ``p1`` in a new store. A dry run or a night
        that stages nothing takes no number."""
        row = self.db.execute(
            "select max(cast(substr(id, 2) as integer)) from proposals where id like 'p%'"
        ).fetchone()
        top = int(row[0] or 0) if row else 0
        m = re.match(r"p(\d+)", after or "")
        return f"p{max(top, int(m.group(1)) if m else 0) + 1}"

    def all(self, status: str | None = None, limit: int | None = None) -> list[ProposalRow]:
        """Proposals newest first (by ``created_at``, then night), optionally of one status;
        a night's own proposal before its agents' copies (``p3`` before ``p3-codex``)."""
        order = "created_at desc, night_id desc, instr(id, '-') > 0, id"
        if status:
            rows = self.db.table("proposals").rows_where(
                "status = ?", [status], order_by=order, limit=limit
            )
        else:
            rows = self.db.table("proposals").rows_where(order_by=order, limit=limit)
        return [ProposalRow(**r) for r in rows]

    def staged(self, target_path: str | None = None) -> list[ProposalRow]:
        """Staged proposals newest first, optionally only those for ``target_path``."""
        if target_path is None:
            return self.all("staged")
        return [
            ProposalRow(**r)
            for r in self.db.table("proposals").rows_where(
                "target_path = ? and status = 'staged'", [target_path], order_by="id"
            )
        ]

    def latest(self) -> ProposalRow | None:
        """The newest proposal, or None."""
        rows = self.all(limit=1)
        return rows[0] if rows else None

    def stage(self, row: dict[str, Any]) -> None:
        """Stage ``row`` (its ``status`` set to staged) and mark the other staged proposals
        for the same target *and the same block* superseded, in one transaction: a shared
        memory file holds a block per project (its ``summary``'s ``section``), and a proposal
        for one project's block leaves the proposals for the others staged."""
        pid = row["id"]
        block = block_of(row)
        with write_transaction(self.db):
            for old in self.staged(row["target_path"]):
                if block_of(old) == block:
                    self.set_status(old.id, "superseded", f"superseded by {pid}")
            self.db.table("proposals").upsert(dict(row, status="staged"), pk="id")

    def set_report_hash(self, proposal_id: str, report_hash: str) -> None:
        """Record the sha256 of a proposal's ``report.json`` as rewritten (``forget``)."""
        self.db.table("proposals").update(proposal_id, {"report_hash": report_hash})

    def set_status(self, proposal_id: str, status: str, reason: str | None = None) -> None:
        """Set a proposal's status (and its reason, when given)."""
        values: dict[str, Any] = {"status": status}
        if reason is not None:
            values["reason"] = reason
        self.db.table("proposals").update(proposal_id, values)

    def refused(self, target_path: str, new_hash: str) -> ProposalRow | None:
        """The newest proposal for ``target_path`` with the document ``new_hash`` (sha256)
        that the user rejected or rolled back, or None."""
        rows = list(
            self.db.table("proposals").rows_where(
                "target_path = ? and new_hash = ? and status in ('rejected', 'rolled_back')",
                [target_path, new_hash],
                order_by="created_at desc, id desc",
                limit=1,
            )
        )
        return ProposalRow(**rows[0]) if rows else None

    def targets(self) -> list[str]:
        """Every live file path some proposal or adoption refers to (as stored)."""
        rows = self.db.execute(
            "select target_path from proposals union select target_path from adoptions"
        ).fetchall()
        return [r[0] for r in rows if r[0]]


class AdoptionsRepo(Repository):
    """Rows: ``id``, ``proposal_id``, ``target_path``, ``adopted_at``, ``backup_path`` (""
    when the file did not exist before), ``existed_before`` (0/1), ``before_hash``,
    ``after_hash``, ``rolled_back_at`` (None while live)."""

    def add(self, **fields: Any) -> int:
        """Record an adoption; returns its id."""
        return self._insert("adoptions", fields)

    def get(self, adoption_id: int) -> AdoptionRow | None:
        """The adoption's row, or None."""
        return _adoption(self._one("adoptions", "id = ?", [adoption_id]))

    def delete(self, adoption_id: int) -> None:
        """Forget an adoption (its live write failed)."""
        self.db.table("adoptions").delete(adoption_id)

    def latest_live(self, targets: list[str] | None = None) -> AdoptionRow | None:
        """The newest adoption not rolled back, of one of ``targets`` (paths as stored) or of
        any target when None."""
        where, args = "rolled_back_at is null", list(targets or [])
        if targets:
            where += f" and target_path in ({', '.join('?' * len(targets))})"
        rows = list(self.db.table("adoptions").rows_where(where, args, order_by="id desc", limit=1))
        return AdoptionRow(**rows[0]) if rows else None

    def live_of(self, proposal_id: str) -> AdoptionRow | None:
        """The proposal's newest adoption not rolled back, or None."""
        rows = list(
            self.db.table("adoptions").rows_where(
                "proposal_id = ? and rolled_back_at is null",
                [proposal_id],
                order_by="id desc",
                limit=1,
            )
        )
        return AdoptionRow(**rows[0]) if rows else None

    def set_rolled_back(self, adoption_id: int, at: str) -> None:
        """Record when the adoption was rolled back (ISO UTC)."""
        self.db.table("adoptions").update(adoption_id, {"rolled_back_at": at})

    def in_place(self) -> list[AdoptionRow]:
        """The adoptions not rolled back, the newest of each target, newest first."""
        rows = self._rows("select * from adoptions where rolled_back_at is null order by id desc")
        seen: set[str] = set()
        out = []
        for r in rows:
            if r["target_path"] not in seen:
                seen.add(r["target_path"])
                out.append(AdoptionRow(**r))
        return out
