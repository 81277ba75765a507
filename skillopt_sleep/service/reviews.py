"""Reviewing proposals: list, show, adopt, reject, roll back, and the managed documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillopt_sleep.errors import BadArgument, ProposalError
from skillopt_sleep.results import (
    AdoptResult,
    AgentCopy,
    ProposalDetail,
    ProposalReport,
    ProposalRule,
    ProposalSummary,
    RefusalLifted,
    RejectResult,
    RollbackResult,
    RuleRejected,
    SkillInfo,
)
from skillopt_sleep.service.core import Core
from skillopt_sleep.service.nights import NightsService
from skillopt_sleep.service.receipts import Receipts
from skillopt_sleep.store import Store


class ReviewService:
    """The proposals and the managed documents, for the faces."""

    def __init__(self, core: Core, nights: NightsService, receipts: Receipts) -> None:
        self.core = core
        self._nights = nights
        self._receipts = receipts

    def proposals(
        self, status: str | None = None, limit: int | None = None
    ) -> list[ProposalSummary]:
        """Proposals, newest first (``status``: only those)."""
        from skillopt_sleep.proposals.records import list_proposals

        with self.core.use() as store:
            rows = list_proposals(store, status)
        return [_summary(r) for r in rows[:limit]]

    def proposal(self, proposal_id: str) -> ProposalDetail:
        """A proposal with its report and diff. ProposalError when unknown or unreadable.
        A staged one is marked seen (``status`` stops giving its ready notice)."""
        from skillopt_sleep.proposals.records import get_proposal, load_report

        with self.core.use() as store:
            row = get_proposal(store, proposal_id)
        report = load_report(row)
        self._receipts.saw(row)
        try:
            with open(Path(row.dir) / "diff.patch", encoding="utf-8", newline="") as fh:
                diff = fh.read()  # byte-exact: a CRLF file's diff keeps its CRs
        except OSError as exc:
            raise ProposalError(f"proposal {proposal_id}: diff unreadable ({exc})") from None
        with self.core.use() as store:
            rules = _rules_now(store, row, report.rules)
        return ProposalDetail(
            rules=rules,
            **_summary(row.as_dict()).model_dump(),
            new_hash=row.new_hash,
            folder=row.dir,
            diff=diff,
            edits=report.edits,
            val_tasks=report.val_tasks,
            test_tasks=report.test_tasks,
            cost=report.cost,
            summary=report.summary,
            report_uri=f"skillopt://proposals/{row.id}",
        )

    def report(self, proposal_id: str) -> ProposalReport:
        """The proposal's ``report.json``, typed. ProposalError when unknown or unreadable."""
        from skillopt_sleep.proposals.records import get_proposal, load_report

        with self.core.use() as store:
            row = get_proposal(store, proposal_id)
        return load_report(row)

    def proposal_markdown(self, proposal_id: str, *, with_status: bool = False) -> str:
        """The proposal's ``report.md`` as it stands now (a proposal no longer staged says it
        can no longer be adopted); ``with_status`` adds a first comment line with its status
        and base hash (for agents). A staged one is marked seen, as by :meth:`proposal`."""
        from skillopt_sleep.proposals.records import get_proposal, load_report, report_markdown

        with self.core.use() as store:
            row = get_proposal(store, proposal_id)
            rules = _rules_now(store, row, load_report(row).rules)
        report = report_markdown(row, rules)
        self._receipts.saw(row)
        if not with_status:
            return report
        return f"<!-- status: {row.status}; base_hash: {row.base_hash or '(absent)'} -->\n" + report

    def latest_report(self) -> str:
        """The newest proposal's report, or why the last night staged none (Markdown)."""
        with self.core.use() as store:
            latest = store.proposals.latest()
        if latest:
            return self.proposal_markdown(latest.id, with_status=True)
        recent = self._nights.nights(1)
        if not recent:
            return "# No report yet\n\nNo night has run. Call the `run_night` tool to start one.\n"
        n = recent[0]
        return (
            f"# No proposal yet\n\nThe latest night ({n.id}) ended `{n.status}`"
            f"{': ' + n.error if n.error else ''}.\n\n```json\n"
            f"{n.summary.model_dump_json(indent=2, exclude_none=True)}\n```\n"
        )

    def adopt(
        self,
        proposal_id: str,
        *,
        base_hash: str | None = None,
        force: bool = False,
        allow_flagged: bool = False,
        rules: list[int] | None = None,
    ) -> AdoptResult:
        """Write a staged proposal to its live file (atomically, with a backup), only where
        the config and the agent registry allow; ``allow_flagged``: even when it adds rules
        the poisoning screen flags; ``rules``: only these of its rules (numbers as ``show``
        lists them; None: all but those refused one by one)."""
        from skillopt_sleep.proposals.adoption import adopt

        settings = self.core.settings()
        with self.core.use(check=True) as store:
            return adopt(
                store,
                proposal_id,
                base_hash=base_hash,
                force=force,
                allow_flagged=allow_flagged,
                settings=settings,
                rules=_rule_texts(store, proposal_id, rules),
            )

    def agent_copies(self, proposal_id: str) -> list[str]:
        """The other staged proposals carrying the same night's rules for other agents."""
        from skillopt_sleep.proposals.records import agent_group

        with self.core.use() as store:
            return agent_group(store, proposal_id)[1:]

    def copies_not_staged(self, proposal_id: str) -> list[AgentCopy]:
        """The other agents ``proposal_id``'s night made no copy for, each with why (from its
        report; [] for a copy itself or a report without copies)."""
        from skillopt_sleep.proposals.records import get_proposal, load_report

        with self.core.use() as store:
            report = load_report(get_proposal(store, proposal_id))
        return [c for c in report.summary.copies if c.status == "not_staged"]

    def copy_statuses(self, proposal_id: str) -> dict[str, str]:
        """The other proposals carrying the same night's rules for other agents (whatever
        their status), by id, with their status now."""
        from skillopt_sleep.proposals.records import copy_statuses

        with self.core.use() as store:
            return copy_statuses(store, proposal_id)

    def adopt_all_agents(
        self,
        proposal_id: str,
        *,
        force: bool = False,
        allow_flagged: bool = False,
        rules: list[int] | None = None,
    ) -> list[AdoptResult]:
        """Adopt a proposal and the staged copies of its rules for other agents (see
        :func:`skillopt_sleep.proposals.adopt_group`); the adoptions, ``proposal_id``'s first.
        ``rules``: only these of its rules, in every copy too."""
        from skillopt_sleep.proposals.adoption import adopt_group

        settings = self.core.settings()
        with self.core.use(check=True) as store:
            return adopt_group(
                store,
                proposal_id,
                force=force,
                allow_flagged=allow_flagged,
                settings=settings,
                rules=_rule_texts(store, proposal_id, rules),
            )

    def reject(self, proposal_id: str, reason: str = "") -> RejectResult:
        from skillopt_sleep.proposals.refusals import reject

        with self.core.use(check=True) as store:
            return reject(store, proposal_id, reason)

    def reject_rule(self, proposal_id: str, n: int, reason: str = "") -> RuleRejected:
        """Refuse one rule of a staged proposal (see
        :func:`skillopt_sleep.proposals.refusals.reject_rule`)."""
        from skillopt_sleep.proposals.refusals import reject_rule

        with self.core.use(check=True) as store:
            return reject_rule(store, proposal_id, n, reason)

    def lift_rule_refusal(self, proposal_id: str, n: int) -> RuleRejected:
        """Take back the refusal of one rule (see
        :func:`skillopt_sleep.proposals.refusals.lift_rule_refusal`)."""
        from skillopt_sleep.proposals.refusals import lift_rule_refusal

        with self.core.use(check=True) as store:
            return lift_rule_refusal(store, proposal_id, n)

    def lift_refusal(self, proposal_id: str) -> RefusalLifted:
        """Take back the refusal of a rejected or rolled-back proposal (staged again; see
        :func:`skillopt_sleep.proposals.lift_refusal`)."""
        from skillopt_sleep.proposals.refusals import lift_refusal

        with self.core.use(check=True) as store:
            return lift_refusal(store, proposal_id)

    def rollback(
        self,
        target: str | None = None,
        *,
        force: bool = False,
        all_agents: bool = False,
        managed_only: bool = False,
    ) -> RollbackResult:
        """Undo an adoption (see :func:`skillopt_sleep.proposals.rollback`): ``target`` is a
        proposal's or an agent's copy's id, a live file (its latest adoption) or None (the
        latest adoption); ``all_agents``: the adopted copies of the same rules for other
        agents too, each in its own file. ``managed_only``: a ``target`` path must be a file
        some proposal or adoption refers to (BadArgument otherwise)."""
        from skillopt_sleep.proposals.records import names_proposal
        from skillopt_sleep.proposals.rollback import rollback

        settings = self.core.settings()
        with self.core.use(check=True) as store:
            path = target
            if target and managed_only and not names_proposal(store, target):
                path = self._managed(store, target)
            return rollback(store, path, force=force, all_agents=all_agents, settings=settings)

    def skill(self, target: str | None = None) -> SkillInfo:
        """A managed document as it is now (default: the latest proposal's target)."""
        from skillopt_sleep.delivery.document import all_rules, read_live, sections, sha256_text
        from skillopt_sleep.proposals.confinement import check_target

        with self.core.use() as store:
            if target:
                path = self._managed(store, target)
            else:
                latest = store.proposals.latest()
                if latest is None:
                    raise BadArgument(
                        "no managed target yet: no proposal has been staged (run a night first)"
                    )
                path = latest.target_path
            check_target(store, path, self.core.settings())
        text = read_live(Path(path))
        return SkillInfo(
            target=path,
            exists=text is not None,
            sha256=sha256_text(text),
            managed_block=bool(sections(text)),
            rules=all_rules(text),
            text=text or "",
        )

    @staticmethod
    def _managed(store: Store, target: str) -> str:
        """The stored form of ``target``; BadArgument when no proposal / adoption names it."""
        known: dict[str, str] = {}
        for p in store.proposals.targets():
            known[str(Path(p).expanduser().resolve())] = p
            known.setdefault(p, p)
        key = str(Path(target).expanduser().resolve()) if target.strip() else ""
        if key in known:
            return known[key]
        names = sorted(set(known.values()))
        listed = ", ".join(names[:5]) if names else "none yet (no proposal has been staged)"
        raise BadArgument(f"{target!r} is outside the managed targets; managed: {listed}")


def _summary(row: dict[str, Any]) -> ProposalSummary:
    from skillopt_sleep.store.proposals import block_of

    return ProposalSummary.model_validate(
        {k: row.get(k) for k in ProposalSummary.model_fields}
        | {"base_hash": row.get("base_hash") or "", "block": block_of(row)}
    )


def _rule_texts(store: Store, proposal_id: str, numbers: list[int] | None) -> list[str] | None:
    """The texts of rules ``numbers`` of ``proposal_id`` (None: None, every rule).
    BadArgument for a number it has no rule for."""
    if numbers is None:
        return None
    from skillopt_sleep.proposals.records import get_proposal, load_report

    rules = load_report(get_proposal(store, proposal_id)).rules
    by_n = {r.n: r.rule for r in rules}
    wrong = [n for n in numbers if n not in by_n]
    if wrong:
        span = f"1 to {len(rules)}" if rules else "none (it was staged before rules were listed)"
        raise BadArgument(
            f"proposal {proposal_id} has no rule {', '.join(map(str, wrong))}; its rules are "
            f"{span} (`skillopt-sleep show {proposal_id}` lists them)"
        )
    return [by_n[n] for n in numbers]


def _rules_now(store: Store, row: Any, rules: list[ProposalRule]) -> list[ProposalRule]:
    """A proposal's rules with their status now: refused one by one (with the reason), or,
    once it is adopted, whether the live adoption wrote each."""
    import json

    refused = store.edits.rules_refused(row.id)
    adopted = store.adoptions.live_of(row.id) if row.status == "adopted" else None
    left_out = set(json.loads(adopted.left_out or "[]")) if adopted else set()
    out = []
    for r in rules:
        if r.rule in refused:
            r = r.model_copy(update={"status": "refused", "reason": refused[r.rule]})
        elif adopted is not None:
            r = r.model_copy(update={"status": "not adopted" if r.rule in left_out else "adopted"})
        out.append(r)
    return out
