"""``edits``: every edit the optimizer proposed during a night, and what the gate said."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

from skillopt_sleep.store._base import Repository, now_iso


@dataclass(frozen=True)
class RejectedEdit:
    """An edit the gate rejected, with the summary (JSON text) of the night that tried it."""

    op: Literal["add", "delete", "replace", "describe"]
    text: str
    old: str
    night_summary: str


@dataclass(frozen=True)
class RefusedEdit:
    """An edit the gate had applied in a proposal the user then rejected or rolled back:
    ``proposal_id``, its ``status`` (rejected | rolled_back) and the user's ``reason``."""

    op: Literal["add", "delete", "replace", "describe"]
    text: str
    old: str
    proposal_id: str
    status: str
    reason: str


class EditsRepo(Repository):
    """Rows: ``id``, ``night_id``, ``epoch``, ``batch``, ``op`` (add | delete | replace |
    describe), ``text``, ``old``, ``rationale``, ``origin`` (reflect | consolidate), ``status``
    (applied | rejected | unmatched | unverified | flagged), ``reason``, ``val_before``,
    ``val_after``, ``created_at``."""

    def add(self, **fields: Any) -> int:
        """Record one edit; returns its id."""
        return self._insert("edits", fields)

    def rejected_for(self, target_path: str, section: str | None = None) -> list[RejectedEdit]:
        """Reflect edits the gate rejected (or the poisoning screen flagged) in nights on
        ``target_path``, for the block of ``section`` only (a project's block of a shared
        memory file; None: the file's block for every project, or a file of its own), newest
        first. An edit recorded before m012 counts as its night's block."""
        rows = self.db.execute(
            "select e.op, e.text, e.old, n.summary from edits e join nights n "
            "on n.id = e.night_id where e.status in ('rejected', 'flagged') and e.origin != 'consolidate' "
            "and n.target_path = ? "
            "and coalesce(e.section, json_extract(n.summary, '$.section'), '') = ? "
            "order by e.id desc",
            [target_path, section or ""],
        ).fetchall()
        return [RejectedEdit(cast(Any, r[0]), r[1] or "", r[2] or "", r[3] or "") for r in rows]

    def refused_for(self, target_path: str, section: str | None = None) -> list[RefusedEdit]:
        """Edits (not consolidations) applied in proposals for ``target_path`` that the user
        rejected or rolled back, newest proposal first. Only the proposals for the block of
        ``section`` (a project, in a memory file every project shares; None: the file's
        block for every project, or a file of its own): a refusal is of that document."""
        rows = self.db.execute(
            "select e.op, e.text, e.old, p.id, p.status, p.reason from edits e "
            "join proposals p on p.night_id = e.night_id "
            "where p.target_path = ? and p.status in ('rejected', 'rolled_back') "
            "and coalesce(json_extract(p.summary, '$.section'), '') = ? "
            "and coalesce(e.section, json_extract(p.summary, '$.section'), '') "
            "= coalesce(json_extract(p.summary, '$.section'), '') "
            "and e.status = 'applied' and e.origin != 'consolidate' "
            "order by p.created_at desc, p.id desc, e.id",
            [target_path, section or ""],
        ).fetchall()
        out = [
            RefusedEdit(cast(Any, r[0]), r[1] or "", r[2] or "", r[3], r[4], r[5] or "")
            for r in rows
        ]
        # rules the user refused one by one (``reject ID --rule N``), newest first
        one_by_one = self.db.execute(
            "select rule, proposal_id, reason from rule_refusals where target_path = ? "
            "and coalesce(section, '') = ? order by id desc",
            [target_path, section or ""],
        ).fetchall()
        return [
            RefusedEdit("add", r[0], "", r[1], "rejected", r[2] or "") for r in one_by_one
        ] + out

    def refuse_rule(
        self, proposal_id: str, target_path: str, section: str | None, rule: str, reason: str
    ) -> None:
        """Remember that the user refused ``rule`` of ``proposal_id`` on its own."""
        self._insert(
            "rule_refusals",
            {
                "proposal_id": proposal_id,
                "target_path": target_path,
                "section": section or "",
                "rule": rule,
                "reason": reason,
                "created_at": now_iso(),
            },
        )

    def lift_rule_refusals(self, proposal_id: str, rule: str | None = None) -> int:
        """Forget the user's refusal of ``rule`` of ``proposal_id`` (None: of all its
        rules); how many were forgotten."""
        if rule is None:
            return int(
                self.db.execute(
                    "delete from rule_refusals where proposal_id = ?", [proposal_id]
                ).rowcount
            )
        return int(
            self.db.execute(
                "delete from rule_refusals where proposal_id = ? and rule = ?", [proposal_id, rule]
            ).rowcount
        )

    def rules_refused(self, proposal_id: str) -> dict[str, str]:
        """The rules of ``proposal_id`` the user refused one by one: rule -> reason."""
        rows = self.db.execute(
            "select rule, reason from rule_refusals where proposal_id = ? order by id",
            [proposal_id],
        ).fetchall()
        return {r[0]: r[1] or "" for r in rows}

    def of_night(self, night_id: int, section: str | None) -> list[dict[str, Any]]:
        """The edits of night ``night_id`` for the block of ``section``, in order."""
        rows = self.db.execute(
            "select * from edits where night_id = ? and coalesce(section, '') = ? order by id",
            [night_id, section or ""],
        )
        names = [d[0] for d in rows.description]
        return [dict(zip(names, r, strict=True)) for r in rows.fetchall()]
