"""One managed block's training in a night: :class:`Block`.

A memory file every project shares holds a block per project; a night trains each block its
tasks call for (:class:`~skillopt_sleep.night.night.Night`, seen as a
:class:`~skillopt_sleep.night.context.PlannedNight`), and each block goes through the
same stages with its own tasks: split its tasks' occurrences, train (epochs × mini-batches,
reflect, edit, the val gate, consolidation: :class:`~skillopt_sleep.night.train.Trainer`),
score the test split before and after, then either stage a proposal (certified: an edit
passed the gate) with its copies for the other agents, or say why not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from skillopt_sleep.delivery.document import Document, Edit, block_hash, delivery_cost, sha256_text
from skillopt_sleep.errors import BudgetExceeded
from skillopt_sleep.mining.judges import scorable
from skillopt_sleep.mining.mine import block_key
from skillopt_sleep.mining.recall import recall
from skillopt_sleep.mining.split import (
    HELD_OUT,
    NOT_DISTINCT,
    no_test,
    task_of,
    undistinct,
    views,
    withheld,
)
from skillopt_sleep.models import Task
from skillopt_sleep.night import lifecycle
from skillopt_sleep.night.context import Ended, PlannedNight
from skillopt_sleep.night.copies import CopyJob, certify_copies
from skillopt_sleep.night.curate import curate, other_agents_rules
from skillopt_sleep.night.lifecycle import NightStatus
from skillopt_sleep.night.notify import proposal_ready
from skillopt_sleep.night.probes import everyday, user_probes
from skillopt_sleep.night.replay import Cost, Scored, mean
from skillopt_sleep.night.stage import Staging, stage_proposal
from skillopt_sleep.night.train import Trainer, remembered_rejections, user_refusals
from skillopt_sleep.results import (
    Delivery,
    EditCounts,
    GateNoise,
    NightCost,
    NightSummary,
    Scores,
    WithheldOccurrence,
)


def inputs_fingerprint(night: PlannedNight, tasks: list[Task], block: str | None = None) -> str:
    """What makes two nights the same night: the document, the scorable tasks (id, split,
    intent, checks, rubric), the backends and the training settings (and ``block``, the
    project block of a night that trained several). sha256 hex."""
    s = night.ctx.settings
    data = {
        "base": night.base_hash,
        "tasks": sorted(
            # a rubric its judge failed scores nothing: said only then (fingerprints kept)
            [t.id, t.split, t.intent, [c.model_dump() for c in t.checks], t.rubric]
            + ([t.judge] if t.judge.startswith("invalid") else [])
            for t in tasks
        ),
        "target": [s.target.name, s.target.model],
        "optimizer": [s.optimizer.name, s.optimizer.model],
        "train": [s.epochs, s.batch_size, s.edit_budget, s.gate_metric, s.no_regression, s.rubric],
        "gate": [s.gate_samples, s.gate_margin, s.gate_min_val],
        # only when on, so nights without dream rollouts keep their fingerprints
        **(
            {"dream": [s.dream_samples, s.dream_recall]}
            if s.dream_samples > 1 or s.dream_recall
            else {}
        ),
    }
    if block is not None:
        data["block"] = block
    return sha256_text(json.dumps(data, sort_keys=True, default=str))


class Block:
    """The training of one managed block (``section``: a project's block of a shared memory
    file, None: the document's one block or the block every project reads) on its ``tasks``.
    ``alone``: the night's only block, whose summary is the night's. :meth:`run` goes through
    the stages; the state each stage leaves is on the object."""

    def __init__(self, night: PlannedNight, section: str | None, tasks: list[Task], alone: bool):
        self.night, self.ctx = night, night.ctx
        self.section, self.tasks, self.alone = section, tasks, alone
        self.doc = Document.parse(
            night.live,
            new_skill=night.is_skill,
            section=section,
        )
        # a rule that hurt in the wild (its removal staged): the night trains without it
        dropped = night.removals.dropped.get((str(night.target_path), section), [])
        self.doc.rules = [r for r in self.doc.rules if r not in dropped]
        self.train_set: list[Task] = []
        self.val: list[Task] = []
        self.test: list[Task] = []
        self.recalled: list[Task] = []
        #: the views the block replays (train, val, test): what its reports name
        self.scored: list[Task] = []
        self.summary = NightSummary()
        self.verified = False
        # set by :meth:`fit`
        self.trainer: Trainer | None = None
        self.rules: list[str] = list(self.doc.rules)
        self.trained: Document = self.doc
        self.val_scores: dict[str, Scored] = {}
        self.scores = Scores()
        self.budget_note = ""
        self.spent: dict[str, Any] = {}

    # ------------------------------------------------------------------ the stages
    def run(self) -> Ended:
        self.split()
        self.plan()
        if not self.train_set:
            report = self.night.report
            self.summary.reason = _no_tasks_reason(
                report.tasks, self.tasks, self.val, self.test, self.night, report.dropped
            )
            return Ended(NightStatus.NO_TASKS, self.summary)
        if self.night.dry_run:
            self.summary.reason = "dry run: nothing replayed"
            return Ended(NightStatus.PLANNED, self.summary)
        self.fit()
        if not self.certified():
            return self.no_change()
        return self.stage()

    def split(self) -> None:
        """The block's train / val / test: one view per occurrence with that role
        (:func:`~skillopt_sleep.mining.split.views`), and with dream recall, similar past tasks
        that train too (never a held-out occurrence)."""
        replayed = views(self.tasks)
        self.train_set = [t for t in replayed if t.split == "train"]
        self.val = [t for t in replayed if t.split == "val"]
        self.test = [t for t in replayed if t.split == "test"]
        s = self.ctx.settings
        if s.dream_recall:
            self.recalled = recall(
                self.ctx.store,
                mined=self.night.report.tasks,
                train=self.train_set,
                held_out=self.val + self.test,
                limit=s.dream_recall,
                threshold=s.similarity,
                scope=Path(self.section) if self.section is not None else s.project,
                is_scorable=lambda t: scorable(t, s.rubric),
            )
        self.train_set += self.recalled
        self.scored = self.train_set + self.val + self.test

    def plan(self) -> None:
        """The block's summary before training, recorded (for the night's only block) and
        said."""
        night, say = self.night, self.ctx.say
        mined = night.report.tasks
        once = sum(1 for t in self.tasks if len(t.occurrences) == 1)
        repeats = sum(1 for t in self.tasks if undistinct(t))
        held = [
            WithheldOccurrence(task_id=tid, occurrence=o.key, why=o.note)
            for tid, o in withheld(self.tasks)
        ]
        self.summary = NightSummary(
            tasks=len(mined) if self.alone else len(self.tasks),
            scorable=len(self.tasks),
            dropped=night.report.dropped if self.alone else {},
            train=len(self.train_set),
            val=len(self.val),
            test=len(self.test),
            rules_before=len(self.doc.rules),
            base_hash=night.base_hash,
            inputs=inputs_fingerprint(night, self.scored, self.section if not self.alone else None),
            section=self.section,
            block_hash=block_hash(night.live, self.section) if night.shared else None,
            held_out=HELD_OUT,
            not_validated=once,
            not_distinct=repeats or None,
            recalled=len(self.recalled) or None,
            unread=(night.unread or None) if self.alone else None,
            warning=night.warning,
            # no test occurrence: why, in one line
            test_note=no_test(self.tasks, self.ctx.settings.test_fraction > 0)
            if not self.test
            else None,
            withheld=held or None,
        )
        if self.section is not None:
            say(f"the rules go in the block for {self.section} of the shared memory file")
        elif not self.alone:
            say("the rules of requests asked in no project go in the block every project reads")
        if self.alone:
            lifecycle.record(
                self.ctx.store,
                self.ctx.night_id,
                target_path=str(night.target_path),
                summary=json.dumps(self.summary.dump()),
            )
        say(
            f"tasks: {len(self.tasks)} scorable of {len(mined)} mined — occurrences: "
            f"{len(self.train_set)} train, {len(self.val)} val, {len(self.test)} test; "
            f"training {night.target_path}"
        )
        if once:
            say(f"{once} task(s) asked once: they train, not yet validated on a recurrence")
        if repeats:
            say(f"{repeats} task(s) {NOT_DISTINCT}")
        if held:
            say(
                f"{len(held)} occurrence(s) withheld from val or test as literal repeats "
                "(the report names them)"
            )
        if self.summary.test_note:
            say(self.summary.test_note)
        if self.recalled:
            say(f"dream recall: {len(self.recalled)} similar past task(s) train too")

    def fit(self) -> None:
        """Train the block's rules against its val gate, then score its test split before and
        after. A budget cap met on the way is a clean stop: what the gate certified before it
        is kept (and staged), the test split not scored."""
        night, ctx = self.night, self.ctx
        target, optimizer = night.backends()
        # what earlier blocks cost: the proposal counts its own (the night's only block counts
        # the night's reading and judge checks before it too, so its cost is the night's)
        self.spent = Cost().as_dict() if self.alone else ctx.cost.as_dict()
        self.trainer = trainer = self._trainer(target, optimizer)
        self.verified = bool(self.val)
        val = self.val
        if not self.verified:
            val = self.train_set
            self.summary.unverified = "the val split is empty; train was used, which cannot certify"
        doc = self.doc
        try:
            rules, self.val_scores = trainer.train(doc, self.train_set, val, self.verified)
            self.rules, self.trained = rules, trainer.doc or doc
            self.scores = Scores(val_before=trainer.val_baseline, val_after=self._val_after())
            self._score_test()
        except BudgetExceeded as exc:
            self.budget_note = str(exc)
            self.rules = trainer.rules if trainer.rules is not None else list(doc.rules)
            self.trained = trainer.doc or doc
            self.val_scores = trainer.val_scores
            self.scores = Scores(val_before=trainer.val_baseline, val_after=self._val_after())
            self.summary.test_note = "not scored: " + self.budget_note
        self.summary.edits = EditCounts(
            **{
                st: sum(e.status == st for e in trainer.edits)
                for st in ("applied", "rejected", "unmatched", "unverified", "flagged")
            }
        )
        self.summary.rules_after = len(self.rules)
        if trainer.noise.varies:
            self.summary.noise = GateNoise(
                samples=trainer.noise.samples,
                spread=round(trainer.noise.bound, 4),
                tasks={tid: round(x, 4) for tid, x in trainer.noise.spread.items()},
            )
        self.summary.undecided = trainer.undecided or None
        if self.budget_note:
            self.summary.stopped = self.budget_note

    def _trainer(self, target: Any, optimizer: Any) -> Trainer:
        """The block's training loop, told what earlier nights rejected and what the user
        refused on this document and block."""
        ctx, night, say = self.ctx, self.night, self.ctx.say
        target_path = str(night.target_path)
        rejected = remembered_rejections(ctx.store, target_path, self.summary.inputs, self.section)
        if rejected:
            say(f"remembering {len(rejected)} edit(s) rejected by earlier nights")
        refused = user_refusals(ctx.store, target_path, self.section)
        # a rule that hurt in the wild is not learned again while its removal is pending
        refused += [
            {
                "edit": f"add: {rule}",
                "reason": "it hurt in your sessions since adopt",
                "proposal": "the wild",
            }
            for rule in night.removals.dropped.get((target_path, self.section), [])
        ]
        if refused:
            self.summary.user_refused = len(refused)
            say(f"remembering {len(refused)} edit(s) the user refused")
        return Trainer(
            ctx,
            target,
            optimizer,
            place=night.where.place if night.where else None,
            section=self.section,
            test=self.test,
            rejected=rejected,
            refused=refused,
            probes=self.probes(),
        )

    def probes(self) -> list[Task]:
        """The collateral gate's probes (night/probes.py): the user's other tasks of this
        block that the val gate does not see (mined tonight, with no val occurrence here),
        and the everyday requests."""
        s, night = self.ctx.settings, self.night
        in_val = {task_of(t.id) for t in self.val}

        def here(t: Task) -> bool:
            if not night.shared or s.project is not None:
                return True
            return block_key(str(t.project) if t.project else None) == self.section

        others = [t for t in night.report.tasks if t.id not in in_val and here(t)]
        out = user_probes(others, s.collateral_tasks)
        # the everyday requests are asked where the block's rules apply (its project, in a
        # copy of it), as the user would ask them there
        where = self.section if self.section is not None else s.project
        daily = [t.model_copy(update={"project": str(where)}) if where else t for t in everyday()]
        return out + (daily if s.collateral_probes else [])

    def _val_after(self) -> float | None:
        return mean(self.val_scores) if self.val_scores else None

    def _score_test(self) -> None:
        """The test split scored under the document as the night found it and as trained
        (with workers > 1: both at once)."""
        trainer, doc, test = self.trainer, self.doc, self.test
        assert trainer is not None
        self.ctx.say.enter("test", "scoring the test split before and after", epoch=None)
        if test and self.rules != doc.rules:
            trainer.ahead_test([doc.render(r) for r in (doc.rules, self.rules)])
        before = mean(trainer.replay(test, doc, doc.rules, "test", "test before")) if test else None
        after = (
            mean(trainer.replay(test, self.trained, self.rules, "test", "test after"))
            if test and self.trained.render(self.rules) != doc.render()
            else before
        )
        self.scores = self.scores.model_copy(update={"test_before": before, "test_after": after})

    @property
    def changed(self) -> bool:
        """Whether the trained document differs (the rules or a skill's description)."""
        return self.trained.render(self.rules) != self.doc.render()

    def certified(self) -> bool:
        """Whether an edit passed the val gate (a consolidation alone, a merge that kept the
        score, is no reason to propose a change)."""
        assert self.trainer is not None
        return (
            self.verified
            and self.changed
            and any(e.status == "applied" and e.origin != "consolidate" for e in self.trainer.edits)
        )

    # ------------------------------------------------------------------ the endings
    def no_change(self) -> Ended:
        """Nothing certified: why, and the rules the agent already has staged for the other
        agents that lack them."""
        trainer, summary = self.trainer, self.summary
        assert trainer is not None
        harmed = sum("but it harms" in e.reason for e in trainer.edits)
        unmatched = [e for e in trainer.edits if e.status == "unmatched"]
        summary.reason = (
            "edits improved train only (unverified)"
            if self.changed
            else (
                f"no edit passed the gates: {harmed} the val gate accepted harmed your other "
                "tasks or everyday requests (the collateral gate)"
                if harmed
                # nothing reached a gate: every edit named a rule the document does not have
                else f"no edit could be applied: the optimizer's {len(unmatched)} edit(s) "
                f"changed rules the document does not have ({unmatched[0].reason})"
                if len(unmatched) == len(trainer.edits)
                else "no edit passed the val gate"
            )
            if trainer.edits
            else trainer.undecided or "the optimizer proposed no edit"
        )
        if self.budget_note:
            summary.reason = f"stopped: {self.budget_note}; {summary.reason} before that"
        if trainer.refused:
            summary.reason += (
                f"; {len(trainer.refused)} edit(s) the user refused were not tried again "
                f"({', '.join(sorted({r['proposal'] for r in trainer.refused}))})"
            )
        # the rules the agent already has may still be missing from another agent's file
        live_rules = list(self.doc.rules)
        if live_rules and self.rules == self.doc.rules:
            self._copy_live_rules(live_rules)
        return Ended(NightStatus.NO_CHANGE, summary, self.scores)

    def _copy_live_rules(self, live_rules: list[str]) -> None:
        """Stage the live document's rules for the other agents whose copies lack them."""
        doc, target_path = self.doc, self.night.target_path
        adopted = self.ctx.store.adoptions.latest_live([str(target_path)])
        as_adds = [
            Edit(op="add", text=r, status="applied", origin="live", rationale="in the live file")
            for r in live_rules
        ]
        if doc.skill and doc.description:  # a skill's copy takes its description too
            as_adds.append(Edit(op="describe", text=doc.description, status="applied"))
        self.copies(adopted.proposal_id if adopted else None, live_rules, as_adds)
        staged = [c.proposal_id for c in self.summary.copies if c.status == "staged"]
        if staged:
            self.summary.reason = (self.summary.reason or "") + (
                f"; the rules {target_path.name} already has were staged for other "
                f"agents: {', '.join(str(p) for p in staged)}"
            )

    def copies(self, copy_of: str | None, rules: list[str], edits: list[Edit]) -> None:
        """Certify and stage the other agents' copies of ``rules`` (:mod:`.copies`), each on
        the held-out views of the tasks the user asked that agent."""
        night = self.night
        held_out = self.val + self.test
        kind = night.copy_kind()
        if not (kind and held_out and rules and self.verified) or self.budget_note:
            return
        self.ctx.say.enter("copies")
        job = CopyJob(
            primary_agent=night.where.agent if night.where else "",
            proposal_id=copy_of,
            kind=kind,
            section=self.section,
            base_rules=list(self.doc.rules),
            rules=rules,
            edits=edits,
            tasks=self.scored,
            views=held_out,
        )
        assert self.trainer is not None
        self.summary.copies = certify_copies(self.ctx, job, self.trainer.optimizer.backend)

    def stage(self) -> Ended:
        """Stage the certified document as a proposal (with its copies for the other agents),
        unless the user refused this very document or a staged proposal already says it."""
        night, ctx, summary = self.night, self.ctx, self.summary
        store, target_path = ctx.store, night.target_path
        assert self.trainer is not None
        if self.budget_note:
            summary.reason = (
                f"stopped: {self.budget_note}; staging what the gate certified before that"
            )
        elsewhere = other_agents_rules(target_path, ctx.env or os.environ, ctx.home or Path.home())
        self.rules, summary.curation = curate(
            night.live, self.section, self.doc.rules, self.rules, elsewhere
        )
        for note in summary.curation:
            ctx.say(f"curation: {note}")
        if not self.changed:  # every new rule was already said in the file
            summary.reason = "every rule the gate certified is already in the file: " + "; ".join(
                summary.curation
            )
            return Ended(NightStatus.NO_CHANGE, summary, self.scores)
        new_text = self.trained.render(self.rules)
        summary.delivery = Delivery.model_validate(
            delivery_cost(
                target_path, new_text, self.rules, ctx.settings.document.max_tokens, self.section
            )
            | {"agent": night.where.agent if night.where else None}
        )
        refused = store.proposals.refused(str(target_path), sha256_text(new_text))
        if refused is not None:  # the user said no to this very document: never staged again
            how = "rejected" if refused.status == "rejected" else "rolled back"
            why = f" ({refused.reason})" if refused.reason else ""
            summary.reason = (
                f"the same document as proposal {refused.id}, which the user {how}{why}: "
                "not staged again"
            )
            return Ended(NightStatus.NO_CHANGE, summary, self.scores)
        same = self._same_staged(new_text)
        # its own number, reserved before the copies (they are named after it, p<n>-<agent>)
        proposal_id = same or store.proposals.next_id()
        self.copies(proposal_id, self.rules, self.trainer.edits)
        if same:  # an unchanged re-run: the staged proposal already says this
            summary.reason = f"same result as the staged proposal {same}"
            new_copies = [c.proposal_id for c in summary.copies if c.status == "staged"]
            if new_copies:
                summary.reason += (
                    "; its rules now staged for other agents too: "
                    f"{', '.join(map(str, new_copies))}"
                )
            return Ended(NightStatus.SUCCEEDED, summary, self.scores, same)
        own = {k: v - self.spent[k] for k, v in ctx.cost.as_dict().items()}
        proposal_id = stage_proposal(
            store,
            Staging(
                proposal_id=proposal_id,
                delivered=night.where.describe() if night.where else None,
                night_id=ctx.night_id,
                target_path=target_path,
                base_text=night.live,
                new_text=new_text,
                base_hash=night.base_hash,
                edits=self.trainer.edits,
                tasks=self.scored,
                cost=NightCost.model_validate(own),
                summary=summary,
                scores=self.scores,
                agent=night.where.agent if night.where else night.document_agent,
            ),
            env=ctx.env,
            home=ctx.home,
        )
        self.notify(proposal_id)
        return Ended(NightStatus.SUCCEEDED, summary, self.scores, proposal_id)

    def _same_staged(self, new_text: str) -> str | None:
        """The staged proposal that already proposes ``new_text`` from the same base and the
        same inputs (an unchanged re-run), if any."""
        night = self.night
        for p in self.ctx.store.proposals.staged(str(night.target_path)):
            if (
                p.base_hash == night.base_hash
                and p.new_hash == sha256_text(new_text)
                and NightSummary.model_validate_json(p.summary or "{}").inputs
                == self.summary.inputs
            ):
                return str(p.id)
        return None

    def notify(self, proposal_id: str) -> None:
        """The desktop notification that the proposal is ready."""
        say, sc = self.ctx.say, self.scores
        say.enter("notify")
        self.summary.notified = proposal_ready(
            self.ctx.settings,
            proposal_id,
            str(self.night.target_path),
            sc.val_before,
            sc.val_after,
            project=self.section,
        )
        say(f"proposal {proposal_id} staged; desktop notification: {self.summary.notified}")


def _no_tasks_reason(
    mined: list[Task],
    scored: list[Task],
    val: list[Task],
    test: list[Task],
    night: PlannedNight,
    dropped: dict[str, int],
) -> str:
    """Why a night has nothing to train on, worded so the user knows what would help."""
    s = night.ctx.settings
    n = len(mined)
    if not n:
        where = f" in {s.project}" if s.project else ""
        headless = dropped.get("headless_session", 0)
        return (
            f"no task mined: no request{where} recurred in {s.min_sessions} or more sessions "
            f"or was corrected in the last {s.lookback_days} days"
            + (
                f" ({headless} headless or programmatic session{'s' if headless != 1 else ''}"
                " not mined: set mine_headless = true to mine them)"
                if headless
                else ""
            )
        )
    if not scored:
        why = (
            "no correction or rule to check an answer against"
            if s.rubric
            else "no rule check to score an answer with (rubric scoring is off)"
        )
        return (
            f"{n} task{'s' if n != 1 else ''} mined, none scorable: {why}; correct the "
            f'agent when it answers a recurring request wrong (e.g. "no, use pnpm")'
        )
    return (
        f"no scorable task in train ({len(val)} val, {len(test)} test held out, "
        f"{n - len(scored)} unscorable): a night needs another scorable task to train on; "
        f"correct the agent when it gets a recurring request wrong"
    )
