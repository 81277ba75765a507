"""One night as an object: :class:`Night`, one method per stage.

``harvest`` → ``mine`` → ``plan`` (the target document, where the agent loads it, the blocks
to train) → each block's training (:class:`~skillopt_sleep.night.block.Block`: split, train,
gate, consolidate, test, copies, stage, notify) → ``finish`` (the night's row and result).

A memory file every project shares holds a block per project: a night with a ``project``
trains that project's block; the default night (no project) trains one block per project its
tasks come from (:meth:`Night.plan`; the requests asked in no project: the block every project
reads), each on its own tasks with its own gate, each staged as a proposal of its own (the
night's summary lists them, ``blocks``; its row names the first proposal staged).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from skillopt_sleep import agents
from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends.base import Backend
from skillopt_sleep.delivery.document import read_live, resolve_target, sha256_text
from skillopt_sleep.delivery.where import Where, where_loaded
from skillopt_sleep.delivery.wild import in_the_wild, record_reach, to_judge
from skillopt_sleep.errors import BudgetExceeded
from skillopt_sleep.mining.judges import scorable
from skillopt_sleep.mining.meaning import Reader
from skillopt_sleep.mining.mine import MineReport, block_key, mine
from skillopt_sleep.mining.split import HELD_OUT, no_test, withhold
from skillopt_sleep.models import CompletionRequest, Task
from skillopt_sleep.night import lifecycle, prompts
from skillopt_sleep.night.block import Block
from skillopt_sleep.night.context import Ended, NightContext, Removals
from skillopt_sleep.night.lifecycle import NightStatus
from skillopt_sleep.night.replay import Meter, rubric_score
from skillopt_sleep.night.watch import stage_removals
from skillopt_sleep.results import BlockResult, NightCost, NightResult, NightSummary
from skillopt_sleep.sources.ingest import harvest


class Night:
    """One night (``ctx``: its shared state; ``dry_run``: plan, replay nothing;
    ``harvest_first=False``: the caller has just harvested). :meth:`run` goes through the
    stages; each leaves its state on the object."""

    def __init__(self, ctx: NightContext, *, dry_run: bool = False, harvest_first: bool = True):
        self.ctx = ctx
        self.dry_run, self.harvest_first = dry_run, harvest_first
        self.started = time.monotonic()
        s = ctx.settings
        #: the agent whose CLI the night replays through (None: a model API), looked up once
        self.agent = agents.agent_of_backend(s.target.name)
        #: whose document the night trains
        self.document_agent = self.agent.name if self.agent else s.document.agent
        self.is_skill = s.document.kind == "managed_skill"
        # set by the stages
        self.report = MineReport(tasks=[], dropped={})
        self.tasks: list[Task] = []  # the scorable ones
        self.target_path = Path()
        self.live: str | None = None
        self.base_hash = ""
        self.where: Where | None = None
        self.shared = False  # a user-level memory file every project shares (a block each)
        self.blocks: dict[str | None, list[Task]] = {}
        self.warning: str | None = None
        self._backends: tuple[Backend, Backend] | None = None
        self._meter: Meter | None = None
        #: rules that hurt in the wild, their removal staged (:meth:`watch`)
        self.removals = Removals()
        #: follow-ups mining left for the next night to read (:meth:`mine`)
        self.unread = 0

    def run(self) -> NightResult:
        if self.harvest_first:
            self.harvest()
        else:  # the caller harvested just before (the daemon's worker, under its ingest lock)
            self.ctx.say("harvest: skipped (harvested before the night)")
        self.mine()
        self.plan()
        if len(self.blocks) == 1:
            ((section, tasks),) = self.blocks.items()
            end = Block(self, section, tasks, alone=True).run()
            return self.finish(end.status, end.summary, end)
        return self.train_blocks()

    # ------------------------------------------------------------------ the stages
    def harvest(self) -> None:
        """Index the sessions written since the last harvest (and what adoptions reached)."""
        ctx, say = self.ctx, self.ctx.say
        say.enter("harvest", "harvesting sessions")
        got = harvest(ctx.store, ctx.settings, on_progress=say.relay)
        record_reach(ctx.store, similarity=ctx.settings.similarity)
        say(
            f"harvest: {got.total('sessions_new')} new and {got.total('sessions_updated')} "
            f"updated sessions from {got.total('files_read')} changed files"
        )

    def mine(self) -> None:
        """The recurring tasks of the stored sessions; the scorable ones train. Follow-ups the
        regex layer cannot decide, and every correction, are read by the optimizer model
        (:mod:`~skillopt_sleep.mining.meaning`; a dry run reads only what the store kept)."""
        ctx, s, say = self.ctx, self.ctx.settings, self.ctx.say
        say.enter("mine", "mining recurring tasks")
        reader = Reader(
            ctx.store,
            None if self.dry_run or not s.read_calls else self.read,
            model=f"{s.optimizer.name}:{s.optimizer.model}",
            max_calls=s.read_calls,
        )
        self.report = mine(ctx.store, s, on_progress=say.relay, reader=reader)
        if reader.calls:
            say(f"mine: the optimizer read {reader.calls} follow-up(s) by their meaning")
        if reader.unread and s.read_calls and not self.dry_run:
            # a cap was met (read_calls, or the night's call cap): the rest wait
            self.unread = reader.unread
            say(
                f"mine: {reader.unread} reading(s) by meaning left for the next night "
                f"(read_calls = {s.read_calls} a night, or the night's call cap)"
            )
        self.tasks = [t for t in self.report.tasks if scorable(t, s.rubric)]
        if s.rubric and not self.dry_run:
            self.check_judges()
            self.judge_wild()
        if not self.dry_run:
            self.watch()

    def watch(self) -> None:
        """Each adopted rule judged on the user's later sessions; the removal of one that
        hurt staged (night/watch.py), and left out of the rules this night trains."""
        checks = in_the_wild(self.ctx.store, similarity=self.ctx.settings.similarity)
        self.removals = stage_removals(self.ctx, checks)

    def check_judges(self) -> None:
        """Hold the rubric judge to each rubric task's transcript (its ``controls``): it must
        score the corrected answer below 0.5 and below the accepted one. A judge that fails
        leaves the task's rubric unscored (``Task.judge``); a task with nothing else to score
        it by leaves the night."""
        say = self.ctx.say
        kept: list[Task] = []
        spent = False
        for t in self.tasks:
            if t.rubric and t.controls and not spent:
                try:
                    t.judge = self._judge_of(t)
                except BudgetExceeded:  # the night's cap: training stops on it too
                    spent = True
                if t.judge.startswith("invalid"):
                    say(f"judge: {t.intent[:60]!r}: {t.judge}")
            if t.checks or not t.judge.startswith("invalid"):
                kept.append(t)
        self.tasks = kept

    def _judge_of(self, task: Task) -> str:
        corrected, accepted = task.controls[0]
        low = self.rubric_score(task, corrected)
        if low is None or low >= 0.5:
            return f"invalid: it scored the answer the user corrected {low}"
        if accepted is None:
            return "valid"
        high = self.rubric_score(task, accepted)
        if high is None or high <= low:
            return (
                f"invalid: it scored the answer the user corrected {low} and the one they "
                f"accepted {high}"
            )
        return "valid"

    def rubric_score(self, task: Task, answer: str) -> float | None:
        """The optimizer's rubric score of ``answer`` to ``task`` (a cached, counted call)."""
        return rubric_score(self.optimizer_meter(), task.intent, task.rubric, answer)

    def judge_wild(self) -> None:
        """Judge, once, the first answers of the sessions an adopted document reached that
        ask a task judged by its rubric alone (its judge valid), so ``status`` counts them in
        the wild (:func:`~skillopt_sleep.delivery.wild.to_judge`)."""
        valid = {t.id: t for t in self.tasks if t.judge == "valid" and not t.checks}
        if not valid:
            return
        ctx = self.ctx
        n = 0
        for item in to_judge(ctx.store, set(valid), similarity=ctx.settings.similarity):
            try:
                score = self.rubric_score(valid[item.task_id], item.answer)
            except BudgetExceeded:
                break
            if score is not None:
                with ctx.store.write():
                    ctx.store.wild.judge(item.session_id, item.adoption_id, score)
                n += 1
        if n:
            ctx.say(f"in the wild: judged {n} answer(s) of tasks judged by their rubric")

    def optimizer_meter(self) -> Meter:
        """The optimizer as mining and the judges' checks use it: cached, counted in the
        night's cost and budget, kept in its outbox like every call."""
        s = self.ctx.settings
        if self._meter is None:
            _, optimizer = self.backends()
            self._meter = Meter(
                optimizer,
                self.ctx.store,
                self.ctx.cost,
                max_calls=s.max_calls_per_night,
                max_tokens=s.max_tokens_per_night,
                role="optimizer",
                outbox_days=s.privacy.outbox_days,
            )
        return self._meter

    def read(self, kind: str, shown: dict[str, Any]) -> dict[str, Any]:
        """One reading by the optimizer model: a follow-up (``read``,
        :func:`~.prompts.read_prompt`) or a project's requests asked apart (``group``,
        :func:`~.prompts.group_prompt`)."""
        meter = self.optimizer_meter()
        prompt = prompts.read_prompt(shown) if kind == "read" else prompts.group_prompt(shown)
        req = CompletionRequest(prompt=prompt, purpose=kind, max_tokens=400)
        comp, _ = meter.complete(req)
        return prompts.extract_json(comp.text, backend=meter.backend.name)

    def plan(self) -> None:
        """The document the night trains, where its agent loads it (replays put each candidate
        there) and the blocks it trains, each with its tasks."""
        ctx, s, say = self.ctx, self.ctx.settings, self.ctx.say
        say.enter("night")
        self.target_path = resolve_target(s.document, s.project, env=ctx.env, home=ctx.home)
        self.is_skill = self.is_skill or self.target_path.name == "SKILL.md"
        self.live = read_live(self.target_path)
        self.base_hash = sha256_text(self.live)
        self.where = where_loaded(
            self.target_path,
            agent=self.document_agent,
            project=s.project,
            env=ctx.env,
            home=ctx.home,
        )
        where = self.where
        self.shared = bool(where and where.scope == "user" and where.mode == "memory")
        self.blocks = self._blocks() if self.shared else {None: self.tasks}
        if not self.shared and s.project is None and len({t.project for t in self.tasks}) > 1:
            # one block for every project (a skill, a file no agent loads): rule 5 across them
            # all, as mining applied it within each project (mining/split.py)
            self.tasks = withhold(self.tasks)
            self.blocks = {None: self.tasks}
        self.warning = self._warning()
        if self.warning:
            say(f"warning: {self.warning}")
        elif where is not None:
            say(f"replays put each candidate where the agent finds it: {where.describe()}")

    def _blocks(self) -> dict[str | None, list[Task]]:
        """The blocks of a memory file every project shares that the night trains, each with
        its tasks: the night's ``project``'s block; without one, a block per project the tasks
        come from (:func:`~skillopt_sleep.mining.mine.block_key`; the requests asked in no
        project: the block every project reads, None), first that global block, then by
        path."""
        project = self.ctx.settings.project
        if project is not None:
            return {str(project): self.tasks}
        out: dict[str | None, list[Task]] = {}
        for t in self.tasks:
            out.setdefault(block_key(str(t.project) if t.project else None), []).append(t)
        if not out:
            return {None: []}
        return dict(sorted(out.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")))

    def _warning(self) -> str | None:
        """Why the night's scores may say little about daily use (None: they say what the
        agent does with the document)."""
        where, s = self.where, self.ctx.settings
        if where is None:
            return (
                f"{self.target_path} is not a file the agent loads by itself: the night gives "
                "it to the model as system text, so its scores say nothing about daily use"
            )
        if self.agent and where.agent != self.agent.name:
            return (
                f"the document is {where.agent}'s ({where.describe()}) but the night replays "
                f'through {s.target.name}; set document.agent = "{self.agent.name}" or replay '
                f"through {where.agent}"
            )
        return None

    def backends(self) -> tuple[Backend, Backend]:
        """The night's target and optimizer, opened and checked once (loud even when every
        rollout would come from the cache)."""
        if self._backends is None:
            s = self.ctx.settings
            target, optimizer = get_backend(s.target), get_backend(s.optimizer)
            self.ctx.say.enter("check", "checking the backends")
            target.check()
            if optimizer is not target:
                optimizer.check()
            self._backends = (target, optimizer)
        return self._backends

    def copy_kind(self) -> str:
        """The document kind other agents' copies take (:mod:`.copies`): the configured kind,
        or ``memory`` for a ``path`` that is an agent's user-level memory file; "" (no copies)
        for a project's file, any other path, or a file no agent loads."""
        kind, where = self.ctx.settings.document.kind, self.where
        if where is None:
            return ""
        if kind in ("memory", "managed_skill"):
            return kind
        return "memory" if where.scope == "user" and where.mode == "memory" else ""

    def train_blocks(self) -> NightResult:
        """Several projects' tasks for a shared memory file: one block each (and the block
        every project reads for the requests asked in none); each block's tasks train, gate
        and certify that block only, and each staged block is a proposal of its own."""
        ctx = self.ctx
        ctx.say(
            f"{len(self.blocks)} blocks: "
            + ", ".join(sec or "the requests asked in no project" for sec in self.blocks)
        )
        lifecycle.record(
            ctx.store,
            ctx.night_id,
            target_path=str(self.target_path),
            summary=json.dumps(self.summary_of_blocks([]).dump()),
        )
        ended: list[Ended] = []
        for section, tasks in self.blocks.items():
            stopped = next((e.summary.stopped for e in ended if e.summary.stopped), None)
            if stopped:  # the night's budget is spent
                skipped = NightSummary(section=section, scorable=len(tasks))
                skipped.reason = f"not trained: {stopped}"
                ended.append(Ended(NightStatus.NO_CHANGE, skipped))
                continue
            ended.append(Block(self, section, tasks, alone=False).run())
        statuses = [e.status for e in ended]
        status = next(
            (
                st
                for st in (NightStatus.SUCCEEDED, NightStatus.NO_CHANGE, NightStatus.PLANNED)
                if st in statuses
            ),
            NightStatus.NO_TASKS,
        )
        first = next((e for e in ended if e.proposal_id), None)
        return self.finish(status, self.summary_of_blocks(ended), first)

    def summary_of_blocks(self, ended: list[Ended]) -> NightSummary:
        """The summary of a night that trained several blocks: the sums, and each block's
        outcome (:class:`~skillopt_sleep.results.BlockResult`)."""
        summaries = [e.summary for e in ended]
        out = NightSummary(
            tasks=len(self.report.tasks),
            scorable=len(self.tasks),
            dropped=self.report.dropped,
            train=sum(x.train for x in summaries),
            val=sum(x.val for x in summaries),
            test=sum(x.test for x in summaries),
            rules_before=sum(x.rules_before for x in summaries),
            base_hash=self.base_hash,
            held_out=HELD_OUT,
            not_validated=sum(x.not_validated or 0 for x in summaries),
            unread=self.unread or None,
            warning=self.warning,
            notified="; ".join(
                f"{e.proposal_id}: {e.summary.notified}" for e in ended if e.summary.notified
            )
            or None,
            copies=[c for x in summaries for c in x.copies],
            withheld=[w for x in summaries for w in x.withheld or []] or None,
        )
        if ended and not out.test:  # no block has a test occurrence: why, over them all
            out.test_note = no_test(self.tasks, self.ctx.settings.test_fraction > 0)
        out.stopped = next((x.stopped for x in summaries if x.stopped), None)
        for e in ended:
            x, sc = e.summary, e.scores
            out.blocks.append(
                BlockResult(
                    section=x.section,
                    status=e.status,
                    proposal_id=e.proposal_id,
                    scorable=x.scorable,
                    train=x.train,
                    val=x.val,
                    test=x.test,
                    **(sc.model_dump() if sc is not None else {}),
                    reason=x.reason,
                    test_note=x.test_note,
                    inputs=x.inputs or None,
                )
            )
        out.reason = blocks_reason(out.blocks)
        return out

    def finish(self, status: NightStatus, summary: NightSummary, end: Ended | None) -> NightResult:
        """Record the night's end and return its result. ``end``: the block whose scores and
        proposal the night's row records (a night that replayed nothing records no cost)."""
        ctx = self.ctx
        wall = time.monotonic() - self.started
        extra: dict[str, Any] = {}
        seconds: float | None = None
        if status not in (NightStatus.NO_TASKS, NightStatus.PLANNED):
            spent = ctx.cost.as_dict()
            extra = (end.row() if end is not None else {}) | {
                k: spent[k] for k in ("calls", "cached_calls", "input_tokens", "output_tokens")
            }
            seconds = ctx.cost.seconds
        lifecycle.finish(
            ctx.store,
            ctx.night_id,
            status,
            seconds=wall,
            summary=json.dumps(summary.dump()),
            **extra,
        )
        return NightResult(
            night_id=ctx.night_id,
            status=status,
            target_path=str(self.target_path),
            summary=summary,
            proposal_id=extra.get("proposal_id"),
            val_before=extra.get("val_before"),
            val_after=extra.get("val_after"),
            test_before=extra.get("test_before"),
            test_after=extra.get("test_after"),
            cost=NightCost.model_validate(extra | {"seconds": seconds}),
            seconds=round(wall, 3),
        )


def blocks_reason(blocks: list[BlockResult]) -> str:
    """One short line for a night of several blocks (each block is listed on its own
    elsewhere): the proposals staged, then the other blocks counted by outcome, e.g.
    ``3 blocks: proposals p4, p5; 1 no_change (the optimizer proposed no edit)``."""
    staged = [b.proposal_id for b in blocks if b.proposal_id]
    outcomes: dict[str, int] = {}
    for b in blocks:
        if not b.proposal_id:
            what = str(b.status) + (f" ({b.reason})" if b.reason else "")
            outcomes[what] = outcomes.get(what, 0) + 1
    said = [f"proposal{'s' if len(staged) > 1 else ''} {', '.join(staged)}"] if staged else []
    said += [f"{n} {what}" for what, n in outcomes.items()]
    return f"{len(blocks)} block{'s' if len(blocks) != 1 else ''}: " + "; ".join(said)
