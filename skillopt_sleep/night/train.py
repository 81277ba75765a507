"""The training loop of one night: epochs × mini-batches of train tasks, reflect, edit, gate.

The loop follows the epoch / mini-batch shape of SkillOpt-style prompt optimisation: each
epoch shuffles train tasks deterministically, each mini-batch is replayed through the target,
the optimizer reflects on its failures and successes and proposes at most ``edit_budget``
edits, and every edit is tried on its own against the val gate (strict improvement, and by
default no val task worse). Rejected edits go to a buffer shown to the optimizer for the rest
of the night, seeded with the edits earlier nights on the same document rejected
(:func:`remembered_rejections`). Each epoch ends with a consolidation of the rules, gated
without strictness, and refused outright when it drops a backticked command or value.

For a skill the description is trained too: the reflect prompt shows it and whether each
rollout loaded the skill, and a ``describe`` edit that rewrites it is gated like any other
(the certified document, description included, is :attr:`Trainer.doc`).

With ``dream_samples = K`` > 1 (dream rollouts, :meth:`Trainer.dream`) each mini-batch's
train tasks are replayed K times (sample indexes 0..K-1, each its own cache entry): a task
counts by its worst attempt, and the reflect prompt also shows each task's best and worst
attempt when they score apart (``contrasts``), asking what distinguishes them. The edit
budget and the gate are the same.

With ``workers > 1`` the replays that do not wait on each other run together
(:meth:`Trainer.ahead`): the val baseline with the first mini-batch, a mini-batch with the
epoch's next ones under the same rules (:meth:`Trainer.ahead_batches`), and the val replays of
a mini-batch's next edits (as many as the workers run at once), each edit applied alone to
the rules as they stand when the first of them is gated (:meth:`Trainer.ahead_edits`). The
gate still settles the edits one by one, in order, and takes a replay made ahead only for the
very document it judges; when an edit is applied, the later ones are replayed again on the
new rules (extra calls a night with one worker does not make, counted against the per-night
caps). The night's test split is scored before and after together too (``night/run.py``). Scores, verdicts and the staged document do not
depend on the number of workers.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from skillopt_sleep.backends.base import Backend
from skillopt_sleep.delivery.document import (
    MAX_DESCRIPTION_CHARS,
    UNSCOPED,
    Document,
    Edit,
    apply_describe,
    apply_edit,
    block_tokens,
    code_spans,
    parse_edits,
    same_rule,
    scope_of,
    scoped,
    sha256_text,
    unscoped_text,
)
from skillopt_sleep.errors import BudgetExceeded
from skillopt_sleep.mining.artifact import family_of
from skillopt_sleep.models import CompletionRequest, Placement, Task
from skillopt_sleep.night import probes, prompts, screen
from skillopt_sleep.night.context import NightContext, OnRollout
from skillopt_sleep.night.gate import QUIET, Noise, Verdict, gate
from skillopt_sleep.night.replay import Meter, Replayer, Scored, mean
from skillopt_sleep.store import Store, now_iso

Progress = Callable[[str], None]
#: how many edits rejected by earlier nights the optimizer is shown (most recent first)
REMEMBERED_REJECTIONS = 20
#: the placebo rules of the noise probe (:meth:`Trainer.probe_noise`): they tell a coding agent
#: nothing it does not do anyway, so whatever they change in a val score is chance (the second
#: stands in when a document already has the first)
PLACEBOS = (
    "Read the request carefully before you answer.",
    "Take the request as it is written.",
    "Answer the question that was asked.",
    "Reply in the language of the request.",
    "Keep to the subject of the request.",
    "Give the answer in your own words.",
    "Make the answer easy to follow.",
    "Check the answer before you give it.",
)


class Trainer:
    """The training loop of one block of a night (see the module docstring)."""

    def __init__(
        self,
        ctx: NightContext,
        target: Backend,
        optimizer: Backend,
        *,
        place: Callable[[str], Placement | None] | None = None,
        section: str | None = None,
        test: Sequence[Task] = (),
        rejected: Sequence[str] = (),
        refused: Sequence[dict[str, str]] = (),
        probes: Sequence[Task] = (),
    ):
        """``ctx``: the night's (its cost is the night's one budget). ``place``: where a
        candidate text goes for the agent to find it (None: given as system text).
        ``section``: the project block of a shared memory file the loop trains (None: the
        global block). ``test``: the block's test split (scored ahead with the last batches
        when the workers allow). ``rejected``: edits earlier nights rejected (the optimizer is
        shown them); ``refused``: edits of proposals the user rejected or rolled back
        (:func:`user_refusals`: never tried again)."""
        self.ctx = ctx
        self.store, self.s, self.night_id = ctx.store, ctx.settings, ctx.night_id
        self.say: Progress = ctx.say
        self.cost = ctx.cost
        #: the night's progress events (rollouts counted, with the calls and tokens so far)
        self.report = ctx.say
        if self.report.cost is None:
            self.report.cost = self.cost
        settings = ctx.settings
        caps = {
            "max_calls": settings.max_calls_per_night,
            "max_tokens": settings.max_tokens_per_night,
            "outbox_days": settings.privacy.outbox_days,
        }
        self.target = Meter(target, ctx.store, self.cost, role="target", **caps)
        self.optimizer = Meter(optimizer, ctx.store, self.cost, role="optimizer", **caps)
        self.replayer = Replayer(
            self.target,
            self.optimizer if settings.rubric else None,
            metric=settings.gate_metric,
            workers=target.config.workers,
            on_rollout=self._counted(ctx.on_rollout),
            place=place,
        )
        self.edits: list[Edit] = []
        self.rejected: list[str] = list(rejected)
        #: edits of proposals the user rejected or rolled back: {"edit", "reason", "proposal"}
        self.refused: list[dict[str, str]] = list(refused)
        #: the project section of a shared memory file the night trains (None: global block)
        self.section = section
        # the last gate-certified state, kept so a budget stop can still stage it (``doc``:
        # the document with its certified description; its rules are ``rules``)
        self.doc: Document | None = None
        self.rules: list[str] | None = None
        self.val_scores: dict[str, Scored] = {}
        self.val_baseline: float | None = None
        #: how the val scores move by chance (:meth:`probe_noise`; quiet until measured)
        self.noise: Noise = QUIET
        #: why the gate cannot decide this block ("" when it can): too few val occurrences
        #: where the answers vary
        self.undecided = ""
        #: rollouts replayed ahead (:meth:`ahead`): (document text, task id) -> Scored
        self._ahead: dict[tuple[str, str], Scored] = {}
        #: the block's test split, and the text it is scored "before" under (the document as
        #: the night found it; set by :meth:`train`)
        self.test: list[Task] = list(test)
        self.test_texts: list[str] = []
        #: the collateral gate's probes (night/probes.py): the user's other tasks of the
        #: block and the everyday requests, replayed for an edit the val gate accepts
        self.probes: list[Task] = list(probes)

    # ----------------------------------------------------------------- helpers
    def _counted(self, on_rollout: OnRollout | None) -> OnRollout:
        def counted(sc: Scored) -> None:
            self.report.rollout(sc)
            if on_rollout is not None:
                on_rollout(sc)

        return counted

    def replay(
        self, tasks: list[Task], doc: Document, rules: list[str], split: str, phase: str
    ) -> dict[str, Scored]:
        text = doc.render(rules)
        todo = [t for t in tasks if (text, t.id) not in self._ahead]
        if todo:
            self.report.replaying(phase, len(todo))
        fresh = self.replayer.run(todo, text) if todo else {}
        scores = {
            t.id: self._ahead.pop((text, t.id)) if (text, t.id) in self._ahead else fresh[t.id]
            for t in tasks
        }
        dh = sha256_text(text)
        by_id = {t.id: t for t in tasks}
        with self.store.write():  # one transaction (one fsync) per replay, not per rollout
            for tid, sc in scores.items():
                self._record(tid, by_id[tid].split, phase, dh, sc)
        return scores

    def _record(self, tid: str, split: str, phase: str, dh: str, sc: Scored) -> None:
        self.store.rollouts.add(
            night_id=self.night_id,
            task_id=tid,
            split=split,
            phase=phase,
            doc_hash=dh,
            backend=self.target.backend.name,
            model=self.target.backend.model,
            answer=sc.answer,
            tool_calls=json.dumps(sc.tool_calls),
            hard=sc.hard,
            soft=sc.soft,
            score=sc.score,
            checks=json.dumps(sc.checks),
            cached=int(sc.cached),
            input_tokens=sc.usage.input_tokens,
            output_tokens=sc.usage.output_tokens,
            seconds=sc.seconds,
            created_at=now_iso(),
            acts=sc.acts or None,
        )

    def ahead(self, jobs: list[tuple[list[Task], str]]) -> None:
        """With ``workers > 1``: replay ``jobs`` (tasks, document text) together, for
        :meth:`replay` to take when it is asked for the same task under the same text
        (each such rollout is recorded then, in the loop's order). Replays made ahead and
        never asked for are dropped at the next call. A budget cap met here is left for the
        loop to meet in order."""
        self._ahead.clear()
        jobs = [(tasks, text) for tasks, text in jobs if tasks]
        if self.replayer.workers == 1 or len(jobs) < 2:
            return
        self.report.replaying("in parallel", sum(len(tasks) for tasks, _ in jobs))
        try:
            results = self.replayer.run_many(jobs)
        except BudgetExceeded:
            return
        for (_tasks, text), scores in zip(jobs, results, strict=True):
            for tid, sc in scores.items():
                self._ahead[(text, tid)] = sc

    def ahead_batches(self, batches: list[list[Task]], text: str, last: bool = False) -> None:
        """Before ``batches[0]`` is replayed under ``text``: unless that replay was made
        ahead, replay it together with the epoch's next mini-batches under the same text, as
        many as the workers run at once (those are used when their batches pass without an
        edit, so the rules stay as they are). ``last``: these are the last epoch's last
        batches; when they all fit, the test split before (:attr:`test_texts`) and after
        (``text``) is replayed with them too, for the night to take when the rules did not
        change after them (:meth:`ahead_test`)."""
        if all((text, t.id) in self._ahead for t in batches[0]):
            return
        jobs: list[tuple[list[Task], str]] = []
        size = 0
        for batch in batches:
            if jobs and size + len(batch) > self.replayer.workers:
                break
            jobs.append((batch, text))
            size += len(batch)
        if last and len(jobs) == len(batches) and self.test:
            tests = [(self.test, t) for t in dict.fromkeys([*self.test_texts, text])]
            if size + sum(len(tasks) for tasks, _ in tests) <= self.replayer.workers:
                jobs += tests
        self.ahead(jobs)

    def ahead_test(self, texts: list[str]) -> None:
        """Before the test split is scored under ``texts`` (before, after): replay it under
        them together, unless every one of those replays was made ahead."""
        if all((text, t.id) in self._ahead for text in texts for t in self.test):
            return
        self.ahead([(self.test, text) for text in texts])

    def ahead_edits(
        self, doc: Document, val: list[Task], rules: list[str], edits: list[Edit]
    ) -> None:
        """Before the gate judges ``edits[0]`` on ``rules``: unless its val replay was made
        ahead, replay the val split under it and the next edits' candidates together, as
        many candidates as the workers run at once (``workers // len(val)``; none when that
        is below 2), each edit applied alone to ``rules``."""
        texts = self.candidates(doc, rules, edits)
        if not texts or all((texts[0], t.id) in self._ahead for t in val):
            return
        room = self.replayer.workers // max(1, len(val))
        self.ahead([(val, text) for text in texts[:room]])

    def candidates(self, doc: Document, rules: list[str], edits: list[Edit]) -> list[str]:
        """The distinct documents the val gate would judge for ``edits`` if none of them were
        applied before the next (each edit applied alone to ``rules``; edits the loop never
        replays, refused, unmatched or over the budget, left out). Pure: ``edits`` are not
        changed."""
        out: list[str] = []
        for e in edits:
            probe = copy.copy(e)
            if _screened(probe) or self.refused_as(probe):
                continue
            if probe.op == "describe":  # the rules stay; the description changes
                described = apply_describe(doc, probe)
                if described is None:
                    continue
                text = described.render(rules)
            else:
                candidate = apply_edit(rules, probe)
                if candidate is None or self.over_budget(rules, candidate):
                    continue
                text = doc.render(candidate)
            if text not in out:
                out.append(text)
        return out

    def probe_noise(
        self, doc: Document, rules: list[str], val: list[Task], scores: dict[str, Scored]
    ) -> tuple[Noise, dict[str, Scored]]:
        """Measure how the val scores move by chance, before any edit is tried: replay val
        under a placebo rule (:data:`PLACEBOS`) at sample 1. When every answer is the one the
        baseline (``scores``, sample 0) gave, the target is quiet (:data:`QUIET`: one replay
        was the whole cost). Otherwise val is replayed again under the current document at
        sample 1 and under ``gate_samples - 2`` more placebos (placebo j at sample j); each
        task's chance moves (each placebo minus the baseline; sample 1 minus sample 0 when
        samples differ) give the noise (:meth:`Noise.measured`), and when samples differ the
        baseline and every candidate are scored on ``gate_samples`` samples. Returns the
        noise and the val scores to start from (each a mean over its samples)."""
        k = self.s.gate_samples
        placebos = [p for p in PLACEBOS if p not in rules][: k - 1]
        base = doc.render(rules)
        texts = [doc.render([*rules, p]) for p in placebos]
        self.report.replaying("noise probe", len(val))
        first = self.replayer.run(val, texts[0], sample=1)
        self._record_all(val, texts[0], "val noise probe placebo 1", first)

        def same(a: Scored, b: Scored) -> bool:
            return a.answer == b.answer and a.score == b.score

        if all(same(first[t.id], scores[t.id]) for t in val):
            return QUIET, scores
        # the answers vary: is it the sampling, and how far do the scores move?
        self.report.replaying("noise probe", len(val) * (k - 1))
        runs = self.replayer.run_many(
            [(val, base), *((val, t) for t in texts[1:])], samples=[1, *range(2, k)]
        )
        second, probes = runs[0], [first, *runs[1:]]
        self._record_all(val, base, "val baseline sample 1", second)
        for j, (text, run) in enumerate(zip(texts[1:], runs[1:], strict=True), 2):
            self._record_all(val, text, f"val noise probe placebo {j}", run)
        sampled = any(not same(second[t.id], scores[t.id]) for t in val)
        moves = {
            t.id: [run[t.id].score - scores[t.id].score for run in probes]
            + ([second[t.id].score - scores[t.id].score] if sampled else [])
            for t in val
        }
        noise = Noise.measured(k if sampled else 1, moves)
        if sampled:  # the baseline on k samples too: 0 and 1 are in, 2..k-1 to replay
            got = {t.id: [scores[t.id], second[t.id]] for t in val}
            more = self.replayer.run_many([(val, base)] * (k - 2), samples=list(range(2, k)))
            for n, run in enumerate(more, 2):
                self._record_all(val, base, f"val baseline sample {n}", run)
                for t in val:
                    got[t.id].append(run[t.id])
            scores = {tid: _averaged(scs) for tid, scs in got.items()}
        self.say(
            "the target's answers vary "
            + ("from sample to sample" if sampled else "when the document changes")
            + f": val scored on {noise.samples} sample(s) per occurrence, "
            f"a gain must exceed ±{max(self.s.gate_margin, noise.bound):.3f}"
        )
        return noise, scores

    def _undecidable(self, val: list[Task], scores: dict[str, Scored]) -> str:
        """Why the val split cannot decide where the answers vary ("" when it can, and
        always on a quiet target): fewer val occurrences than ``gate_min_val``, or a noise
        bound no gain could exceed (even a document that passed every val check)."""
        if not self.noise.varies:
            return ""
        if len(val) < self.s.gate_min_val:
            return (
                f"too few val occurrences to decide: {len(val)} where the answers vary "
                f"(gate_min_val = {self.s.gate_min_val}); no edit was tried"
            )
        room, need = 1.0 - mean(scores), max(self.s.gate_margin, self.noise.bound)
        if room > 0 and need >= room:
            return (
                f"too few val occurrences to decide: the answers vary by ±{need:.3f}, more "
                f"than any gain {len(val)} val occurrences could show ({room:.3f}); "
                "no edit was tried"
            )
        return ""

    def _samples(
        self, tasks: list[Task], text: str, phase: str, first: dict[str, Scored], k: int
    ) -> dict[str, list[Scored]]:
        """Samples 0..k-1 of ``tasks`` under ``text`` (``first``: sample 0, replayed), each
        later one recorded as ``<phase> sample <n>``."""
        got = {t.id: [first[t.id]] for t in tasks}
        if k <= 1:
            return got
        more = self.replayer.run_many([(tasks, text)] * (k - 1), samples=list(range(1, k)))
        for n, run in enumerate(more, 1):
            self._record_all(tasks, text, f"{phase} sample {n}", run)
            for t in tasks:
                got[t.id].append(run[t.id])
        return got

    def _record_all(
        self, tasks: list[Task], text: str, phase: str, scores: dict[str, Scored]
    ) -> None:
        dh = sha256_text(text)
        with self.store.write():
            for t in tasks:
                self._record(t.id, t.split, phase, dh, scores[t.id])

    def replay_val(
        self, val: list[Task], doc: Document, rules: list[str], phase: str
    ) -> dict[str, Scored]:
        """A candidate's val replay: sample 0 (:meth:`replay`), and where answers vary
        (:attr:`noise`) samples 1..k-1 too, each task scored by their mean."""
        first = self.replay(val, doc, rules, "val", phase)
        if self.noise.samples <= 1:
            return first
        got = self._samples(val, doc.render(rules), phase, first, self.noise.samples)
        return {tid: _averaged(scs) for tid, scs in got.items()}

    def dream(
        self,
        batch: list[Task],
        doc: Document,
        rules: list[str],
        scores: dict[str, Scored],
        phase: str,
    ) -> dict[str, list[Scored]]:
        """Dream rollouts: every attempt of each task of ``batch`` under ``rules``, sample 0
        (``scores``, replayed already) first, then samples 1..K-1 (``dream_samples``), each
        cached under its own sample index and recorded as ``<phase> sample <k>``. With K = 1:
        ``scores`` alone, no call."""
        attempts = {t.id: [scores[t.id]] for t in batch}
        k = self.s.dream_samples
        if k <= 1 or not batch:
            return attempts
        text = doc.render(rules)
        self.report.replaying(f"{phase} dream", len(batch) * (k - 1))
        more = self.replayer.run_many([(batch, text)] * (k - 1), samples=list(range(1, k)))
        dh = sha256_text(text)
        with self.store.write():
            for n, got in enumerate(more, 1):
                for t in batch:
                    self._record(t.id, t.split, f"{phase} sample {n}", dh, got[t.id])
                    attempts[t.id].append(got[t.id])
        return attempts

    def reflect(
        self,
        batch: list[Task],
        scores: dict[str, Scored],
        rules: list[str],
        doc: Document | None = None,
        attempts: dict[str, list[Scored]] | None = None,
    ) -> list[Edit]:
        """Ask the optimizer for edits. ``attempts``: each task's dream rollouts (sample 0
        first); a task then counts by its worst attempt, and where its best and worst
        attempts score apart the prompt shows both (``contrasts``) and asks what tells them
        apart. Without them (or with one attempt each) the prompt is exactly as before."""
        skill = doc is not None and doc.skill and doc.description is not None
        tried = attempts or {t.id: [scores[t.id]] for t in batch}
        worst = {tid: min(scs, key=lambda sc: sc.score) for tid, scs in tried.items()}
        best = {tid: max(scs, key=lambda sc: sc.score) for tid, scs in tried.items()}

        def failed(sc: Scored) -> list[dict[str, Any]]:
            return [
                {k: c[k] for k in ("kind", "value", "evidence")}
                for c in sc.checks
                if not c["passed"]
            ]

        def item(t: Task) -> dict[str, Any]:
            sc = worst[t.id]
            loaded: dict[str, Any] = {}
            if skill:
                loaded["skill_loaded"] = "unknown" if sc.skill_loaded is None else sc.skill_loaded
            return {
                "task": t.intent[:1500],
                "answer": sc.answer[:1500],
                "score": round(sc.score, 3),
                "failed_checks": failed(sc),
                "corrections": t.corrections[:5],
                **loaded,
            }

        failing = [t for t in batch if worst[t.id].score < 1.0]
        # each failure numbered and named by its task family: an edit says which it fixes
        # (``evidence``), and the night scopes it to their families (:meth:`scope_edit`)
        failures = [
            {"n": n, "family": family_of(t.intent).phrase, **item(t)}
            for n, t in enumerate(failing, 1)
        ]
        successes = [item(t) for t in batch if worst[t.id].score >= 1.0]
        contrasts = [
            {
                "task": t.intent[:1500],
                "best": {"answer": best[t.id].answer[:1500], "score": round(best[t.id].score, 3)},
                "worst": {
                    "answer": worst[t.id].answer[:1500],
                    "score": round(worst[t.id].score, 3),
                    "failed_checks": failed(worst[t.id]),
                },
            }
            for t in batch
            if best[t.id].score > worst[t.id].score
        ]
        prompt = prompts.reflect_prompt(
            contrasts=contrasts,
            rules=rules,
            failures=failures,
            successes=successes[:5],
            rejected=self.rejected,
            budget=self.s.edit_budget,
            user_refused=self.refused,
            skill=(
                {"description": doc.description, "max_chars": MAX_DESCRIPTION_CHARS}
                if skill and doc is not None
                else None
            ),
        )
        comp, _ = self.optimizer.complete(
            CompletionRequest(prompt=prompt, purpose="reflect", max_tokens=2000)
        )
        data = prompts.extract_json(comp.text, backend=self.optimizer.backend.name)
        edits = parse_edits(data)[: self.s.edit_budget]
        numbered = {str(n): t for n, t in enumerate(failing, 1)}
        for e in edits:
            self.scope_edit(e, numbered)
        return edits

    def scope_edit(self, e: Edit, numbered: dict[str, Task]) -> None:
        """Scope by construction: an added or rewritten rule carries the task families of its
        evidence (the failures it names; all of the mini-batch's when it names none) as
        ``When <family>: …``; it stays unscoped only when the optimizer asked for that and its
        evidence spans two families or more. A rule the optimizer scoped itself keeps its
        scope. Sets ``e.scope``, ``e.text`` and ``e.evidence`` (the evidence's view ids)."""
        named = [numbered[n] for n in dict.fromkeys(e.evidence) if n in numbered]
        evidence = named or list(numbered.values())
        e.evidence = [t.id for t in evidence]
        if e.op not in ("add", "replace") or not e.text.strip():
            return
        own = scope_of(e.text)
        if own:
            e.scope = own
            return
        families = list(dict.fromkeys(family_of(t.intent).phrase for t in evidence))
        if not families or (e.asked_scope.lower() in UNSCOPED and len(families) >= 2):
            return
        e.scope = " or ".join(families)
        e.text = scoped(e.text, e.scope)

    def over_budget(self, rules: list[str], candidate: list[str]) -> str:
        """Why ``candidate`` breaks the managed block's token budget ("" when it does not):
        over ``document.max_tokens`` and larger than ``rules`` (a document already over the
        budget may still shrink)."""
        section = self.section
        budget, after = self.s.document.max_tokens, block_tokens(candidate, section)
        if after > budget and after > block_tokens(rules, section):
            return f"over the token budget: the managed block would be ~{after} tokens (budget {budget})"
        return ""

    def refused_as(self, e: Edit) -> str:
        """Why ``e`` is an edit the user refused ("" when it is not): the same operation on
        the same rule text, compared ignoring case and spacing."""

        def key(said: str) -> str:
            return " ".join(said.lower().split())

        def written(said: str) -> str | None:
            """The rule an add or replace (as described) writes."""
            if said.startswith("add: "):
                return said[5:]
            if said.startswith("replace: ") and " -> " in said:
                return said.split(" -> ", 1)[1]
            return None

        new = written(e.describe())
        for r in self.refused:
            old = written(r["edit"])
            # a rule refused for every task is refused for each task family too
            broader = (
                new is not None
                and old is not None
                and not scope_of(old)
                and key(unscoped_text(old)) == key(unscoped_text(new))
            )
            if key(r["edit"]) == key(e.describe()) or broader:
                return f"the user refused it in {r['proposal']}" + (
                    f": {r['reason']}" if r["reason"] else ""
                )
        return ""

    def record_edit(self, e: Edit) -> None:
        self.edits.append(e)
        e.id = self.store.edits.add(
            night_id=self.night_id,
            epoch=e.epoch,
            batch=e.batch,
            op=e.op,
            text=e.text,
            old=e.old,
            rationale=e.rationale,
            origin=e.origin,
            status=e.status,
            reason=e.reason,
            val_before=e.val_before,
            val_after=e.val_after,
            section=self.section or "",
            scope=e.scope,
            evidence=json.dumps(e.evidence),
            created_at=now_iso(),
        )

    # ----------------------------------------------------------------- the loop
    def train(
        self, doc: Document, train: list[Task], val: list[Task], verified: bool
    ) -> tuple[list[str], dict[str, Scored]]:
        """Train ``doc``'s rules on ``train`` against the val gate on ``val`` (``verified``:
        val is held out; else it is train, and nothing applied is certified). Returns the
        rules and their val scores."""
        rules = list(doc.rules)
        self.test_texts = [doc.render(rules)]
        first = self._batches(train, 1)[:1]
        self.ahead([(val, doc.render(rules)), *((b, doc.render(rules)) for b in first)])
        val_scores = self.replay(val, doc, rules, "val", "val baseline")
        if verified and self.s.gate_samples > 1:
            self.noise, val_scores = self.probe_noise(doc, rules, val, val_scores)
        self.val_baseline = mean(val_scores)
        self.doc, self.rules, self.val_scores = doc, rules, val_scores
        self.undecided = self._undecidable(val, val_scores)
        if self.undecided:
            self.say(self.undecided)
            return rules, val_scores
        for epoch in range(1, self.s.epochs + 1):
            batches = self._batches(train, epoch)
            for b in range(1, len(batches) + 1):
                rules, val_scores = self._batch(epoch, b, batches, val, rules, val_scores, verified)
            self.report.enter("consolidate", epoch=epoch, epochs=self.s.epochs)
            rules, val_scores = self.consolidate(self.doc, rules, val, val_scores, epoch, verified)
        return rules, val_scores

    def _batch(
        self,
        epoch: int,
        b: int,
        batches: list[list[Task]],
        val: list[Task],
        rules: list[str],
        val_scores: dict[str, Scored],
        verified: bool,
    ) -> tuple[list[str], dict[str, Scored]]:
        """Mini-batch ``b`` of ``epoch``: replay it, reflect on it, gate each edit proposed.
        Returns the rules and val scores to go on with."""
        assert self.doc is not None
        batch = batches[b - 1]
        self.report.enter("train", epoch=epoch, epochs=self.s.epochs, batch=b, batches=len(batches))
        self.say(f"epoch {epoch}/{self.s.epochs} batch {b}/{len(batches)}: replay")
        self.ahead_batches(batches[b - 1 :], self.doc.render(rules), last=epoch == self.s.epochs)
        phase = f"train e{epoch}b{b}"
        scores = self.replay(batch, self.doc, rules, "train", phase)
        attempts = self.dream(batch, self.doc, rules, scores, phase)
        if all(sc.score >= 1.0 for tried in attempts.values() for sc in tried):
            return rules, val_scores
        self.report.enter("reflect")
        edits = self.reflect(batch, scores, rules, self.doc, attempts)
        self.report.enter("gate")
        for k, e in enumerate(edits):
            e.epoch, e.batch = epoch, b
            rules, val_scores = self._gate_edit(e, edits[k:], val, rules, val_scores, verified)
        return rules, val_scores

    def _refused_before_replay(self, e: Edit) -> bool:
        """Settle ``e`` without a val replay when the poisoning screen flags it or the user
        refused it (recorded; True), else False."""
        flagged = _screened(e)
        if flagged:  # a poisoned rule: no val replay, never applied
            e.status, e.reason = "flagged", flagged
            self.rejected.append(e.describe())  # the optimizer is told so
            self.say(f"  flagged: {e.describe()} ({flagged})")
            self.record_edit(e)
            return True
        refused = self.refused_as(e)
        if refused:  # the user said no to it: no val replay, never applied
            e.status, e.reason = "rejected", refused
            self.say(f"  rejected: {e.describe()} ({refused})")
            self.record_edit(e)
            return True
        return False

    def _gate_edit(
        self,
        e: Edit,
        upcoming: list[Edit],
        val: list[Task],
        rules: list[str],
        val_scores: dict[str, Scored],
        verified: bool,
    ) -> tuple[list[str], dict[str, Scored]]:
        """Try edit ``e`` (``upcoming``: it and the mini-batch's edits after it, replayed
        ahead together when the workers allow) on ``rules`` against the val gate, record the
        verdict, and return the rules and val scores to go on with."""
        assert self.doc is not None
        if self._refused_before_replay(e):
            return rules, val_scores
        cand_doc: Document | None = self.doc
        candidate: list[str] | None
        if e.op == "describe":  # the rules stay; the description changes
            cand_doc, candidate = apply_describe(self.doc, e), list(rules)
        else:
            candidate = apply_edit(rules, e)
        if candidate is None or cand_doc is None:
            e.status = "unmatched"  # apply_edit / apply_describe said why
            self.record_edit(e)
            return rules, val_scores
        over = self.over_budget(rules, candidate)
        if over:  # never replayed: the document must stay affordable
            e.status, e.reason = "rejected", over
            self.say(f"  rejected: {e.describe()} ({over})")
            self.record_edit(e)
            return rules, val_scores
        self.ahead_edits(self.doc, val, rules, upcoming)
        cand_scores = self.replay_val(
            val, cand_doc, candidate, f"val e{e.epoch}b{e.batch} candidate"
        )
        v = gate(
            val_scores,
            cand_scores,
            no_regression=self.s.no_regression,
            # a new description: only a strictly better score counts
            shorter=None if e.op == "describe" else _shorter(candidate, rules),
            noise=self.noise,
            margin=self.s.gate_margin,
        )
        if v.accepted and e.op != "describe":  # what it helps, it must not pay for elsewhere
            v = self.collateral(v, rules, candidate)
        rules, val_scores = self._settle(
            e, v, rules, val_scores, candidate, cand_scores, verified, cand_doc
        )
        if e.status == "rejected":
            self.rejected.append(e.describe())
        self.say(f"  {e.status}: {e.describe()} ({v.reason})")
        self.record_edit(e)
        return rules, val_scores

    def _batches(self, train: list[Task], epoch: int) -> list[list[Task]]:
        """The epoch's mini-batches: train tasks in a deterministic shuffle of the epoch."""
        order = sorted(train, key=lambda t: t.id)
        random.Random(f"{epoch}:{len(order)}").shuffle(order)
        size = self.s.batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]

    def consolidate(
        self,
        doc: Document,
        rules: list[str],
        val: list[Task],
        val_scores: dict[str, Scored],
        epoch: int,
        verified: bool,
    ) -> tuple[list[str], dict[str, Scored]]:
        if len(rules) < 2:
            return rules, val_scores
        comp, _ = self.optimizer.complete(
            CompletionRequest(
                prompt=prompts.consolidate_prompt(rules=rules),
                purpose="consolidate",
                max_tokens=2000,
            )
        )
        data = prompts.extract_json(comp.text, backend=self.optimizer.backend.name)
        merged = [str(r).strip() for r in data.get("rules") or [] if str(r).strip()]
        if not merged or merged == rules:
            return rules, val_scores
        e = Edit(
            op="replace",
            old="\n".join(rules),
            text="\n".join(merged),
            origin="consolidate",
            rationale=f"epoch {epoch} slow update: {len(rules)} -> {len(merged)} rules",
            epoch=epoch,
        )
        flagged = next((f"{screen.reason(r)}: {r}" for r in merged if screen.reason(r)), "")
        if flagged:  # whatever the gate would say: a poisoned rule never reaches the document
            e.status, e.reason = "flagged", flagged
            self.record_edit(e)
            return rules, val_scores
        turned_down = [x.text for x in self.edits if x.status in ("rejected", "flagged")]
        added = _new_in_merge(rules, merged, turned_down)
        if added:  # a merge may merge or reword, never add what the night did not accept
            e.status = "rejected"
            e.reason = "the merge adds a rule the night did not accept: " + added
            self.record_edit(e)
            return rules, val_scores
        widened = sorted({scope_of(r) for r in rules} - {scope_of(m) for m in merged} - {""})
        if widened:  # a merge may not turn a scoped rule into one for every task
            e.status = "rejected"
            e.reason = "the merge drops the scope " + ", ".join(f'"{w}"' for w in widened)
            self.record_edit(e)
            return rules, val_scores
        lost = _lost_spans(rules, merged)
        if lost:  # a merge must keep every concrete command and value; no val replay needed
            e.status = "rejected"
            e.reason = "the merge drops " + ", ".join(f"`{x}`" for x in lost[:5])
            self.record_edit(e)
            return rules, val_scores
        over = self.over_budget(rules, merged)
        if over:
            e.status, e.reason = "rejected", over
            self.record_edit(e)
            return rules, val_scores
        cand = self.replay_val(val, doc, merged, f"val e{epoch} consolidate")
        v = gate(
            val_scores,
            cand,
            no_regression=self.s.no_regression,
            strict=False,
            shorter=_shorter(merged, rules),
            noise=self.noise,
            margin=self.s.gate_margin,
        )
        if v.accepted:
            v = self.collateral(v, rules, merged)
        rules, val_scores = self._settle(e, v, rules, val_scores, merged, cand, verified, doc)
        self.record_edit(e)
        return rules, val_scores

    def collateral(self, v: Verdict, rules: list[str], candidate: list[str]) -> Verdict:
        """The collateral gate (night/probes.py) on a candidate the val gate accepted: the
        probes replayed under ``rules`` (the document before it; cached after the first
        time) and under ``candidate``; any probe it harms (:func:`probes.harm`) — where the
        answers vary, harmed again on another sample — rejects it, the verdict naming it."""
        assert self.doc is not None
        if not self.probes:
            return v
        doc = self.doc
        before = self.replay(self.probes, doc, rules, "probe", "collateral before")
        after = self.replay(self.probes, doc, candidate, "probe", "collateral candidate")
        cap = self.target.backend.config.max_tokens
        harmed = {p.id: probes.harm(before[p.id], after[p.id], cap) for p in self.probes}
        hit = [p for p in self.probes if harmed[p.id]]
        if hit and self.noise.varies:  # by chance, or again on another sample?
            self.report.replaying("collateral check", 2 * len(hit))
            again_b, again_a = self.replayer.run_many(
                [(hit, doc.render(rules)), (hit, doc.render(candidate))], samples=[1, 1]
            )
            self._record_all(hit, doc.render(rules), "collateral before sample 1", again_b)
            self._record_all(hit, doc.render(candidate), "collateral candidate sample 1", again_a)
            hit = [p for p in hit if probes.harm(again_b[p.id], again_a[p.id], cap)]
        if not hit:
            everyday = sum(probes.is_everyday(p.id) for p in self.probes)
            return dataclasses.replace(
                v,
                reason=f"{v.reason}; no harm to {len(self.probes) - everyday} other task(s) of "
                f"yours or {everyday} everyday request(s)",
            )
        said = "; ".join(f"{probes.label(p)}: {harmed[p.id]}" for p in hit[:3])
        more = f" (and {len(hit) - 3} more)" if len(hit) > 3 else ""
        return dataclasses.replace(
            v, accepted=False, reason=f"{v.reason}, but it harms {said}{more}"
        )

    def _settle(
        self,
        e: Edit,
        verdict: Any,
        rules: list[str],
        val_scores: dict[str, Scored],
        candidate: list[str],
        cand_scores: dict[str, Scored],
        verified: bool,
        cand_doc: Document,
    ) -> tuple[list[str], dict[str, Scored]]:
        """Record the gate's verdict on ``e``; the rules and val scores to go on with (the
        candidate's when accepted, kept with ``cand_doc`` as the last certified state)."""
        e.val_before, e.val_after, e.reason = verdict.before, verdict.after, verdict.reason
        if not verdict.accepted:
            e.status = "rejected"
            return rules, val_scores
        e.status = "applied" if verified else "unverified"
        self.doc, self.rules, self.val_scores = cand_doc, candidate, cand_scores
        return candidate, cand_scores


def remembered_rejections(
    store: Store, target_path: str, inputs: str, section: str | None = None
) -> list[str]:
    """Edits the gate rejected in earlier nights on the same document and block (``section``:
    a project's block of a shared memory file; what was wrong for one project may be right
    for another), for the optimizer's rejected-edit buffer (``Edit.describe()`` texts, most
    recent first, deduplicated, at most :data:`REMEMBERED_REJECTIONS`). Nights with the very
    same inputs are left out: a re-run of an unchanged night must send the same prompts (and
    so be served from the cache)."""
    out: list[str] = []
    for r in store.edits.rejected_for(target_path, section):
        if inputs in _night_inputs(r.night_summary, section):
            continue
        said = Edit(op=r.op, text=r.text, old=r.old).describe()
        if said not in out:
            out.append(said)
        if len(out) >= REMEMBERED_REJECTIONS:
            break
    return out


def _night_inputs(summary: str, section: str | None) -> set[str]:
    """The fingerprints (``inputs``) of a recorded night's block for ``section``: the night's
    own, and for a night that trained several blocks, that block's (its row's summary is the
    night's, whose ``inputs`` is empty)."""
    try:
        data = json.loads(summary or "{}")
    except ValueError:
        return set()
    if not isinstance(data, dict):
        return set()
    out = {data.get("inputs") or ""}
    for b in data.get("blocks") or []:
        if isinstance(b, dict) and b.get("section") == section and b.get("inputs"):
            out.add(b["inputs"])
    return out - {""}


def _screened(e: Edit) -> str:
    """Why the poisoning screen refuses the text ``e`` would write ("" when it passes): an
    add's or replace's rule, a describe's description (a delete writes nothing)."""
    return "" if e.op == "delete" else screen.reason(e.text)


#: content words a merged rule may bring that none of the merged rules had (connectives of a
#: rewording: "and", "both", "always" …), at most, and as a share of its words
NEW_WORDS_MAX, NEW_WORDS_SHARE = 2, 0.5
_WORD = re.compile(r"[^\W\d_]{4,}")


def _new_in_merge(rules: list[str], merged: list[str], turned_down: Sequence[str] = ()) -> str:
    """The first rule of ``merged`` that is no merge or rewording of ``rules`` ("" when there
    is none): more rules than before, a rule the night turned down (``turned_down``: texts
    of edits the gate rejected or the screen flagged) that is none of ``rules``, a code span
    (command, value) none of ``rules`` has, or more new content words than a rewording needs
    (:data:`NEW_WORDS_MAX`)."""
    if len(merged) > len(rules):
        return f"{len(merged)} rules from {len(rules)}"
    for m in merged:
        if any(same_rule(m, t) for t in turned_down if t) and not any(
            same_rule(m, r) for r in rules
        ):
            return f"{m} (turned down earlier this night)"
    spans = {x.lower() for r in rules for x in code_spans(r)}
    words = {w.lower() for r in rules for w in _WORD.findall(r)}
    for m in merged:
        new_spans = [x for x in code_spans(m) if x.lower() not in spans]
        if new_spans:
            return f"{m} (`{new_spans[0]}` is in no rule it merges)"
        own = {w.lower() for w in _WORD.findall(m)}
        new = own - words
        if len(new) > NEW_WORDS_MAX or (len(new) > 1 and len(new) / len(own) > NEW_WORDS_SHARE):
            return f"{m} (new words: {', '.join(sorted(new)[:5])})"
    return ""


def _lost_spans(rules: list[str], merged: list[str]) -> list[str]:
    """Code spans (backticked commands and values) of ``rules`` that no rule of ``merged``
    still holds, compared ignoring case (a merge may rewrite, not forget)."""
    kept = {x.lower() for r in merged for x in code_spans(r)}
    return sorted({x for r in rules for x in code_spans(r) if x.lower() not in kept})


def user_refusals(
    store: Store, target_path: str, section: str | None = None
) -> list[dict[str, str]]:
    """Edits of proposals for ``target_path`` (its block for ``section``: a refusal made on
    one project's block does not hold for another's) the user rejected or rolled back, as
    the reflect prompt's ``user_refused_edits``: ``{"edit": Edit.describe(), "reason": …,
    "proposal": id}``, newest first, deduplicated, at most :data:`REMEMBERED_REJECTIONS`."""
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for r in store.edits.refused_for(target_path, section):
        said = Edit(op=r.op, text=r.text, old=r.old).describe()
        if said in seen:
            continue
        seen.add(said)
        why = r.reason or ("rolled back by the user" if r.status == "rolled_back" else "")
        out.append({"edit": said, "reason": why, "proposal": r.proposal_id})
        if len(out) >= REMEMBERED_REJECTIONS:
            break
    return out


def _averaged(samples: list[Scored]) -> Scored:
    """Sample 0 of a task, scored by the mean of all its samples."""
    return dataclasses.replace(samples[0], score=sum(sc.score for sc in samples) / len(samples))


def _shorter(candidate: list[str], rules: list[str]) -> bool:
    """Whether ``candidate``'s managed block is shorter (in characters) than ``rules``'."""
    return sum(len(r) + 3 for r in candidate) < sum(len(r) + 3 for r in rules)
