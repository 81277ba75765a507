"""One night: harvest → mine → replay → reflect → edit → gate → consolidate → stage.

:func:`run_night` is the single entry point used by the CLI, the daemon and the MCP server.
It records a ``nights`` row first and always finishes it: ``succeeded`` (a proposal was
staged), ``no_change`` (nothing certified), ``no_tasks``, ``planned`` (dry run), ``failed``
(a backend or budget error — re-raised so callers exit non-zero) or, when the process dies,
``interrupted`` (set by the next run, see :func:`mark_interrupted`).

The training loop follows the epoch / mini-batch shape of SkillOpt-style prompt optimisation:
each epoch shuffles train tasks deterministically, each mini-batch is replayed, the optimizer
reflects on its failures and successes and proposes at most ``edit_budget`` edits, and every
edit is tried on its own against the val gate. Rejected edits go to a buffer shown to the
optimizer for the rest of the night. Each epoch ends with a gated consolidation of the rules.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from filelock import FileLock, Timeout

from skillopt_sleep import paths
from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends.base import Backend
from skillopt_sleep.config import Settings
from skillopt_sleep.errors import BudgetExceeded, NightError, SkilloptError
from skillopt_sleep.models import CompletionRequest, Task
from skillopt_sleep.night import prompts
from skillopt_sleep.night.document import Document, Edit, apply_edit, code_spans, parse_edits, \
    read_live, resolve_target, sha256_text
from skillopt_sleep.night.gate import gate
from skillopt_sleep.night.replay import Cost, Meter, Replayer, Scored, mean, scorable
from skillopt_sleep.store import Store, now_iso

Progress = Callable[[str], None]
#: Called once per scored rollout (for progress bars).
OnRollout = Callable[[Scored], None]


@dataclass
class NightResult:
    night_id: int
    status: str
    proposal_id: str | None = None
    target_path: str = ""
    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None
    cost: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def mark_interrupted(store: Store) -> int:
    """Mark ``running`` nights whose process is gone as ``interrupted``; returns how many."""
    n = 0
    for row in store.rows("nights", "status = ?", ["running"]):
        if not _pid_alive(row.get("pid")) or row.get("pid") == os.getpid():
            store.update("nights", row["id"], {"status": "interrupted", "finished_at": now_iso(),
                                                "error": "the process running it stopped"})
            n += 1
    return n


def recover_nights(store: Store) -> int:
    """Mark ``running`` nights ``interrupted`` when nobody holds the night lock.

    :func:`mark_interrupted` trusts ``kill(pid, 0)``, which also succeeds for a zombie (a
    worker orphaned by a killed daemon, under a PID 1 that does not reap) or a reused pid. The
    night lock is held for a night's whole life and released by the kernel when its process
    dies, so a free lock proves no night is running. Returns how many were marked."""
    if not store.rows("nights", "status = ?", ["running"], limit=1):
        return 0
    probe = night_lock()
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return 0
    try:
        n = 0
        for row in store.rows("nights", "status = ?", ["running"]):
            store.update("nights", row["id"], {"status": "interrupted", "finished_at": now_iso(),
                                                "error": "the process running it stopped"})
            n += 1
        return n
    finally:
        probe.release()


def night_lock() -> FileLock:
    """The one-night-at-a-time lock shared by the CLI, the daemon and the MCP server."""
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    return FileLock(str(paths.state_dir() / "night.lock"))


class _Night:
    def __init__(self, store: Store, settings: Settings, night_id: int, target: Backend,
                 optimizer: Backend, say: Progress, on_rollout: OnRollout | None = None):
        self.store, self.s, self.night_id, self.say = store, settings, night_id, say
        self.cost = Cost()
        caps = dict(max_calls=settings.max_calls_per_night, max_tokens=settings.max_tokens_per_night)
        self.target = Meter(target, store, self.cost, role="target", **caps)
        self.optimizer = Meter(optimizer, store, self.cost, role="optimizer", **caps)
        self.replayer = Replayer(
            self.target, self.optimizer if settings.rubric else None,
            metric=settings.gate_metric, workers=target.config.workers, on_rollout=on_rollout,
        )
        self.edits: list[Edit] = []
        self.rejected: list[str] = []
        # the last gate-certified state, kept so a budget stop can still stage it
        self.rules: list[str] | None = None
        self.val_scores: dict[str, Scored] = {}
        self.val_baseline: float | None = None

    # ----------------------------------------------------------------- helpers
    def replay(self, tasks: list[Task], doc: Document, rules: list[str], split: str,
               phase: str) -> dict[str, Scored]:
        text = doc.render(rules)
        scores = self.replayer.run(tasks, text)
        dh = sha256_text(text)
        by_id = {t.id: t for t in tasks}
        for tid, sc in scores.items():
            self.store.insert("rollouts", {
                "night_id": self.night_id, "task_id": tid, "split": by_id[tid].split,
                "phase": phase, "doc_hash": dh, "backend": self.target.backend.name,
                "model": self.target.backend.model, "answer": sc.answer,
                "tool_calls": json.dumps(sc.tool_calls), "hard": sc.hard, "soft": sc.soft,
                "score": sc.score, "checks": json.dumps(sc.checks), "cached": int(sc.cached),
                "input_tokens": sc.usage.input_tokens, "output_tokens": sc.usage.output_tokens,
                "seconds": sc.seconds, "created_at": now_iso(),
            })
        return scores

    def reflect(self, batch: list[Task], scores: dict[str, Scored], rules: list[str]) -> list[Edit]:
        def item(t: Task) -> dict[str, Any]:
            sc = scores[t.id]
            return {
                "task": t.intent[:1500], "answer": sc.answer[:1500], "score": round(sc.score, 3),
                "failed_checks": [
                    {k: c[k] for k in ("kind", "value", "evidence")} for c in sc.checks if not c["passed"]
                ],
                "corrections": t.corrections[:5],
            }
        failures = [item(t) for t in batch if scores[t.id].score < 1.0]
        successes = [item(t) for t in batch if scores[t.id].score >= 1.0]
        prompt = prompts.reflect_prompt(rules=rules, failures=failures, successes=successes[:5],
                                        rejected=self.rejected, budget=self.s.edit_budget)
        comp, _ = self.optimizer.complete(CompletionRequest(prompt=prompt, purpose="reflect",
                                                            max_tokens=2000))
        data = prompts.extract_json(comp.text, backend=self.optimizer.backend.name)
        return parse_edits(data)[: self.s.edit_budget]

    def record_edit(self, e: Edit) -> None:
        self.edits.append(e)
        e.id = self.store.insert("edits", {
            "night_id": self.night_id, "epoch": e.epoch, "batch": e.batch, "op": e.op,
            "text": e.text, "old": e.old, "rationale": e.rationale, "origin": e.origin,
            "status": e.status, "reason": e.reason, "val_before": e.val_before,
            "val_after": e.val_after, "created_at": now_iso(),
        })

    # ----------------------------------------------------------------- the loop
    def train(self, doc: Document, train: list[Task], val: list[Task], verified: bool
              ) -> tuple[list[str], dict[str, Scored]]:
        rules = list(doc.rules)
        val_scores = self.replay(val, doc, rules, "val", "val baseline")
        self.val_baseline = mean(val_scores)
        self.rules, self.val_scores = rules, val_scores
        for epoch in range(1, self.s.epochs + 1):
            order = sorted(train, key=lambda t: t.id)
            random.Random(f"{epoch}:{len(order)}").shuffle(order)
            batches = [order[i : i + self.s.batch_size] for i in range(0, len(order), self.s.batch_size)]
            for b, batch in enumerate(batches, 1):
                self.say(f"epoch {epoch}/{self.s.epochs} batch {b}/{len(batches)}: replay")
                scores = self.replay(batch, doc, rules, "train", f"train e{epoch}b{b}")
                if all(sc.score >= 1.0 for sc in scores.values()):
                    continue
                for e in self.reflect(batch, scores, rules):
                    e.epoch, e.batch = epoch, b
                    candidate = apply_edit(rules, e)
                    if candidate is None:
                        e.status = "unmatched"  # apply_edit said why in e.reason
                        self.record_edit(e)
                        continue
                    cand_scores = self.replay(val, doc, candidate, "val", f"val e{epoch}b{b} candidate")
                    v = gate(val_scores, cand_scores, no_regression=self.s.no_regression)
                    e.val_before, e.val_after, e.reason = v.before, v.after, v.reason
                    if v.accepted:
                        e.status = "applied" if verified else "unverified"
                        rules, val_scores = candidate, cand_scores
                        self.rules, self.val_scores = rules, val_scores
                    else:
                        e.status = "rejected"
                        self.rejected.append(e.describe())
                    self.say(f"  {e.status}: {e.describe()} ({v.reason})")
                    self.record_edit(e)
            rules, val_scores = self.consolidate(doc, rules, val, val_scores, epoch, verified)
        return rules, val_scores

    def consolidate(self, doc: Document, rules: list[str], val: list[Task],
                    val_scores: dict[str, Scored], epoch: int, verified: bool
                    ) -> tuple[list[str], dict[str, Scored]]:
        if len(rules) < 2:
            return rules, val_scores
        comp, _ = self.optimizer.complete(CompletionRequest(
            prompt=prompts.consolidate_prompt(rules=rules), purpose="consolidate", max_tokens=2000))
        data = prompts.extract_json(comp.text, backend=self.optimizer.backend.name)
        merged = [str(r).strip() for r in data.get("rules") or [] if str(r).strip()]
        if not merged or merged == rules:
            return rules, val_scores
        e = Edit(op="replace", old="\n".join(rules), text="\n".join(merged), origin="consolidate",
                 rationale=f"epoch {epoch} slow update: {len(rules)} -> {len(merged)} rules",
                 epoch=epoch)
        lost = _lost_spans(rules, merged)
        if lost:  # a merge must keep every concrete command and value; no val replay needed
            e.status = "rejected"
            e.reason = "the merge drops " + ", ".join(f"`{x}`" for x in lost[:5])
            self.record_edit(e)
            return rules, val_scores
        cand = self.replay(val, doc, merged, "val", f"val e{epoch} consolidate")
        v = gate(val_scores, cand, no_regression=self.s.no_regression, strict=False)
        e.val_before, e.val_after, e.reason = v.before, v.after, v.reason
        if v.accepted:
            e.status = "applied" if verified else "unverified"
            rules, val_scores = merged, cand
            self.rules, self.val_scores = rules, val_scores
        else:
            e.status = "rejected"
        self.record_edit(e)
        return rules, val_scores


#: how many edits rejected by earlier nights the optimizer is shown (most recent first)
REMEMBERED_REJECTIONS = 20


def _inputs_fingerprint(s: Settings, base_hash: str, tasks: list[Task]) -> str:
    """What makes two nights the same night: the document, the scorable tasks (id, split,
    intent, checks, rubric), the backends and the training settings. sha256 hex."""
    data = {
        "base": base_hash,
        "tasks": sorted([t.id, t.split, t.intent, [c.model_dump() for c in t.checks], t.rubric]
                        for t in tasks),
        "target": [s.target.name, s.target.model], "optimizer": [s.optimizer.name, s.optimizer.model],
        "train": [s.epochs, s.batch_size, s.edit_budget, s.gate_metric, s.no_regression, s.rubric],
    }
    return sha256_text(json.dumps(data, sort_keys=True, default=str))


def remembered_rejections(store: Store, target_path: str, inputs: str) -> list[str]:
    """Edits the gate rejected in earlier nights on the same document, for the optimizer's
    rejected-edit buffer (``Edit.describe()`` texts, most recent first, deduplicated, at most
    :data:`REMEMBERED_REJECTIONS`). Nights with the very same inputs are left out: a re-run
    of an unchanged night must send the same prompts (and so be served from the cache)."""
    rows = store.db.execute(
        "select e.op, e.text, e.old, n.summary from edits e join nights n on n.id = e.night_id "
        "where e.status = 'rejected' and e.origin != 'consolidate' and n.target_path = ? "
        "order by e.id desc", [target_path]).fetchall()
    out: list[str] = []
    for op, text, old, summary in rows:
        try:
            if json.loads(summary or "{}").get("inputs") == inputs:
                continue
        except ValueError:
            pass
        said = Edit(op=op, text=text or "", old=old or "").describe()
        if said not in out:
            out.append(said)
        if len(out) >= REMEMBERED_REJECTIONS:
            break
    return out


def _lost_spans(rules: list[str], merged: list[str]) -> list[str]:
    """Code spans (backticked commands and values) of ``rules`` that no rule of ``merged``
    still holds, compared ignoring case (a merge may rewrite, not forget)."""
    kept = {x.lower() for r in merged for x in code_spans(r)}
    return sorted({x for r in rules for x in code_spans(r) if x.lower() not in kept})


def _open_backends(settings: Settings) -> tuple[Backend, Backend]:
    target = get_backend(settings.target)
    optimizer = get_backend(settings.optimizer)
    return target, optimizer


def run_night(
    store: Store,
    settings: Settings,
    *,
    dry_run: bool = False,
    trigger: str = "cli",
    harvest_first: bool = True,
    progress: Progress | None = None,
    on_rollout: OnRollout | None = None,
    env: dict[str, str] | None = None,
    home: Path | None = None,
) -> NightResult:
    """Run one night and return its result.

    Raises NightError when another night holds the lock, and re-raises backend / budget errors
    after recording the failed night (so the CLI exits non-zero with the reason).
    """
    say = progress or (lambda _msg: None)
    lock = night_lock()
    try:
        lock.acquire(timeout=0)
    except Timeout:
        running = store.rows("nights", "status = ?", ["running"], order_by="id desc", limit=1)
        since = f" (started {running[0]['started_at']})" if running else ""
        raise NightError(f"a night is running{since}") from None
    try:
        mark_interrupted(store)
        night_id = store.insert("nights", {
            "started_at": now_iso(), "status": "running", "trigger": trigger, "pid": os.getpid(),
            "dry_run": int(dry_run), "project": str(settings.project or ""),
        })
        started = time.monotonic()
        try:
            result = _run(store, settings, night_id, dry_run=dry_run, say=say, env=env, home=home,
                          on_rollout=on_rollout)
        except (SkilloptError, KeyboardInterrupt) as exc:
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or a signal turned into one
                status, error = "interrupted", f"interrupted ({str(exc) or 'Ctrl-C'})"
            else:
                status, error = "failed", str(exc) or type(exc).__name__
            store.update("nights", night_id, {
                "status": status, "finished_at": now_iso(), "error": error,
                "seconds": time.monotonic() - started,
            })
            raise
        except Exception as exc:  # a bug: still never leave the night "running"
            store.update("nights", night_id, {
                "status": "failed", "finished_at": now_iso(),
                "error": f"internal error: {type(exc).__name__}: {exc}",
                "seconds": time.monotonic() - started,
            })
            raise
        return result
    finally:
        lock.release()


def _harvest_line(report: Any) -> str:
    return (f"{report.total('sessions_new')} new and {report.total('sessions_updated')} updated "
            f"sessions from {report.total('files_read')} changed files")


def _split(tasks: list[Task]) -> tuple[list[Task], list[Task], list[Task]]:
    return ([t for t in tasks if t.split == "train"], [t for t in tasks if t.split == "val"],
            [t for t in tasks if t.split == "test"])


def _no_tasks_reason(mined: list[Task], scored: list[Task], val: list[Task], test: list[Task],
                     s: Settings) -> str:
    """Why a night has nothing to train on, worded so the user knows what would help."""
    n = len(mined)
    if not n:
        where = f" in {s.project}" if s.project else ""
        return (f"no task mined: no request{where} recurred in {s.min_sessions} or more sessions "
                f"or was corrected in the last {s.lookback_days} days")
    if not scored:
        why = ("no correction or rule to check an answer against" if s.rubric else
               "no rule check to score an answer with (rubric scoring is off)")
        return (f"{n} task{'s' if n != 1 else ''} mined, none scorable: {why}; correct the "
                f"agent when it answers a recurring request wrong (e.g. \"no, use pnpm\")")
    return (f"no scorable task in train ({len(val)} val, {len(test)} test held out, "
            f"{n - len(scored)} unscorable): a night needs another scorable task to train on; "
            f"correct the agent when it gets a recurring request wrong")


def _run(store: Store, s: Settings, night_id: int, *, dry_run: bool, say: Progress,
         env: dict[str, str] | None, home: Path | None,
         on_rollout: OnRollout | None = None) -> NightResult:
    from skillopt_sleep.night.mine import mine
    from skillopt_sleep.night.stage import stage_proposal
    from skillopt_sleep.sources.ingest import harvest

    t0 = time.monotonic()
    say("harvesting sessions")
    harvested = harvest(store, s)
    say(f"harvest: {_harvest_line(harvested)}")
    say("mining recurring tasks")
    report = mine(store, s)
    target_path = resolve_target(s.document, s.project, env=env, home=home)
    live = read_live(target_path)
    base_hash = sha256_text(live)
    doc = Document.parse(live, new_skill=s.document.kind == "managed_skill"
                         or target_path.name == "SKILL.md")
    judge_ok = s.rubric
    tasks = [t for t in report.tasks if scorable(t, judge_ok)]
    train, val, test = _split(tasks)
    summary: dict[str, Any] = {
        "tasks": len(report.tasks), "scorable": len(tasks), "train": len(train), "val": len(val),
        "test": len(test), "rules_before": len(doc.rules), "base_hash": base_hash,
        "inputs": _inputs_fingerprint(s, base_hash, tasks),
    }
    agent_of = {"claude_code": "claude_code", "codex": "codex", "copilot": "copilot"}
    replayed_on = agent_of.get(s.target.name)
    if s.document.kind == "managed_skill" and replayed_on and replayed_on != s.document.agent:
        summary["warning"] = (f"the document is {s.document.agent}'s skill but the night replays "
                              f"through {s.target.name}; set document.agent = \"{replayed_on}\"")
        say(f"warning: {summary['warning']}")
    store.update("nights", night_id, {"target_path": str(target_path), "summary": json.dumps(summary)})
    say(f"tasks: {len(tasks)} scorable of {len(report.tasks)} mined — {len(train)} train, "
        f"{len(val)} val, {len(test)} test; training {target_path}")

    def finish(status: str, **extra: Any) -> NightResult:
        store.update("nights", night_id, {
            "status": status, "finished_at": now_iso(), "seconds": time.monotonic() - t0,
            "summary": json.dumps(summary), **extra,
        })
        return NightResult(night_id=night_id, status=status, target_path=str(target_path),
                           summary=summary, proposal_id=extra.get("proposal_id"),
                           val_before=extra.get("val_before"), val_after=extra.get("val_after"),
                           test_before=extra.get("test_before"), test_after=extra.get("test_after"),
                           cost={k: extra.get(k) for k in ("calls", "cached_calls", "input_tokens",
                                                            "output_tokens")})

    if not train:
        summary["reason"] = _no_tasks_reason(report.tasks, tasks, val, test, s)
        return finish("no_tasks")
    if dry_run:
        summary["reason"] = "dry run: nothing replayed"
        return finish("planned")

    target, optimizer = _open_backends(s)
    say("checking the backends")
    target.check()  # loud even when every rollout would come from the cache
    if optimizer is not target:
        optimizer.check()
    night = _Night(store, s, night_id, target, optimizer, say, on_rollout)
    night.rejected = remembered_rejections(store, str(target_path), summary["inputs"])
    if night.rejected:
        say(f"remembering {len(night.rejected)} edit(s) rejected by earlier nights")
    verified = bool(val)
    if not verified:
        val = train
        summary["unverified"] = "the val split is empty; train was used, which cannot certify"
    budget_note = ""
    try:
        rules, val_scores = night.train(doc, train, val, verified)
        val_before = night.val_baseline
        say("scoring the test split before and after")
        test_before = mean(night.replay(test, doc, doc.rules, "test", "test before")) if test else None
        test_after = (mean(night.replay(test, doc, rules, "test", "test after"))
                      if test and rules != doc.rules else test_before)
    except BudgetExceeded as exc:
        # a clean stop: what the gate certified before the cap is kept (and staged below);
        # the test split is not scored
        budget_note = str(exc)
        rules = night.rules if night.rules is not None else list(doc.rules)
        val_scores, val_before = night.val_scores, night.val_baseline
        test_before = test_after = None
        summary["test_note"] = "not scored: " + budget_note
    costs = night.cost.as_dict()
    summary.update(
        edits={st: sum(e.status == st for e in night.edits)
               for st in ("applied", "rejected", "unmatched", "unverified")},
        rules_after=len(rules),
    )
    val_after = mean(val_scores) if val_scores else None
    extra = dict(val_before=val_before, val_after=val_after, test_before=test_before,
                 test_after=test_after, calls=costs["calls"], cached_calls=costs["cached_calls"],
                 input_tokens=costs["input_tokens"], output_tokens=costs["output_tokens"])
    if budget_note:
        summary["stopped"] = budget_note
    # a consolidation alone (a merge that kept the score) is no reason to propose a change
    certified = verified and rules != doc.rules and any(
        e.status == "applied" and e.origin != "consolidate" for e in night.edits)
    if not certified:
        summary["reason"] = ("edits improved train only (unverified)" if rules != doc.rules
                             else "no edit passed the val gate")
        if budget_note:
            summary["reason"] = f"stopped: {budget_note}; {summary['reason']} before that"
        return finish("no_change", **extra)
    if budget_note:
        summary["reason"] = f"stopped: {budget_note}; staging what the gate certified before that"
    new_text = doc.render(rules)
    same = [p for p in store.rows(
        "proposals", "target_path = ? and status = 'staged' and base_hash = ? and new_hash = ?",
        [str(target_path), base_hash, sha256_text(new_text)])
        if json.loads(p["summary"] or "{}").get("inputs") == summary["inputs"]]
    if same:  # an unchanged re-run: the staged proposal already says this
        summary["reason"] = f"same result as the staged proposal {same[0]['id']}"
        return finish("succeeded", proposal_id=same[0]["id"], **extra)
    proposal_id = stage_proposal(
        store, night_id=night_id, target_path=target_path, base_text=live, new_text=new_text,
        base_hash=base_hash, edits=night.edits, tasks=tasks, cost=costs, summary=summary,
        val_before=val_before, val_after=val_after, test_before=test_before, test_after=test_after,
    )
    return finish("succeeded", proposal_id=proposal_id, **extra)
