"""Every agent the user uses gets the learning: a copy of a night's rules per agent.

A night trains one document (``document.agent``'s) through one backend. Its tasks may come
from several agents' sessions (the user asks Claude Code and Codex the same thing). For each
other such agent, :func:`certify_copies` builds that agent's own document — its user-level
memory file (the project's block when the night trained one) or its managed skill — with the
night's rules, replays the held-out tasks (the test split; val when there is no test split)
through *that agent's* backend with its document placed where that agent finds it, once as it
is and once with the rules, and stages a proposal of its own (``p<n>-<agent>``, named after the night's proposal) only when
the rules strictly raise the mean and make no task worse. What it did per agent is an
:class:`~skillopt_sleep.results.AgentCopy`, listed in the night's summary and the report.

Which backend certifies an agent's copy: ``deliver.backends.<agent>``; else the night's target
when it is a model API (the copy framed as that agent frames it); else the agent's own CLI as
the user runs it, when it is on ``PATH``. A copy that cannot be certified is not staged, and
the reason says why (never staged uncertified).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_sleep import agents
from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends.base import Backend
from skillopt_sleep.config import BackendConfig, DocumentConfig, Settings
from skillopt_sleep.delivery.document import (
    Document,
    Edit,
    apply_describe,
    apply_edit,
    delivery_cost,
    read_live,
    resolve_target,
    sha256_text,
)
from skillopt_sleep.delivery.where import Where, where_loaded
from skillopt_sleep.errors import BudgetExceeded, NightError, SkilloptError, one_line
from skillopt_sleep.mining.split import task_of
from skillopt_sleep.models import Task
from skillopt_sleep.night.context import NightContext
from skillopt_sleep.night.replay import mean
from skillopt_sleep.night.stage import Staging, stage_proposal
from skillopt_sleep.night.train import Trainer
from skillopt_sleep.results import AgentCopy, Delivery, NightCost, NightSummary, Scores
from skillopt_sleep.store import Store

Say = Callable[[str], None]
#: a copy's certification: mean before, mean after, tasks made worse, and per split
#: (``val`` / ``test``) its mean before, after and number of tasks
Certified = tuple[
    float | None, float | None, int, dict[str, tuple[float | None, float | None, int]]
]
#: the phases a copy's certification replays are recorded under (rollouts.phase)
BEFORE, AFTER = "certify before {agent}", "certify after {agent}"


def session_agents(store: Store, tasks: list[Task]) -> list[str]:
    """The agents whose sessions ``tasks`` recur in, in registry order (canonical names).
    Sessions no longer stored, or of an unknown source, are left out."""
    seen: set[str] = set()
    for t in tasks:
        for sid in t.sessions:
            row = store.sessions.get(sid)
            if row is None:
                continue
            try:
                seen.add(agents.agent_of_source(row.source).name)
            except SkilloptError:
                continue
    return [a.name for a in agents.AGENTS if a.name in seen]


def agent_tasks(store: Store, tasks: list[Task], agent: str) -> set[str]:
    """The ids of ``tasks`` some occurrence of which the user asked ``agent`` (its sessions'
    source), by the task of each view (a view's id names its task)."""
    out: set[str] = set()
    for t in tasks:
        sessions = [o.session_id for o in t.occurrences] or list(t.sessions)
        for sid in sessions:
            row = store.sessions.get(sid)
            try:
                if row is not None and agents.agent_of_source(row.source).name == agent:
                    out.add(task_of(t.id))
                    break
            except SkilloptError:
                continue
    return out


def held_out_for(store: Store, job: CopyJob, agent: str) -> tuple[list[Task], str, int]:
    """What ``agent``'s copy is certified on: for every task of the block the user asked
    that agent (:func:`agent_tasks`), its val view where it has one, else its test view.
    Returns (the views, the splits they are, as ``val`` / ``test`` / ``val+test``, how many of
    the agent's tasks have neither: asked once, never held out)."""
    mine = agent_tasks(store, job.tasks, agent)
    by_task: dict[str, dict[str, Task]] = {}
    for v in job.views:
        by_task.setdefault(task_of(v.id), {}).setdefault(v.split, v)
    chosen = [
        (by_task.get(tid) or {}).get("val") or (by_task.get(tid) or {}).get("test")
        for tid in sorted(mine)
    ]
    views = [v for v in chosen if v is not None]
    splits = [x for x in ("val", "test") if any(v.split == x for v in views)]
    return views, "+".join(splits), len(chosen) - len(views)


def copy_rules(
    base_rules: list[str], rules: list[str], theirs: list[str], edits: list[Edit]
) -> list[str]:
    """The rules of another agent's copy: the night's ``rules`` when that agent's block held
    the same rules as the night's document did (``base_rules``); otherwise the night's applied
    edits (not its consolidations) replayed onto ``theirs``, those that no longer apply left
    out."""
    if theirs == base_rules:
        return list(rules)
    out = list(theirs)
    for e in edits:
        if e.status != "applied" or e.origin == "consolidate":
            continue
        applied = apply_edit(out, Edit(op=e.op, text=e.text, old=e.old))
        if applied is not None:
            out = applied
    return out


def backend_for(
    s: Settings,
    agent: agents.Agent,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> tuple[BackendConfig | None, str]:
    """The backend config that certifies ``agent``'s copy, or None and why there is none:
    ``deliver.backends.<agent>``; else the night's target when it is a model API; else the
    agent's own CLI when it is installed and logged in here (one of its login files,
    :attr:`~skillopt_sleep.agents.Agent.auth_files`, is in its home folder), so a copy is never
    certified by sending the user's tasks to a service they have not set that CLI up for."""
    configured = s.deliver.backends.get(agent.name)
    if configured is not None:
        return configured, ""
    if agents.agent_of_backend(s.target.name) is None:  # a model API: frame as the agent does
        return s.target, ""
    fix = f"set deliver.backends.{agent.name} to certify its copy"
    if agent.backend is None:
        return None, f"{agent.name} has no CLI to replay through; {fix}"
    agent_home = agent.home(env, home)
    if agent.auth_files and not any((agent_home / f).is_file() for f in agent.auth_files):
        return None, (
            f"{agent.name}'s CLI is not set up here (none of {', '.join(agent.auth_files)} in "
            f"{agent_home}); {fix}"
        )
    cfg = BackendConfig(name=agent.backend)
    try:
        get_backend(cfg).check()  # an exec backend: its CLI is found and can start
    except SkilloptError as exc:
        return None, f"{agent.name}'s CLI cannot run ({one_line(str(exc))}); {fix}"
    return cfg, ""


@dataclass(frozen=True)
class CopyJob:
    """What the other agents' copies of one block's rules are made from: the night's document
    belongs to ``primary_agent``; its proposal is ``proposal_id`` (None: the rules are the live
    document's, no proposal staged tonight); ``kind``: ``memory`` or ``managed_skill``;
    ``section``: the project block (None: the global block); ``base_rules``: the block's rules
    as the night found them, ``rules`` as certified, ``edits`` the night's; ``tasks``: the
    block's tasks (whose sessions name the agents); ``views``: the block's held-out views
    (val and test), from which each agent's copy takes those of its own tasks
    (:func:`held_out_for`)."""

    primary_agent: str
    proposal_id: str | None
    kind: str
    section: str | None
    base_rules: list[str]
    rules: list[str]
    edits: list[Edit]
    tasks: list[Task]
    views: list[Task]


@dataclass
class _Draft:
    """An agent's copy as built, before it is certified: its target, where the agent loads
    it, the live text and document, and the copy's rules and document."""

    agent: agents.Agent
    target: Path
    where: Where
    live: str | None
    doc: Document
    rules: list[str]
    trained: Document

    @property
    def new_text(self) -> str:
        return self.trained.render(self.rules)


def certify_copies(ctx: NightContext, job: CopyJob, optimizer: Backend) -> list[AgentCopy]:
    """Certify and stage a copy of ``job``'s rules for every other agent whose sessions its
    tasks came from (config ``deliver``); returns what was done per agent, in registry order.
    ``optimizer``: the night's optimizer backend (judges rubric items). Replays and their
    model calls count toward the night's cost and its budget. Raises nothing for a copy that
    cannot be certified (its :class:`AgentCopy` says why); BudgetExceeded ends the remaining
    copies, each saying so."""
    s = ctx.settings
    if s.deliver.agents != "sessions" or job.kind not in ("memory", "managed_skill"):
        return []
    others = [a for a in session_agents(ctx.store, job.tasks) if a != job.primary_agent]
    out: list[AgentCopy] = []
    budget_note = ""
    for name in others:
        if budget_note:
            out.append(AgentCopy(agent=name, status="not_staged", reason=budget_note))
            continue
        copy = _one_copy(ctx, job, agents.get_agent(name), optimizer)
        if copy.reason.startswith("stopped: "):
            budget_note = copy.reason
        out.append(copy)
        ctx.say(
            f"{name}: {copy.status.replace('_', ' ')}"
            + (f" ({copy.reason})" if copy.reason else "")
        )
    return out


def _one_copy(
    ctx: NightContext, job: CopyJob, agent: agents.Agent, optimizer: Backend
) -> AgentCopy:
    """One agent's copy: built, certified through that agent's backend on that agent's own
    tasks, staged."""
    draft = _draft(ctx, job, agent)
    if isinstance(draft, AgentCopy):
        return draft
    held_out, split, never = held_out_for(ctx.store, job, agent.name)
    if not held_out:
        return AgentCopy(
            agent=agent.name,
            status="not_staged",
            target=str(draft.target),
            reason=f"none of the {never} task(s) asked in {agent.name} was asked again "
            "(nothing held out to certify its copy on); it is certified once one is",
        )
    cfg, why = backend_for(ctx.settings, agent, ctx.env, ctx.home)
    if cfg is None:
        return AgentCopy(
            agent=agent.name, status="not_staged", target=str(draft.target), reason=why
        )
    delivery = Delivery.model_validate(
        delivery_cost(
            draft.target, draft.new_text, draft.rules, ctx.settings.document.max_tokens, job.section
        )
        | {"agent": agent.name}
    )
    base = {
        "agent": agent.name,
        "target": str(draft.target),
        "backend": cfg.name,
        "certified_on": split,
        "tasks": len(held_out),
        "delivery": delivery,
    }
    spent = ctx.cost.as_dict()
    scored = _certify(ctx, draft, cfg, optimizer, held_out, split, job.section)
    if isinstance(scored, str):
        return AgentCopy(**base, status="not_staged", reason=scored)
    mb, ma, worse, by_split = scored
    base |= {"before": mb, "after": ma}
    if worse:
        return AgentCopy(
            **base,
            status="not_staged",
            reason=f"{worse} of {agent.name}'s {split} task(s) got worse",
        )
    if not (ma is not None and mb is not None and ma > mb):
        return AgentCopy(
            **base,
            status="not_staged",
            reason=f"no gain through {cfg.name} ({_fmt(mb)} → {_fmt(ma)})",
        )
    return _stage_copy(ctx, job, draft, cfg.name, base, spent, by_split)


def _draft(ctx: NightContext, job: CopyJob, agent: agents.Agent) -> _Draft | AgentCopy:
    """``agent``'s copy of ``job``'s rules, or why there is none (an :class:`AgentCopy` not
    staged): no such document for the agent, a file it does not load, a file that cannot be
    read, a copy that changes nothing, or a document the user refused before."""
    name, kind = agent.name, job.kind
    nope = {"agent": name, "status": "not_staged"}
    s = ctx.settings
    try:
        target = resolve_target(
            DocumentConfig(kind=kind, agent=name, max_tokens=s.document.max_tokens),
            s.project,
            env=ctx.env,
            home=ctx.home,
        )
    except (NightError, ValueError) as exc:
        return AgentCopy(**nope, reason=f"no {kind} document for {name}: {one_line(str(exc))}")
    where = where_loaded(target, agent=name, project=s.project, env=ctx.env, home=ctx.home)
    if where is None:
        return AgentCopy(**nope, target=str(target), reason=f"{name} does not load {target}")
    try:
        live = read_live(target)
        doc = Document.parse(live, new_skill=kind == "managed_skill", section=job.section)
    except SkilloptError as exc:
        return AgentCopy(**nope, target=str(target), reason=one_line(str(exc)))
    theirs = copy_rules(job.base_rules, job.rules, doc.rules, job.edits)
    trained = doc  # a skill copy also takes the night's trained description
    for e in job.edits:
        if e.status == "applied" and e.op == "describe":
            trained = apply_describe(trained, Edit(op="describe", text=e.text)) or trained
    draft = _Draft(agent, target, where, live, doc, theirs, trained)
    if draft.new_text == doc.render() or draft.new_text == (live or ""):
        return AgentCopy(
            **nope, target=str(target), reason=f"{name}'s document already has these rules"
        )
    refused = ctx.store.proposals.refused(str(target), sha256_text(draft.new_text))
    if refused is not None:
        how = "rejected" if refused.status == "rejected" else "rolled back"
        return AgentCopy(
            **nope,
            target=str(target),
            reason=f"the same document as proposal {refused.id}, which the user {how}",
        )
    return draft


def _certify(
    ctx: NightContext,
    draft: _Draft,
    cfg: BackendConfig,
    optimizer: Backend,
    held_out: list[Task],
    split: str,
    section: str | None,
) -> Certified | str:
    """Replay ``held_out`` through ``cfg`` with the agent's document as it is and with the
    copy: (mean before, mean after, tasks made worse, the means per split), or why it
    could not."""
    name = draft.agent.name
    try:
        backend = get_backend(cfg)
        backend.check()
    except SkilloptError as exc:
        return f"{cfg.name}: {one_line(str(exc))}"
    ctx.say(
        f"certifying {name}'s copy through {cfg.name} on {len(held_out)} of its own {split} task(s)"
    )
    trainer = Trainer(ctx, backend, optimizer, place=draft.where.place, section=section)
    try:
        before = trainer.replay(
            held_out, draft.doc, draft.doc.rules, split, BEFORE.format(agent=name)
        )
        after = trainer.replay(
            held_out, draft.trained, draft.rules, split, AFTER.format(agent=name)
        )
    except BudgetExceeded as exc:
        return f"stopped: {exc}"
    except SkilloptError as exc:
        return f"{cfg.name}: {one_line(str(exc))}"
    worse = sum(1 for tid in before if after[tid].score < before[tid].score)
    by_split: dict[str, tuple[float | None, float | None, int]] = {
        x: (
            mean({t.id: before[t.id] for t in held_out if t.split == x}),
            mean({t.id: after[t.id] for t in held_out if t.split == x}),
            sum(1 for t in held_out if t.split == x),
        )
        for x in split.split("+")
    }
    return mean(before), mean(after), worse, by_split


def _stage_copy(
    ctx: NightContext,
    job: CopyJob,
    draft: _Draft,
    backend: str,
    base: dict[str, Any],
    spent: dict[str, Any],
    by_split: dict[str, tuple[float | None, float | None, int]],
) -> AgentCopy:
    """Stage a certified copy (``base``: its :class:`AgentCopy` fields so far; ``spent``: the
    night's cost before its certification), or name the staged proposal that already says
    the same."""
    store, name, pid_of = ctx.store, draft.agent.name, job.proposal_id
    base_hash, new_hash = sha256_text(draft.live), sha256_text(draft.new_text)
    # named after the night's own proposal while it is reserved but not staged yet (p4 and
    # p4-codex); a night that stages only copies gives each the next number (p5-codex)
    own = pid_of is not None and store.proposals.get(pid_of) is None
    pid = f"{pid_of}-{name}" if own else f"{store.proposals.next_id(after=pid_of)}-{name}"
    same = [
        p
        for p in store.proposals.staged(str(draft.target))
        if p.base_hash == base_hash and p.new_hash == new_hash
    ]
    if same:
        return AgentCopy(
            **base,
            status="same",
            proposal_id=same[0].id,
            reason=f"same document as the staged proposal {same[0].id}",
        )
    split, n = base["certified_on"], base["tasks"]
    vb, va, nv = by_split.get("val", (None, None, 0))
    tb, ta, nt = by_split.get("test", (None, None, 0))
    summary = NightSummary(
        tasks=len(job.tasks),
        scorable=len(job.tasks),
        test=nt,
        val=nv,
        rules_before=len(draft.doc.rules),
        rules_after=len(draft.rules),
        base_hash=base_hash,
        section=job.section,
        delivery=base["delivery"],
        copy_for=name,
        copy_of=pid_of,
        reason=(
            f"the rules of {pid_of or 'the live ' + job.primary_agent + ' document'}, "
            f"certified through {backend} on {n} held-out {split} task(s) of {name}'s own"
        ),
    )
    stage_proposal(
        store,
        Staging(
            proposal_id=pid,
            delivered=draft.where.describe(),
            night_id=ctx.night_id,
            target_path=draft.target,
            base_text=draft.live,
            new_text=draft.new_text,
            base_hash=base_hash,
            edits=[e for e in job.edits if e.status == "applied"],
            tasks=job.tasks,
            cost=NightCost.model_validate({k: v - spent[k] for k, v in ctx.cost.as_dict().items()}),
            summary=summary,
            scores=Scores(val_before=vb, val_after=va, test_before=tb, test_after=ta),
            held_out=(split, BEFORE.format(agent=name), AFTER.format(agent=name)),
            agent=name,
            kind=job.kind,
        ),
    )
    return AgentCopy(**base, status="staged", proposal_id=pid)


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"
