"""Reading the proposals: their rows, reports and groups (the same rules for other agents).

A proposal is a row of the store and a folder under ``<state>/proposals/`` (the staged
``document``, ``report.json``, ``report.md``, ``diff.patch``; adopt adds
:data:`ADOPTION_RECORD` and, while it writes, :data:`ADOPTING`). Nothing here writes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from skillopt_sleep.delivery.document import SKILL_NAME
from skillopt_sleep.errors import ProposalError
from skillopt_sleep.night.stage import RULES_BEGIN, RULES_END, rules_markdown
from skillopt_sleep.results import (
    AdoptResult,
    NightSummary,
    ProposalReport,
    ProposalRule,
    load_report_json,
)
from skillopt_sleep.store import Store
from skillopt_sleep.store.proposals import AdoptionRow, ProposalRow

ADOPTION_RECORD = "adoption.json"  # in the proposal's folder: what adopt created (folders)


#: in the proposal's folder from the moment adopt records the adoption until the live file is
#: written: a process killed in between leaves it, and :func:`finish_unfinished` settles it
ADOPTING = "adopting.json"


def get_proposal(store: Store, proposal_id: str) -> ProposalRow:
    row = store.proposals.get(proposal_id)
    if not row:
        known = [r.id for r in store.proposals.all(limit=5)]
        hint = f"; recent: {', '.join(known)}" if known else "; there are no proposals yet"
        raise ProposalError(f"no proposal {proposal_id!r}{hint}")
    return row


def list_proposals(store: Store, status: str | None = None) -> list[dict[str, Any]]:
    """Proposal rows, newest first; ``summary`` decoded from its JSON column."""
    rows = [r.as_dict() for r in store.proposals.all(status)]
    for row in rows:
        try:
            row["summary"] = json.loads(row.get("summary") or "{}")
        except json.JSONDecodeError:
            pass
    return rows


def load_report(row: ProposalRow) -> ProposalReport:
    """The proposal's ``report.json``, typed. Raises ProposalError (one line) when it is
    missing, unreadable or not a report this version reads."""
    where = f"proposal {row.id}: report.json"
    try:
        text = (Path(row.dir) / "report.json").read_text("utf-8")
    except OSError as exc:
        raise ProposalError(f"proposal {row.id}: report unreadable ({exc})") from None
    try:
        return load_report_json(text, where)
    except ValueError as exc:
        raise ProposalError(str(exc)) from None


#: the statuses a proposal can be adopted from: staged, or rolled back (the user undid it and
#: now asks for it again; a night never stages a rolled-back document again by itself)
ADOPTABLE = ("staged", "rolled_back")


def report_markdown(row: ProposalRow, rules: list[ProposalRule] | None = None) -> str:
    """The proposal's ``report.md`` as it stands now: a proposal that is no longer staged says
    so where the staged report says how to adopt it; ``rules`` (with their status now) are
    written over its rules section. Raises ProposalError when unreadable."""
    try:
        text = (Path(row.dir) / "report.md").read_text("utf-8")
    except OSError as exc:
        raise ProposalError(
            f"proposal {row.id}: report unreadable ({exc.strerror or exc})"
        ) from None
    if rules and RULES_BEGIN in text and RULES_END in text:
        head, rest = text.split(RULES_BEGIN, 1)
        tail = rest.split(RULES_END, 1)[1]
        now = rules_markdown(rules, row.id)
        text = head + "\n".join(now[now.index(RULES_BEGIN) :]).rstrip("\n") + tail
    # the section's markers are for this rewrite, not for the reader
    text = text.replace(RULES_BEGIN + "\n", "").replace(RULES_END + "\n", "")
    if row.status not in ADOPTABLE:
        why = f" ({row.reason})" if row.reason else ""
        text = re.sub(
            r"(?m)^Adopt with `skillopt-sleep adopt [^\n]*$",
            f"This proposal is {row.status}{why}: it can no longer be adopted.",
            text,
            count=1,
        )
    return text


def agent_group(
    store: Store, proposal_id: str, statuses: tuple[str, ...] = ("staged",)
) -> list[str]:
    """The proposals with one of ``statuses`` (default: staged) that carry the same night's
    rules for different agents (the proposal the night trained and its agents' copies,
    :mod:`skillopt_sleep.night.copies`, including copies a later night made of it),
    ``proposal_id``'s own first. ProposalError for an unknown proposal."""
    row = get_proposal(store, proposal_id)
    summary = NightSummary.model_validate_json(row.summary or "{}")
    head = summary.copy_of or proposal_id
    # a copy an earlier night staged and this night found unchanged ("same document as the
    # staged proposal p6-codex") is listed in this proposal's copies: it is one of the group
    listed = {c.proposal_id for c in summary.copies if c.proposal_id}
    staged = [r for status in statuses for r in store.proposals.all(status) if r.id != proposal_id]
    members = [
        r.id
        for r in staged
        if r.id == head
        or r.id in listed
        or NightSummary.model_validate_json(r.summary or "{}").copy_of == head
    ]
    return [proposal_id, *members]


#: a proposal's id as the store numbers them: ``p3``, or an agent's copy ``p3-codex``
_PROPOSAL_ID = re.compile(r"p\d+(?:-[A-Za-z0-9_]+)?")


def names_proposal(store: Store, target: str | None) -> bool:
    """Whether ``target`` (rollback's argument) names a proposal by its id rather than a
    file: shaped like one (``p3``, ``p3-codex``) and a stored proposal, or no file of that
    name here."""
    return bool(target and _PROPOSAL_ID.fullmatch(target)) and (
        store.proposals.get(str(target)) is not None or not os.path.lexists(str(target))
    )


def _rules_group(store: Store, proposal_id: str) -> list[ProposalRow]:
    """The other proposals carrying the same night's rules for other agents (the proposal
    the night trained and its agents' copies, whatever their status), not ``proposal_id``."""
    row = get_proposal(store, proposal_id)
    head = NightSummary.model_validate_json(row.summary or "{}").copy_of or proposal_id
    return [
        r
        for r in store.proposals.all()
        if r.id != proposal_id
        and (r.id == head or NightSummary.model_validate_json(r.summary or "{}").copy_of == head)
    ]


def copy_statuses(store: Store, proposal_id: str) -> dict[str, str]:
    """The other proposals carrying ``proposal_id``'s rules for other agents, by id, with
    their status now (``p3`` and its copies ``p3-codex``, …)."""
    return {r.id: r.status for r in _rules_group(store, proposal_id)}


def _adoption(row: AdoptionRow) -> AdoptResult:
    return AdoptResult(
        proposal_id=row.proposal_id,
        target_path=row.target_path,
        adopted_at=row.adopted_at,
        backup_path=row.backup_path or "",
        before_hash=row.before_hash or "",
        after_hash=row.after_hash or "",
        existed_before=bool(row.existed_before),
    )


def _created_dirs(store: Store, adoption: AdoptionRow) -> list[str]:
    """The folders ``adoption`` created (deepest first), from the record adopt left in the
    proposal's folder. Without one (an adoption made by an older version) only the managed
    skill folder right above the file counts, as it did then."""
    proposal = store.proposals.get(adoption.proposal_id)
    folder = proposal.dir if proposal is not None else None
    if folder:
        try:
            data = json.loads((Path(folder) / ADOPTION_RECORD).read_text("utf-8"))
            if data.get("target_path") == adoption.target_path:
                return [str(d) for d in data.get("created_dirs") or []]
        except (OSError, ValueError, AttributeError):
            pass
    parent = Path(adoption.target_path).parent
    return [str(parent)] if parent.name == SKILL_NAME else []
