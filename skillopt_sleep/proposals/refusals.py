"""Refusals: rejecting a staged proposal (and its copies for other agents), and taking a
rejection or a rollback back (:func:`lift_refusal`). The live file is never touched.
"""

from __future__ import annotations

from skillopt_sleep.delivery.document import same_rule
from skillopt_sleep.errors import ProposalError
from skillopt_sleep.proposals.adoption import finish_unfinished
from skillopt_sleep.proposals.records import _rules_group, agent_group, get_proposal, load_report
from skillopt_sleep.results import (
    NightSummary,
    ProposalRule,
    RefusalLifted,
    RejectResult,
    RuleRejected,
)
from skillopt_sleep.store import Store
from skillopt_sleep.store.proposals import block_of


def _withdraw_copies(store: Store, proposal_id: str, why: str) -> list[str]:
    """Reject the staged copies of ``proposal_id``'s rules for other agents (not the proposal
    itself, and nothing when it is itself a copy); their ids."""
    row = get_proposal(store, proposal_id)
    if NightSummary.model_validate_json(row.summary or "{}").copy_for:
        return []
    copies = agent_group(store, proposal_id)[1:]
    for pid in copies:
        store.proposals.set_status(pid, "rejected", why)
    return copies


def reject(store: Store, proposal_id: str, reason: str = "") -> RejectResult:
    """Discard a staged proposal (the live file is not touched). Raises ProposalError for an
    unknown or no longer staged proposal."""
    finish_unfinished(store)
    row = get_proposal(store, proposal_id)
    if row.status != "staged":
        raise ProposalError(f"proposal {proposal_id} is {row.status}, not staged")
    store.proposals.set_status(proposal_id, "rejected", reason or "rejected by user")
    withdrawn = _withdraw_copies(
        store, proposal_id, f"rejected with {proposal_id}" + (f": {reason}" if reason else "")
    )
    row = get_proposal(store, proposal_id)
    return RejectResult(
        proposal_id=row.id,
        status=row.status,
        reason=row.reason or "",
        withdrawn=withdrawn,
    )


def reject_rule(store: Store, proposal_id: str, n: int, reason: str = "") -> RuleRejected:
    """Refuse rule ``n`` of a staged proposal on its own (its copies for other agents refuse
    the same rule): remembered for the document's block, so no night proposes it again, while
    the proposal's other rules stay adoptable (``adopt`` leaves it out). Once every rule of
    the proposal is refused, the proposal is rejected. ProposalError for an unknown or no
    longer staged proposal, or a number it has no rule for."""
    finish_unfinished(store)
    row = get_proposal(store, proposal_id)
    if row.status != "staged":
        raise ProposalError(f"proposal {proposal_id} is {row.status}, not staged")
    rules = load_report(row).rules
    if not rules:
        raise ProposalError(
            f"proposal {proposal_id} lists no rules one by one (staged before rules were "
            "reviewed singly); reject it whole"
        )
    picked = _rule(proposal_id, rules, n)
    already = store.edits.rules_refused(proposal_id)
    if picked.rule in already:
        said = f" ({already[picked.rule]})" if already[picked.rule] else ""
        raise ProposalError(
            f"rule {n} of {proposal_id} is already refused{said}; "
            f"`skillopt-sleep reject {proposal_id} --rule {n} --undo` takes it back"
        )
    why = reason
    members = [row] + [get_proposal(store, pid) for pid in agent_group(store, proposal_id)[1:]]
    copies: list[str] = []
    with store.write():
        for m in members:
            same = [r for r in load_report(m).rules if same_rule(r.rule, picked.rule)]
            if m.id != row.id and not same:
                continue
            section = NightSummary.model_validate_json(m.summary or "{}").section
            for r in same or [picked]:
                if r.rule not in store.edits.rules_refused(m.id):
                    store.edits.refuse_rule(m.id, m.target_path, section, r.rule, why)
            if m.id != row.id:
                copies.append(m.id)
            left = [
                r for r in load_report(m).rules if r.rule not in store.edits.rules_refused(m.id)
            ]
            if not left:
                store.proposals.set_status(
                    m.id, "rejected", EVERY_RULE + (f": {why}" if why else "")
                )
    return _outcome(store, proposal_id, rules, picked, copies, why)


def _rule(proposal_id: str, rules: list[ProposalRule], n: int) -> ProposalRule:
    """Rule ``n`` of a proposal's ``rules``; ProposalError when it has none."""
    picked = next((r for r in rules if r.n == n), None)
    if picked is None:
        raise ProposalError(
            f"proposal {proposal_id} has no rule {n}; its rules are 1 to {len(rules)} "
            f"(`skillopt-sleep show {proposal_id}` lists them)"
        )
    return picked


def _outcome(
    store: Store,
    proposal_id: str,
    rules: list[ProposalRule],
    picked: ProposalRule,
    copies: list[str],
    reason: str = "",
) -> RuleRejected:
    """What refusing (or taking back the refusal of) ``picked`` left: the proposal's status
    and how many of its rules are not refused."""
    refused = store.edits.rules_refused(proposal_id)
    return RuleRejected(
        proposal_id=proposal_id,
        n=picked.n,
        rule=picked.rule,
        reason=reason,
        status=get_proposal(store, proposal_id).status,
        remaining=sum(r.rule not in refused for r in rules),
        copies=copies,
    )


#: the reason of a proposal rejected because the user refused each of its rules
EVERY_RULE = "every rule refused"


def lift_rule_refusal(store: Store, proposal_id: str, n: int) -> RuleRejected:
    """Take back the refusal of rule ``n`` of ``proposal_id`` (and of the same rule in its
    copies for other agents): nights may propose it again and ``adopt`` writes it. A
    proposal (or copy) rejected because every rule was refused is staged again.
    ProposalError for an unknown proposal, a number it has no rule for, or a rule that is not
    refused."""
    finish_unfinished(store)
    row = get_proposal(store, proposal_id)
    rules = load_report(row).rules
    picked = _rule(proposal_id, rules, n)
    if picked.rule not in store.edits.rules_refused(proposal_id):
        raise ProposalError(f"rule {n} of {proposal_id} is not refused: there is nothing to undo")
    copies: list[str] = []
    with store.write():
        for m in [row, *_rules_group(store, proposal_id)]:
            if store.edits.lift_rule_refusals(m.id, picked.rule) and m.id != row.id:
                copies.append(m.id)
            if m.status == "rejected" and (m.reason or "").startswith(EVERY_RULE):
                store.proposals.set_status(m.id, "staged", "a rule's refusal lifted by the user")
    return _outcome(store, proposal_id, rules, picked, copies)


def lift_refusal(store: Store, proposal_id: str) -> RefusalLifted:
    """Take back a refusal: a proposal the user rejected or rolled back is staged again
    (nights may propose its document and its edits again; ``adopt`` writes it), and so are
    the copies for other agents withdrawn with its rejection. One a newer proposal for the
    same file replaced meanwhile is marked superseded instead. The live file is not touched.
    ProposalError for an unknown proposal or one the user did not refuse."""
    finish_unfinished(store)
    row = get_proposal(store, proposal_id)
    if row.status not in ("rejected", "rolled_back"):
        raise ProposalError(
            f"proposal {proposal_id} is {row.status}: there is no refusal to lift (only a "
            "rejected or rolled-back proposal has one)"
        )
    withdrawn = f"rejected with {proposal_id}"
    members = [row] + [
        r
        for r in _rules_group(store, proposal_id)
        if row.status == "rejected"
        and r.status == "rejected"
        and (r.reason or "").startswith((withdrawn, EVERY_RULE))
    ]
    # its rules refused one by one are no longer refused either
    with store.write():
        for r in members:
            store.edits.lift_rule_refusals(r.id)
    done: dict[str, str] = {}
    with store.write():
        for r in members:
            # a proposal staged since for the same file's same block replaces it (another
            # project's block of a shared memory file does not); one staged before it is
            # the one replaced
            rivals = [
                p
                for p in store.proposals.staged(r.target_path)
                if p.id != r.id and block_of(p) == block_of(r)
            ]
            when = (r.created_at or "", r.night_id or 0)
            newer = [p.id for p in rivals if (p.created_at or "", p.night_id or 0) > when]
            for p in rivals:
                if p.id not in newer:
                    store.proposals.set_status(p.id, "superseded", f"superseded by {r.id}")
            if newer:
                store.proposals.set_status(
                    r.id, "superseded", f"refusal lifted; superseded by {newer[0]}"
                )
            else:
                store.proposals.set_status(r.id, "staged", "refusal lifted by the user")
            done[r.id] = "superseded" if newer else "staged"
    return RefusalLifted(
        proposal_id=proposal_id,
        status=done[proposal_id],
        was=row.status,
        copies={k: v for k, v in done.items() if k != proposal_id},
    )
