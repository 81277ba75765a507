"""Replay: run tasks through the target backend with a candidate document, cached.

* :class:`Meter` wraps a backend: counts calls / cached calls / tokens / seconds, enforces the
  per-night caps (raises :class:`~skillopt_sleep.errors.BudgetExceeded`), and serves repeated
  requests from the store's ``rollout_cache`` (key: sha256 of backend name, model, base URL,
  system text, prompt and tools), so an unchanged re-run of a night makes zero model calls.
  Thread-safe: the meters of a night share one :class:`Cost` (and its lock); the cache is
  written through the store's one writer lock; a request already in flight in another
  worker is waited for and then served from the cache, never sent twice.
* :class:`Replayer` scores (task, document) pairs on ``workers`` threads: the tasks of one
  replay, or the val replays of several candidate documents at once (:meth:`Replayer.run_many`);
  a task's target call and its judge call are two jobs of the pool, the judge call queued
  behind the target calls asked before it (no worker idles while a call could be made).
  Results are assembled in the order asked, whatever order the workers finish in, and a
  failure is raised as reading them in that order would.
* :meth:`Replayer._one` runs a task's rule checks (hard score, 0..1; :func:`judge_answer`)
  and, when a rubric and a judge are available, the rubric (soft score, 0..1). The replay
  carries the task's context capsule (``CompletionRequest.context``: the files and outputs
  its occurrence's agent saw); a task whose context cannot be rebuilt is replayed without
  it and scored only on the checks that do not need it (:func:`context_state`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from skillopt_sleep.backends.base import Backend, states_folder
from skillopt_sleep.errors import BackendResponseError, BudgetExceeded
from skillopt_sleep.mining.judges import judge_answer
from skillopt_sleep.models import (
    Acts,
    Completion,
    CompletionRequest,
    Placement,
    Task,
    Usage,
    workdir_name,
)
from skillopt_sleep.night import prompts
from skillopt_sleep.redact import redact
from skillopt_sleep.store import CachedResponse, Store, now_iso

#: how long a failed or interrupted batch waits for its other workers' calls to end (s)
WORKER_DRAIN_SECONDS = 5.0


@dataclass
class Cost:
    """What a night's model calls cost. ``lock`` guards the counters (every meter of the night
    updates the same Cost from its worker threads)."""

    calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "lock"}


class Meter:
    """A caching, budgeted view of one backend. Thread-safe."""

    def __init__(
        self,
        backend: Backend,
        store: Store,
        cost: Cost,
        *,
        max_calls: int,
        max_tokens: int,
        role: str,
        outbox_days: int = 14,
    ):
        self.backend, self.store, self.cost = backend, store, cost
        self.max_calls, self.max_tokens, self.role = max_calls, max_tokens, role
        #: days the outbox keeps what each call sent (``privacy.outbox_days``)
        self.outbox_days = outbox_days
        self._expired = False
        #: requests being answered now: key -> set when the answer is in the cache (or failed)
        self._inflight: dict[str, threading.Event] = {}

    def key(self, req: CompletionRequest) -> str:
        cfg = self.backend.config
        blob = json.dumps(
            [
                cfg.name,
                req.model or cfg.model,
                cfg.base_url or "",
                req.system,
                req.prompt,
                sorted(req.tools),
                req.max_tokens,
                # only when set, so calls without a placement keep their cached answers
                *([req.placement.model_dump()] if req.placement else []),
                # a skill's replays: answered since the backend lets the agent load the skill
                # and reports it (older cached answers could not load it, or did not say)
                *(
                    [self.backend.skill_replays]
                    if req.placement and req.placement.mode == "skill"
                    else []
                ),
                # the replayed occurrence's context, only when it has some
                *([req.context.model_dump()] if req.context and req.context.items else []),
                # the folder an agent CLI works in (its name reaches the model), only when
                # the backend runs in one
                # and an HTTP replay states the project it was asked in
                *(
                    [f"workdir:{workdir_name(req.workdir)}"]
                    if req.workdir and self.backend.works_in_folder
                    else [f"project:{req.workdir}"]
                    if states_folder(req)
                    else []
                ),
                # a dream rollout's sample index, only past the first (K=1 keys unchanged)
                *([f"sample:{req.sample}"] if req.sample else []),
                # the sampling temperature, only when not the default 0 (keys unchanged):
                # an answer sampled at one temperature is no answer at another
                *([f"temperature:{cfg.temperature}"] if cfg.temperature != 0.0 else []),
            ],
            ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def complete(self, req: CompletionRequest) -> tuple[Completion, bool]:
        """Return ``(completion, cached)``."""
        key = self.key(req)
        while True:
            hit = self.store.cache.get(key)
            if hit:
                with self.cost.lock:
                    self.cost.cached_calls += 1
                return (
                    Completion(
                        text=hit.text,
                        tool_calls=json.loads(hit.tool_calls or "[]"),
                        usage=Usage(input_tokens=hit.input_tokens, output_tokens=hit.output_tokens),
                        seconds=hit.seconds,
                        acts=Acts.model_validate_json(hit.acts) if hit.acts else Acts(),
                    ),
                    True,
                )
            with self.cost.lock:
                pending = self._inflight.get(key)
                if pending is None:
                    if self.cost.calls >= self.max_calls:
                        raise BudgetExceeded(
                            f"per-night cap of {self.max_calls} model calls reached"
                        )
                    spent = self.cost.input_tokens + self.cost.output_tokens
                    if spent >= self.max_tokens:
                        raise BudgetExceeded(f"per-night cap of {self.max_tokens} tokens reached")
                    self.cost.calls += 1
                    self._inflight[key] = done = threading.Event()
            if pending is None:
                break
            # the same request is in flight in another worker: its answer will be in the
            # cache (if it fails, this worker sends the request itself)
            pending.wait()
        sent = self._outbox_row(req)
        try:
            started = time.monotonic()
            try:
                comp = self.backend.complete(req)
            except Exception as exc:
                self._post(sent, f"error:{type(exc).__name__}", 0)
                raise
            self._post(sent, "ok", len(comp.text))
            elapsed = comp.seconds or (time.monotonic() - started)
            with self.cost.lock:
                self.cost.input_tokens += comp.usage.input_tokens
                self.cost.output_tokens += comp.usage.output_tokens
                self.cost.seconds += elapsed
            self.store.cache.put(
                key,
                CachedResponse(
                    text=comp.text,
                    tool_calls=json.dumps(comp.tool_calls),
                    input_tokens=comp.usage.input_tokens,
                    output_tokens=comp.usage.output_tokens,
                    seconds=elapsed,
                    acts=comp.acts.model_dump_json() if comp.acts else "",
                ),
            )
        finally:
            with self.cost.lock:
                del self._inflight[key]
            done.set()
        return comp, False

    def _outbox_row(self, req: CompletionRequest) -> dict[str, Any]:
        """What the outbox records of one call about to be sent (:mod:`..store.outbox`)."""
        from urllib.parse import urlparse

        cfg = self.backend.config
        parts = [req.system, req.prompt]
        if req.placement is not None:
            parts.append(f"[{req.placement.path}]\n{req.placement.text}")
        text = "\n\n".join(p for p in parts if p)
        return {
            "at": now_iso(),
            "role": self.role,
            "purpose": req.purpose,
            "backend": cfg.name,
            "model": req.model or cfg.model,
            "endpoint": (urlparse(cfg.base_url).hostname or "") if cfg.base_url else "",
            "chars": len(text),
            "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
            "prompt": text if self.outbox_days > 0 else "",
        }

    def _post(self, row: dict[str, Any], status: str, response_chars: int) -> None:
        """Record one outbound call (and, once per meter, expire old kept texts)."""
        self.store.outbox.record({**row, "status": status, "response_chars": response_chars})
        if not self._expired:
            self._expired = True
            self.store.outbox.expire(self.outbox_days)


@dataclass
class Scored:
    """One scored rollout. ``score`` is what the gate compares (0..1)."""

    task_id: str
    answer: str
    tool_calls: list[str]
    hard: float | None
    soft: float | None
    score: float
    checks: list[dict[str, Any]] = field(default_factory=list)
    cached: bool = False
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    #: a skill replay: whether the agent loaded the skill (None: not a skill, or the backend
    #: cannot tell; see :meth:`~skillopt_sleep.backends.base.Backend.skill_loaded`)
    skill_loaded: bool | None = None
    #: what the agent did with its tools, as shown after its text (``Acts.shown``; "" when
    #: it only answered)
    acts: str = ""


def combine(hard: float | None, soft: float | None, metric: str) -> float:
    if metric == "hard":
        return hard if hard is not None else (soft if soft is not None else 0.0)
    if metric == "soft":
        return soft if soft is not None else (hard if hard is not None else 0.0)
    parts = [x for x in (hard, soft) if x is not None]
    return sum(parts) / len(parts) if parts else 0.0


def rubric_score(judge: Meter, request: str, rubric: str, answer: str) -> float | None:
    """The judge's score of ``answer`` against ``rubric`` (0..1; None: it gave none, or no
    JSON object — cached as it is, so a later night gets the same None, not a failure)."""
    req = CompletionRequest(
        prompt=prompts.judge_prompt(task=request, rubric=rubric, answer=answer),
        purpose="judge",
        max_tokens=200,
    )
    comp, _ = judge.complete(req)
    try:
        score = prompts.extract_json(comp.text, backend=judge.backend.name).get("score")
    except BackendResponseError:  # prose, no score: the rubric says nothing of this answer
        return None
    try:
        return min(1.0, max(0.0, float(score))) if score is not None else None
    except (TypeError, ValueError):
        return None


class Replayer:
    """Replays tasks against a document through the target meter; scores with the judge meter."""

    def __init__(
        self,
        target: Meter,
        judge: Meter | None,
        *,
        metric: str,
        workers: int = 1,
        on_rollout: Callable[[Scored], None] | None = None,
        place: Callable[[str], Placement | None] | None = None,
    ):
        self.target, self.judge, self.metric = target, judge, metric
        self.workers = max(1, workers)
        self.on_rollout = on_rollout
        #: ``document -> Placement``: where a replay puts the candidate (None: as system text)
        self.place = place

    def _one(self, task: Task, document: str, sample: int = 0) -> Scored:
        return self._score(*self._answer(task, document, sample))

    def _answer(
        self, task: Task, document: str, sample: int = 0
    ) -> tuple[Task, Placement | None, Completion, bool]:
        """A task's target call (the first half of :meth:`_one`); ``sample``: the dream
        rollout's sample index."""
        placement = self.place(document) if self.place else None
        req = CompletionRequest(
            system="" if placement else document,
            prompt=task.intent,
            tools=list(task.tools),
            purpose="target",
            max_tokens=self.target.backend.config.max_tokens,
            placement=placement,
            context=task.context if task.context and task.context.items else None,
            sample=sample,
            workdir=task.project or "",
        )
        comp, cached = self.target.complete(req)
        return task, placement, comp, cached

    def _score(
        self, task: Task, placement: Placement | None, comp: Completion, cached: bool
    ) -> Scored:
        """A task's checks and judge call on its target's answer (the second half of
        :meth:`_one`)."""
        # a broken answer (empty, a bare word, code cut off or not parsing) is no answer,
        # whatever its checks say: scored 0, each fault shown as a failed check; each check
        # judges the artifact the task asks for (a commit message's subject, not the sentence
        # before it)
        judged = judge_answer(task, comp.text, comp.tool_calls, acts=comp.acts)
        # the answer as graded and shown: its text, then what the agent did (the commands
        # it ran, the files it wrote as a diff, what was stopped)
        shown = "\n\n".join(x for x in (comp.text, comp.acts.shown()) if x)
        faults = judged.faults
        results: list[dict[str, Any]] = [
            {"kind": "whole", "value": f.kind, "evidence": f.why, "passed": False} for f in faults
        ]
        results += [
            {"kind": c.kind, "value": c.value, "evidence": c.evidence, "passed": ok}
            for c, ok in judged.results
        ]
        hard = sum(r["passed"] for r in results) / len(results) if results else None
        soft = None
        if faults:
            hard = 0.0
        elif self.judge is not None and task.rubric and not task.judge.startswith("invalid"):
            soft = rubric_score(self.judge, task.intent, task.rubric, shown)
        scored = Scored(
            task_id=task.id,
            answer=redact(shown),
            acts=redact(comp.acts.shown()),
            tool_calls=comp.tool_calls,
            hard=hard,
            soft=soft,
            score=0.0 if faults else combine(hard, soft, self.metric),
            checks=results,
            cached=cached,
            usage=comp.usage,
            seconds=comp.seconds,
            skill_loaded=(
                self.target.backend.skill_loaded(comp)
                if placement and placement.mode == "skill"
                else None
            ),
        )
        if self.on_rollout:
            self.on_rollout(scored)
        return scored

    def run(self, tasks: list[Task], document: str, sample: int = 0) -> dict[str, Scored]:
        """Score every task against ``document``; returns ``{task_id: Scored}``. ``sample``:
        the dream rollout's sample index (0: the night's one sample)."""
        return self.run_many([(tasks, document)], samples=[sample])[0]

    def run_many(
        self, jobs: list[tuple[list[Task], str]], samples: list[int] | None = None
    ) -> list[dict[str, Scored]]:
        """Score each job's tasks against its document, all pairs on the same ``workers``
        threads; returns one ``{task_id: Scored}`` per job, in the order of ``jobs`` and of
        their tasks (never in the order the workers finished). ``samples``: each job's
        sample index (default: 0 for all)."""
        at_sample = samples or [0] * len(jobs)
        pairs = [
            (t, doc, k) for (tasks, doc), k in zip(jobs, at_sample, strict=True) for t in tasks
        ]
        if self.workers == 1 or len(pairs) <= 1:
            results = [self._one(t, doc, k) for t, doc, k in pairs]
        else:
            pool = ThreadPoolExecutor(max_workers=self.workers)
            # each pair is two jobs of the pool, its target call then its checks and judge
            # call: the judge call queues behind the target calls asked before it, so no
            # worker waits while a call could be made (10 rubric tasks on 8 workers: three
            # rounds of calls, not four)
            stage: dict[Future[Any], tuple[int, bool]] = {}  # future -> (pair, answered)
            futures: list[Future[Any]] = []
            try:
                for i, (t, doc, k) in enumerate(pairs):
                    asked: Future[Any] = pool.submit(self._answer, t, doc, k)
                    stage[asked] = (i, False)
                    futures.append(asked)
                done_at: dict[int, Scored] = {}
                failed: dict[int, BaseException] = {}
                pending = set(futures)
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in sorted(finished, key=lambda f: stage[f][0]):
                        i, answered = stage[f]
                        exc = f.exception()
                        if exc is not None:
                            failed[i] = exc
                        elif answered:
                            done_at[i] = f.result()
                        else:
                            nxt = pool.submit(self._score, *f.result())
                            stage[nxt] = (i, True)
                            futures.append(nxt)
                            pending.add(nxt)
                    if failed:
                        # the first failure in the order asked, once every pair before it is
                        # settled (as reading the results in order would raise it)
                        first = min(failed)
                        if all(j in done_at or j in failed for j in range(first)):
                            raise failed[first]
                results = [done_at[i] for i in range(len(pairs))]
            except BaseException:
                # a failed rollout or an interrupt (Ctrl-C, SIGTERM): queued rollouts are
                # dropped and the agent CLIs the other workers wait on are killed, so nothing
                # runs on
                from skillopt_sleep.backends._exec import cancel_running

                pool.shutdown(wait=False, cancel_futures=True)
                cancel_running()
                # the workers still in a call end at once (their CLIs were killed) or within
                # a bounded wait: none may outlive the night and touch a closed store
                wait(futures, timeout=WORKER_DRAIN_SECONDS)
                raise
            pool.shutdown()
        out: list[dict[str, Scored]] = []
        at = 0
        for tasks, _doc in jobs:
            out.append({s.task_id: s for s in results[at : at + len(tasks)]})
            at += len(tasks)
        return out


def mean(scores: dict[str, Scored]) -> float:
    return sum(s.score for s in scores.values()) / len(scores) if scores else 0.0
