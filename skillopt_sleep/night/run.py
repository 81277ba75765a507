"""One night: harvest → mine → replay → reflect → edit → gate → consolidate → stage.

:func:`run_night` is the single entry point used by the CLI, the daemon and the MCP server.
It records a ``nights`` row first and always finishes it: ``succeeded`` (a proposal was
staged), ``no_change`` (nothing certified), ``no_tasks``, ``planned`` (dry run), ``failed``
(a backend or budget error — re-raised so callers exit non-zero) or, when the process dies,
``interrupted`` (set by the next run, see :func:`.lifecycle.recover`).

The training loop (epochs × mini-batches, reflect, edits, the val gate, consolidation) is
:class:`.train.Trainer`; this module orchestrates the night around it and stages the result.

A memory file every project shares holds a block per project: a night with a ``project``
trains that project's block; the default night (no project) trains one block per project its
tasks come from (:func:`_blocks`; the requests asked in no project: the block every project
reads), each on its own tasks with its own gate, each staged as a proposal of its own (the
night's summary lists them, ``blocks``; its row names the first proposal staged).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import Timeout

from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends.base import Backend
from skillopt_sleep.config import Settings
from skillopt_sleep.delivery.document import (
    Document,
    Edit,
    block_hash,
    delivery_cost,
    read_live,
    resolve_target,
    sha256_text,
)
from skillopt_sleep.delivery.where import where_loaded
from skillopt_sleep.delivery.wild import record_reach
from skillopt_sleep.errors import BudgetExceeded, NightError, SkilloptError
from skillopt_sleep.mining.judges import scorable
from skillopt_sleep.mining.split import HELD_OUT, NOT_DISTINCT, undistinct, views, withhold
from skillopt_sleep.models import Task
from skillopt_sleep.night import lifecycle
from skillopt_sleep.night.copies import certify_copies
from skillopt_sleep.night.lifecycle import NightStatus, Trigger, night_lock
from skillopt_sleep.night.log import NightLog
from skillopt_sleep.night.notify import proposal_ready
from skillopt_sleep.night.progress import NightProgress
from skillopt_sleep.night.replay import Cost, mean
from skillopt_sleep.night.train import (
    OnRollout,
    Progress,
    Trainer,
    remembered_rejections,
    user_refusals,
)
from skillopt_sleep.results import (
    BlockResult,
    Delivery,
    EditCounts,
    NightCost,
    NightResult,
    NightSummary,
    OnProgress,
    night_label,
)
from skillopt_sleep.store import Store


def _inputs_fingerprint(
    s: Settings, base_hash: str, tasks: list[Task], block: str | None = None
) -> str:
    """What makes two nights the same night: the document, the scorable tasks (id, split,
    intent, checks, rubric), the backends and the training settings (and ``block``, the
    project block of a night that trained several). sha256 hex."""
    data = {
        "base": base_hash,
        "tasks": sorted(
            [t.id, t.split, t.intent, [c.model_dump() for c in t.checks], t.rubric] for t in tasks
        ),
        "target": [s.target.name, s.target.model],
        "optimizer": [s.optimizer.name, s.optimizer.model],
        "train": [s.epochs, s.batch_size, s.edit_budget, s.gate_metric, s.no_regression, s.rubric],
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


def _open_backends(settings: Settings) -> tuple[Backend, Backend]:
    target = get_backend(settings.target)
    optimizer = get_backend(settings.optimizer)
    return target, optimizer


def run_night(
    store: Store,
    settings: Settings,
    *,
    dry_run: bool = False,
    trigger: Trigger | str = Trigger.CLI,
    harvest_first: bool = True,
    progress: Progress | None = None,
    on_rollout: OnRollout | None = None,
    env: dict[str, str] | None = None,
    home: Path | None = None,
    on_started: Callable[[int], None] | None = None,
    on_progress: OnProgress | None = None,
) -> NightResult:
    """Run one night and return its result.

    Raises NightError when another night holds the lock, and re-raises backend / budget errors
    after recording the failed night (so the CLI exits non-zero with the reason).
    ``harvest_first=False`` skips the harvest step (the caller has just harvested).
    ``on_started(night_id)`` is called once the night's row exists (before any work), so a
    caller that does not wait for the result learns its id without polling the store.
    ``progress(line)`` gets the night's progress lines; ``on_progress(event)`` its typed
    events (:class:`~skillopt_sleep.night.progress.NightProgress`), rollouts counted.
    """
    say = NightProgress(progress, on_progress)
    lock = night_lock()
    try:
        lock.acquire(timeout=0)
    except Timeout:
        now = lifecycle.running(store)
        since = f" (started {now.started_at})" if now and now.started_at else ""
        raise NightError(f"a night is running{since}") from None
    try:
        lifecycle.recover(store, lock_held=True)
        night_id = lifecycle.begin(store, settings, trigger, dry_run)
        say.night_id = night_id
        started = time.monotonic()
        night_log = NightLog(night_id)  # the night's own log: every progress line
        night_log.line(
            f"night {night_label(night_id)} started ({trigger}{', dry run' if dry_run else ''})"
        )

        caller_text = say.text

        def logged(msg: str) -> None:  # every progress line also goes to the night's log
            night_log.line(msg)
            if caller_text is not None:
                caller_text(msg)

        say.text = logged

        try:
            if on_started is not None:
                on_started(night_id)
            result = _run(
                store,
                settings,
                night_id,
                dry_run=dry_run,
                harvest_first=harvest_first,
                say=say,
                env=env,
                home=home,
                on_rollout=on_rollout,
            )
            staged = result.summary.staged_proposals(result.proposal_id)
            night_log.line(
                f"night {night_label(night_id)} {result.status}"
                + (
                    f": proposal{'s' if len(staged) > 1 else ''} {', '.join(staged)}"
                    if staged
                    else ""
                )
            )
        except (SkilloptError, KeyboardInterrupt) as exc:
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or a signal turned into one
                status = NightStatus.INTERRUPTED
                error = f"interrupted ({str(exc) or 'Ctrl-C'})"
            else:
                status, error = NightStatus.FAILED, str(exc) or type(exc).__name__
            lifecycle.finish(
                store, night_id, status, error=error, seconds=time.monotonic() - started
            )
            night_log.line(f"night {night_label(night_id)} {status}: {error}")
            raise
        except Exception as exc:  # a bug: still never leave the night "running"
            error = f"internal error: {type(exc).__name__}: {exc}"
            lifecycle.finish(
                store,
                night_id,
                NightStatus.FAILED,
                error=error,
                seconds=time.monotonic() - started,
            )
            night_log.line(f"night {night_label(night_id)} {NightStatus.FAILED}: {error}")
            raise
        finally:
            night_log.close()
        return result
    finally:
        lock.release()


def _harvest_line(report: Any) -> str:
    return (
        f"{report.total('sessions_new')} new and {report.total('sessions_updated')} updated "
        f"sessions from {report.total('files_read')} changed files"
    )


def _split(tasks: list[Task]) -> tuple[list[Task], list[Task], list[Task]]:
    """The night's train / val / test: one view per occurrence with that role
    (:func:`~skillopt_sleep.mining.split.views`)."""
    replayed = views(tasks)
    return (
        [t for t in replayed if t.split == "train"],
        [t for t in replayed if t.split == "val"],
        [t for t in replayed if t.split == "test"],
    )


def _no_tasks_reason(
    mined: list[Task],
    scored: list[Task],
    val: list[Task],
    test: list[Task],
    s: Settings,
    dropped: dict[str, int],
) -> str:
    """Why a night has nothing to train on, worded so the user knows what would help."""
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


def _run(
    store: Store,
    s: Settings,
    night_id: int,
    *,
    dry_run: bool,
    harvest_first: bool,
    say: NightProgress,
    env: dict[str, str] | None,
    home: Path | None,
    on_rollout: OnRollout | None = None,
) -> NightResult:
    from skillopt_sleep.mining.mine import block_key, mine
    from skillopt_sleep.mining.recall import recall
    from skillopt_sleep.night.stage import stage_proposal
    from skillopt_sleep.sources.ingest import harvest

    t0 = time.monotonic()
    if harvest_first:
        say.enter("harvest", "harvesting sessions")
        harvested = harvest(store, s, on_progress=say.relay)
        record_reach(store, similarity=s.similarity)
        say(f"harvest: {_harvest_line(harvested)}")
    else:  # the caller harvested just before (the daemon's worker, under its ingest lock)
        say("harvest: skipped (harvested before the night)")
    say.enter("mine", "mining recurring tasks")
    report = mine(store, s, on_progress=say.relay)
    say.enter("night")
    target_path = resolve_target(s.document, s.project, env=env, home=home)
    live = read_live(target_path)
    base_hash = sha256_text(live)
    judge_ok = s.rubric
    tasks = [t for t in report.tasks if scorable(t, judge_ok)]
    from skillopt_sleep.agents import agent_of_backend

    replayed = agent_of_backend(s.target.name)  # None: a model API, not an agent's CLI
    replayed_on = replayed.name if replayed else None
    where = where_loaded(
        target_path, agent=replayed_on or s.document.agent, project=s.project, env=env, home=home
    )
    shared = bool(where and where.scope == "user" and where.mode == "memory")
    blocks = _blocks(s, tasks, block_key) if shared else {None: tasks}
    if not shared and s.project is None and len({t.project for t in tasks}) > 1:
        # one block for every project (a skill, a file no agent loads): rule 5 across them
        # all, as mining applied it within each project (mining/split.py)
        from skillopt_sleep.mining.mine import near_duplicate, normalise_intent

        threshold = s.similarity * 100
        tasks = withhold(
            tasks,
            lambda a, b: bool(near_duplicate(normalise_intent(a), normalise_intent(b), threshold)),
        )
        blocks = {None: tasks}
    if where is None:
        warning: str | None = (
            f"{target_path} is not a file the agent loads by itself: the night gives it to "
            "the model as system text, so its scores say nothing about daily use"
        )
    elif replayed_on and where.agent != replayed_on:
        warning = (
            f"the document is {where.agent}'s ({where.describe()}) but the night replays "
            f'through {s.target.name}; set document.agent = "{replayed_on}" or replay through '
            f"{where.agent}"
        )
    else:
        warning = None
        say(f"replays put each candidate where the agent finds it: {where.describe()}")
    if warning:
        say(f"warning: {warning}")
    opened: list[Backend] = []
    cost = Cost()  # the night's, every block's trainer adds to it (one budget)

    def backends() -> tuple[Backend, Backend]:
        """The night's target and optimizer, opened and checked once."""
        if not opened:
            target, optimizer = _open_backends(s)
            say.enter("check", "checking the backends")
            target.check()  # loud even when every rollout would come from the cache
            if optimizer is not target:
                optimizer.check()
            opened.extend([target, optimizer])
        return opened[0], opened[1]

    def finish(
        status: NightStatus, summary: NightSummary, seconds: float | None = None, **extra: Any
    ) -> NightResult:
        """Record the night's end; ``seconds``: wall time of its model calls (cost)."""
        wall = time.monotonic() - t0
        lifecycle.finish(
            store,
            night_id,
            status,
            seconds=wall,
            summary=json.dumps(summary.dump()),
            **extra,
        )
        return NightResult(
            night_id=night_id,
            status=status,
            target_path=str(target_path),
            summary=summary,
            proposal_id=extra.get("proposal_id"),
            val_before=extra.get("val_before"),
            val_after=extra.get("val_after"),
            test_before=extra.get("test_before"),
            test_after=extra.get("test_after"),
            cost=NightCost.model_validate(extra | {"seconds": seconds}),
            seconds=round(wall, 3),
        )

    def block(section: str | None, btasks: list[Task], alone: bool) -> Ended:
        """Train, gate and stage the block of ``section`` on its tasks ``btasks`` (``alone``:
        the night's only block, whose summary is the night's)."""
        doc = Document.parse(
            live,
            new_skill=s.document.kind == "managed_skill" or target_path.name == "SKILL.md",
            section=section,
        )
        train, val, test = _split(btasks)
        recalled = (
            recall(
                store,
                mined=report.tasks,
                train=train,
                held_out=val + test,
                limit=s.dream_recall,
                threshold=s.similarity,
                scope=Path(section) if section is not None else s.project,
                is_scorable=lambda t: scorable(t, judge_ok),
            )
            if s.dream_recall
            else []
        )
        train += recalled  # similar past tasks train too (never a held-out occurrence)
        scored = train + val + test  # the views the night replays: what its reports name
        once = sum(1 for t in btasks if len(t.occurrences) == 1)
        repeats = sum(1 for t in btasks if undistinct(t))
        summary = NightSummary(
            tasks=len(report.tasks) if alone else len(btasks),
            scorable=len(btasks),
            dropped=report.dropped if alone else {},
            train=len(train),
            val=len(val),
            test=len(test),
            rules_before=len(doc.rules),
            base_hash=base_hash,
            inputs=_inputs_fingerprint(s, base_hash, scored, section if not alone else None),
            section=section,
            block_hash=block_hash(live, section) if shared else None,
            held_out=HELD_OUT,
            not_validated=once,
            not_distinct=repeats or None,
            recalled=len(recalled) or None,
            warning=warning,
        )
        if section is not None:
            say(f"the rules go in the block for {section} of the shared memory file")
        elif not alone:
            say("the rules of requests asked in no project go in the block every project reads")
        if alone:
            lifecycle.record(
                store, night_id, target_path=str(target_path), summary=json.dumps(summary.dump())
            )
        say(
            f"tasks: {len(btasks)} scorable of {len(report.tasks)} mined — occurrences: "
            f"{len(train)} train, {len(val)} val, {len(test)} test; training {target_path}"
        )
        if once:
            say(f"{once} task(s) asked once: they train, not yet validated on a recurrence")
        if repeats:
            say(f"{repeats} task(s) {NOT_DISTINCT}")
        if recalled:
            say(f"dream recall: {len(recalled)} similar past task(s) train too")

        if not train:
            summary.reason = _no_tasks_reason(report.tasks, btasks, val, test, s, report.dropped)
            return Ended(NightStatus.NO_TASKS, summary)
        if dry_run:
            summary.reason = "dry run: nothing replayed"
            return Ended(NightStatus.PLANNED, summary)

        target, optimizer = backends()
        spent = cost.as_dict()  # what earlier blocks cost: this block's proposal counts its own
        night = Trainer(
            store,
            s,
            night_id,
            target,
            optimizer,
            say,
            on_rollout,
            place=where.place if where else None,
            cost=cost,
        )
        night.rejected = remembered_rejections(store, str(target_path), summary.inputs, section)
        if night.rejected:
            say(f"remembering {len(night.rejected)} edit(s) rejected by earlier nights")
        night.section = section
        night.test = test
        night.refused = user_refusals(store, str(target_path), section)
        if night.refused:
            summary.user_refused = len(night.refused)
            say(f"remembering {len(night.refused)} edit(s) the user refused")
        verified = bool(val)
        if not verified:
            val = train
            summary.unverified = "the val split is empty; train was used, which cannot certify"
        budget_note = ""
        try:
            rules, val_scores = night.train(doc, train, val, verified)
            trained = night.doc or doc  # a skill's certified description with the rules
            val_before = night.val_baseline
            say.enter("test", "scoring the test split before and after", epoch=None)
            if test and rules != doc.rules:  # with workers > 1: both at once
                night.ahead_test([doc.render(r) for r in (doc.rules, rules)])
            test_before = (
                mean(night.replay(test, doc, doc.rules, "test", "test before")) if test else None
            )
            test_after = (
                mean(night.replay(test, trained, rules, "test", "test after"))
                if test and trained.render(rules) != doc.render()
                else test_before
            )
        except BudgetExceeded as exc:
            # a clean stop: what the gate certified before the cap is kept (and staged below);
            # the test split is not scored
            budget_note = str(exc)
            rules = night.rules if night.rules is not None else list(doc.rules)
            trained = night.doc or doc
            val_scores, val_before = night.val_scores, night.val_baseline
            test_before = test_after = None
            summary.test_note = "not scored: " + budget_note
        summary.edits = EditCounts(
            **{
                st: sum(e.status == st for e in night.edits)
                for st in ("applied", "rejected", "unmatched", "unverified", "flagged")
            }
        )
        summary.rules_after = len(rules)
        val_after = mean(val_scores) if val_scores else None
        extra: dict[str, Any] = {
            "val_before": val_before,
            "val_after": val_after,
            "test_before": test_before,
            "test_after": test_after,
        }
        if budget_note:
            summary.stopped = budget_note
        # a consolidation alone (a merge that kept the score) is no reason to propose a change
        changed = trained.render(rules) != doc.render()  # the rules or a skill's description
        certified = (
            verified
            and changed
            and any(e.status == "applied" and e.origin != "consolidate" for e in night.edits)
        )

        def copies(copy_of: str | None, rules: list[str], edits: list[Any]) -> None:
            """Certify and stage the other agents' copies of ``rules`` (:mod:`.copies`)."""
            held_out, held_split = (test, "test") if test else (val, "val")
            kind = _copy_kind(s, where) if where is not None else ""
            if not (kind and held_out and rules and verified) or budget_note:
                return
            say.enter("copies")
            summary.copies = certify_copies(
                store,
                s,
                night_id,
                primary_agent=where.agent if where else "",
                proposal_id=copy_of,
                kind=kind,
                section=section,
                base_rules=list(doc.rules),
                rules=rules,
                edits=edits,
                tasks=scored,
                held_out=held_out,
                certified_on=held_split,
                optimizer=optimizer,
                cost=night.cost,
                say=say,
                env=env,
                home=home,
            )

        if not certified:
            summary.reason = (
                "edits improved train only (unverified)"
                if changed
                else "no edit passed the val gate"
                if night.edits
                else "the optimizer proposed no edit"
            )
            if budget_note:
                summary.reason = f"stopped: {budget_note}; {summary.reason} before that"
            if night.refused:
                summary.reason += (
                    f"; {len(night.refused)} edit(s) the user refused were not tried again "
                    f"({', '.join(sorted({r['proposal'] for r in night.refused}))})"
                )
            # the rules the agent already has may still be missing from another agent's file
            live_rules = list(doc.rules)
            if live_rules and rules == doc.rules:
                adopted = store.adoptions.latest_live([str(target_path)])
                as_adds = [
                    Edit(
                        op="add",
                        text=r,
                        status="applied",
                        origin="live",
                        rationale="in the live file",
                    )
                    for r in live_rules
                ]
                if doc.skill and doc.description:  # a skill's copy takes its description too
                    as_adds.append(Edit(op="describe", text=doc.description, status="applied"))
                copies(adopted["proposal_id"] if adopted else None, live_rules, as_adds)
                staged = [c.proposal_id for c in summary.copies if c.status == "staged"]
                if staged:
                    summary.reason += (
                        f"; the rules {target_path.name} already has were staged for other "
                        f"agents: {', '.join(str(p) for p in staged)}"
                    )
            return Ended(NightStatus.NO_CHANGE, summary, extra)
        if budget_note:
            summary.reason = f"stopped: {budget_note}; staging what the gate certified before that"
        new_text = trained.render(rules)
        summary.delivery = Delivery.model_validate(
            delivery_cost(target_path, new_text, rules, s.document.max_tokens, section)
            | {"agent": where.agent if where else None}
        )
        refused = store.proposals.refused(str(target_path), sha256_text(new_text))
        if refused is not None:  # the user said no to this very document: never staged again
            how = "rejected" if refused["status"] == "rejected" else "rolled back"
            why = f" ({refused['reason']})" if refused.get("reason") else ""
            summary.reason = (
                f"the same document as proposal {refused['id']}, which the user {how}{why}: "
                "not staged again"
            )
            return Ended(NightStatus.NO_CHANGE, summary, extra)
        same = [
            p
            for p in store.proposals.staged(str(target_path))
            if p["base_hash"] == base_hash
            and p["new_hash"] == sha256_text(new_text)
            and NightSummary.model_validate_json(p["summary"] or "{}").inputs == summary.inputs
        ]
        # its own number, reserved before the copies (they are named after it, p<n>-<agent>)
        proposal_id = same[0]["id"] if same else store.proposals.next_id()
        copies(proposal_id, rules, night.edits)
        if same:  # an unchanged re-run: the staged proposal already says this
            summary.reason = f"same result as the staged proposal {same[0]['id']}"
            new_copies = [c.proposal_id for c in summary.copies if c.status == "staged"]
            if new_copies:
                summary.reason += (
                    "; its rules now staged for other agents too: "
                    f"{', '.join(map(str, new_copies))}"
                )
            return Ended(NightStatus.SUCCEEDED, summary, extra | {"proposal_id": same[0]["id"]})
        own = {k: v - spent[k] for k, v in cost.as_dict().items()}
        proposal_id = stage_proposal(
            store,
            proposal_id=proposal_id,
            delivered=where.describe() if where else None,
            night_id=night_id,
            target_path=target_path,
            base_text=live,
            new_text=new_text,
            base_hash=base_hash,
            edits=night.edits,
            tasks=scored,
            cost=NightCost.model_validate(own),
            summary=summary,
            val_before=val_before,
            val_after=val_after,
            test_before=test_before,
            test_after=test_after,
            agent=where.agent if where else replayed_on or s.document.agent,
            env=env,
            home=home,
        )
        say.enter("notify")
        summary.notified = proposal_ready(
            s, proposal_id, str(target_path), val_before, val_after, project=section
        )
        say(f"proposal {proposal_id} staged; desktop notification: {summary.notified}")
        return Ended(NightStatus.SUCCEEDED, summary, extra | {"proposal_id": proposal_id})

    def costs() -> dict[str, Any]:
        spent = cost.as_dict()
        return {k: spent[k] for k in ("calls", "cached_calls", "input_tokens", "output_tokens")}

    if len(blocks) == 1:
        ((section, btasks),) = blocks.items()
        end = block(section, btasks, alone=True)
        if end.status in (NightStatus.NO_TASKS, NightStatus.PLANNED):
            return finish(end.status, end.summary)
        return finish(end.status, end.summary, cost.seconds, **(end.extra | costs()))

    # several projects' tasks for a shared memory file: one block each (and the block every
    # project reads for the requests asked in none); each block's tasks train, gate and
    # certify that block only, and each staged block is a proposal of its own
    say(
        f"{len(blocks)} blocks: "
        + ", ".join(sec or "the requests asked in no project" for sec in blocks)
    )
    lifecycle.record(
        store,
        night_id,
        target_path=str(target_path),
        summary=json.dumps(_night_of_blocks(report, tasks, [], base_hash, warning).dump()),
    )
    ended: list[Ended] = []
    for section, btasks in blocks.items():
        stopped = next((e.summary.stopped for e in ended if e.summary.stopped), None)
        if stopped:  # the night's budget is spent
            skipped = NightSummary(section=section, scorable=len(btasks))
            skipped.reason = f"not trained: {stopped}"
            ended.append(Ended(NightStatus.NO_CHANGE, skipped))
            continue
        ended.append(block(section, btasks, alone=False))
    summary = _night_of_blocks(report, tasks, ended, base_hash, warning)
    statuses = [e.status for e in ended]
    status = next(
        (
            st
            for st in (NightStatus.SUCCEEDED, NightStatus.NO_CHANGE, NightStatus.PLANNED)
            if st in statuses
        ),
        NightStatus.NO_TASKS,
    )
    if status in (NightStatus.NO_TASKS, NightStatus.PLANNED):
        return finish(status, summary)
    first = next((e for e in ended if e.extra.get("proposal_id")), None)
    return finish(status, summary, cost.seconds, **((first.extra if first else {}) | costs()))


class Ended:
    """How one block of a night ended: its status, summary and the night's row values
    (scores, proposal id)."""

    def __init__(
        self, status: NightStatus, summary: NightSummary, extra: dict[str, Any] | None = None
    ):
        self.status, self.summary, self.extra = status, summary, extra or {}


def _blocks(
    s: Settings, tasks: list[Task], key: Callable[[str | None], str | None]
) -> dict[str | None, list[Task]]:
    """The blocks of a memory file every project shares that a night trains, each with its
    tasks: the night's ``project``'s block; without one, a block per project the tasks come
    from (``key``: :func:`~skillopt_sleep.mining.mine.block_key`; the requests asked in no
    project: the block every project reads, None), first that global block, then by path."""
    if s.project is not None:
        return {str(s.project): tasks}
    out: dict[str | None, list[Task]] = {}
    for t in tasks:
        out.setdefault(key(str(t.project) if t.project else None), []).append(t)
    if not out:
        return {None: []}
    return dict(sorted(out.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")))


def _night_of_blocks(
    report: Any, tasks: list[Task], ended: list[Ended], base_hash: str, warning: str | None
) -> NightSummary:
    """The summary of a night that trained several blocks: the sums, and each block's
    outcome (:class:`~skillopt_sleep.results.BlockResult`)."""
    summaries = [e.summary for e in ended]
    out = NightSummary(
        tasks=len(report.tasks),
        scorable=len(tasks),
        dropped=report.dropped,
        train=sum(x.train for x in summaries),
        val=sum(x.val for x in summaries),
        test=sum(x.test for x in summaries),
        rules_before=sum(x.rules_before for x in summaries),
        base_hash=base_hash,
        held_out=HELD_OUT,
        not_validated=sum(x.not_validated or 0 for x in summaries),
        warning=warning,
        notified="; ".join(
            f"{e.extra['proposal_id']}: {e.summary.notified}" for e in ended if e.summary.notified
        )
        or None,
        copies=[c for x in summaries for c in x.copies],
    )
    out.stopped = next((x.stopped for x in summaries if x.stopped), None)
    for e in ended:
        x = e.summary
        out.blocks.append(
            BlockResult(
                section=x.section,
                status=e.status,
                proposal_id=e.extra.get("proposal_id"),
                scorable=x.scorable,
                train=x.train,
                val=x.val,
                test=x.test,
                val_before=e.extra.get("val_before"),
                val_after=e.extra.get("val_after"),
                test_before=e.extra.get("test_before"),
                test_after=e.extra.get("test_after"),
                reason=x.reason,
            )
        )
    out.reason = _blocks_reason(out.blocks)
    return out


def _blocks_reason(blocks: list[BlockResult]) -> str:
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


def _copy_kind(s: Settings, where: Any) -> str:
    """The document kind other agents' copies take (:mod:`.copies`): the configured kind, or
    ``memory`` for a ``path`` that is an agent's user-level memory file; "" (no copies) for a
    project's file or any other path."""
    if s.document.kind in ("memory", "managed_skill"):
        return s.document.kind
    return "memory" if where.scope == "user" and where.mode == "memory" else ""
