"""Rules that hurt in the wild are taken out: a removal staged, the user told.

Each night, after the harvest, every adopted rule is judged on the user's later sessions
(:func:`~skillopt_sleep.delivery.wild.in_the_wild`: helped / no effect / hurt). For a rule
that *hurt* — its own tasks passed less often, or the user's other requests went wrong more
often, since it was adopted — :func:`stage_removals` stages a proposal that removes it from
the live block (the user's own text and the other rules kept, the reason in its report) and
sends the desktop notification; the night's training then starts from the rules without it
(:attr:`Removals.dropped`), so a proposal the night stages for the same block removes it too.
A removal the user refused (rejected, or its document rolled back) is not staged again.
"""

from __future__ import annotations

from pathlib import Path

from skillopt_sleep.delivery.document import Document, Edit, read_live, sha256_text
from skillopt_sleep.errors import DocumentError
from skillopt_sleep.night.context import NightContext, Removals
from skillopt_sleep.night.notify import proposal_ready
from skillopt_sleep.night.stage import Staging, stage_proposal
from skillopt_sleep.results import NightCost, NightSummary, Scores, WildCheck


def stage_removals(ctx: NightContext, checks: list[WildCheck]) -> Removals:
    """Stage the removal of every adopted rule of ``checks`` whose verdict is ``hurt`` (once:
    one already staged is named, one the user refused is not staged again)."""
    store, out = ctx.store, Removals()
    for check in checks:
        hurt = [v for v in check.rules if v.verdict == "hurt"]
        if not hurt:
            continue
        row = store.proposals.get(check.proposal_id)
        if row is None:
            continue
        section = NightSummary.model_validate_json(row.summary or "{}").section
        target = Path(check.target_path)
        try:
            live = read_live(target)
        except DocumentError:
            continue
        doc = Document.parse(live, new_skill=target.name == "SKILL.md", section=section)
        gone = [v for v in hurt if v.rule in doc.rules]
        if not gone:
            continue
        out.dropped[(str(target), section)] = [v.rule for v in gone]
        new_text = doc.render([r for r in doc.rules if r not in {v.rule for v in gone}])
        new_hash = sha256_text(new_text)
        if store.proposals.refused(str(target), new_hash) is not None:
            continue
        same = [p.id for p in store.proposals.staged(str(target)) if p.new_hash == new_hash]
        if same:
            for v in gone:
                v.rollback = same[0]
            continue
        why = "; ".join(f"{v.rule} hurt in your sessions since adopt: {v.why}" for v in gone)
        pid = stage_proposal(
            store,
            Staging(
                night_id=ctx.night_id,
                target_path=target,
                base_text=live,
                new_text=new_text,
                base_hash=sha256_text(live),
                edits=[
                    Edit(
                        op="delete",
                        old=v.rule,
                        status="applied",
                        origin="wild",
                        reason=v.why,
                        rationale=f"hurt in the wild since {check.proposal_id} was adopted",
                    )
                    for v in gone
                ],
                tasks=[],
                cost=NightCost(),
                summary=NightSummary(reason=why, section=section),
                scores=Scores(),
                agent=row.agent or None,
                kind=row.kind or None,
            ),
            env=ctx.env,
            home=ctx.home,
        )
        for v in gone:
            v.rollback = pid
        out.staged.append(pid)
        ctx.say(f"in the wild: {why}; its removal staged as {pid}")
        proposal_ready(ctx.settings, pid, str(target), None, None, project=section)
    return out
