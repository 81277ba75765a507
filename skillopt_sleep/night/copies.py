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
from pathlib import Path

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
from skillopt_sleep.delivery.where import where_loaded
from skillopt_sleep.errors import BudgetExceeded, NightError, SkilloptError, one_line
from skillopt_sleep.models import Task
from skillopt_sleep.night.replay import Cost, mean
from skillopt_sleep.night.stage import stage_proposal
from skillopt_sleep.night.train import Trainer
from skillopt_sleep.results import AgentCopy, Delivery, NightCost, NightSummary
from skillopt_sleep.store import Store

Say = Callable[[str], None]
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
                seen.add(agents.agent_of_source(row["source"]).name)
            except SkilloptError:
                continue
    return [a.name for a in agents.AGENTS if a.name in seen]


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


def certify_copies(
    store: Store,
    s: Settings,
    night_id: int,
    *,
    primary_agent: str,
    proposal_id: str | None,
    kind: str,
    section: str | None,
    base_rules: list[str],
    rules: list[str],
    edits: list[Edit],
    tasks: list[Task],
    held_out: list[Task],
    certified_on: str,
    optimizer: Backend,
    cost: Cost,
    say: Say,
    env: Mapping[str, str] | None,
    home: Path | None,
) -> list[AgentCopy]:
    """Certify and stage a copy of the night's ``rules`` for every other agent whose sessions
    ``tasks`` came from (config ``deliver``); returns what was done per agent, in registry
    order. ``kind``: ``memory`` or ``managed_skill`` (other kinds have no per-agent copy).
    ``held_out``: the tasks the copies are certified on (``certified_on``: ``test`` or
    ``val``). ``optimizer``: the night's optimizer backend (judges rubric items). Replays and
    their model calls count toward the night's ``cost`` and its budget. Raises nothing for a
    copy that cannot be certified (its :class:`AgentCopy` says why); BudgetExceeded ends the
    remaining copies, each saying so."""
    if s.deliver.agents != "sessions" or kind not in ("memory", "managed_skill"):
        return []
    others = [a for a in session_agents(store, tasks) if a != primary_agent]
    out: list[AgentCopy] = []
    budget_note = ""
    for name in others:
        agent = agents.get_agent(name)
        if budget_note:
            out.append(AgentCopy(agent=name, status="not_staged", reason=budget_note))
            continue
        copy = _one_copy(
            store,
            s,
            night_id,
            agent,
            proposal_id=proposal_id,
            kind=kind,
            section=section,
            base_rules=base_rules,
            rules=rules,
            edits=edits,
            tasks=tasks,
            held_out=held_out,
            certified_on=certified_on,
            optimizer=optimizer,
            cost=cost,
            say=say,
            env=env,
            home=home,
            stage=stage_proposal,
            primary_agent=primary_agent,
        )
        if copy.reason.startswith("stopped: "):
            budget_note = copy.reason
        out.append(copy)
        say(
            f"{name}: {copy.status.replace('_', ' ')}"
            + (f" ({copy.reason})" if copy.reason else "")
        )
    return out


def _one_copy(
    store: Store,
    s: Settings,
    night_id: int,
    agent: agents.Agent,
    *,
    proposal_id: str | None,
    kind: str,
    section: str | None,
    base_rules: list[str],
    rules: list[str],
    edits: list[Edit],
    tasks: list[Task],
    held_out: list[Task],
    certified_on: str,
    optimizer: Backend,
    cost: Cost,
    say: Say,
    env: Mapping[str, str] | None,
    home: Path | None,
    stage: Callable[..., str],
    primary_agent: str,
) -> AgentCopy:
    name = agent.name
    nope = {"agent": name, "status": "not_staged"}
    try:
        target = resolve_target(
            DocumentConfig(kind=kind, agent=name, max_tokens=s.document.max_tokens),
            s.project,
            env=env,
            home=home,
        )
    except (NightError, ValueError) as exc:
        return AgentCopy(**nope, reason=f"no {kind} document for {name}: {one_line(str(exc))}")
    where = where_loaded(target, agent=name, project=s.project, env=env, home=home)
    if where is None:
        return AgentCopy(**nope, target=str(target), reason=f"{name} does not load {target}")
    try:
        live = read_live(target)
        doc = Document.parse(live, new_skill=kind == "managed_skill", section=section)
    except SkilloptError as exc:
        return AgentCopy(**nope, target=str(target), reason=one_line(str(exc)))
    theirs = copy_rules(base_rules, rules, doc.rules, edits)
    trained = doc  # a skill copy also takes the night's trained description
    for e in edits:
        if e.status == "applied" and e.op == "describe":
            trained = apply_describe(trained, Edit(op="describe", text=e.text)) or trained
    new_text = trained.render(theirs)
    if new_text == doc.render() or new_text == (live or ""):
        return AgentCopy(
            **nope, target=str(target), reason=f"{name}'s document already has these rules"
        )
    new_hash = sha256_text(new_text)
    refused = store.proposals.refused(str(target), new_hash)
    if refused is not None:
        how = "rejected" if refused["status"] == "rejected" else "rolled back"
        return AgentCopy(
            **nope,
            target=str(target),
            reason=f"the same document as proposal {refused['id']}, which the user {how}",
        )
    cfg, why = backend_for(s, agent, env, home)
    if cfg is None:
        return AgentCopy(**nope, target=str(target), reason=why)
    delivery = Delivery.model_validate(
        delivery_cost(target, new_text, theirs, s.document.max_tokens, section) | {"agent": name}
    )
    base = {
        "agent": name,
        "target": str(target),
        "backend": cfg.name,
        "certified_on": certified_on,
        "tasks": len(held_out),
        "delivery": delivery,
    }
    try:
        backend = get_backend(cfg)
        backend.check()
    except SkilloptError as exc:
        return AgentCopy(**base, status="not_staged", reason=f"{cfg.name}: {one_line(str(exc))}")
    say(f"certifying {name}'s copy through {cfg.name} on {len(held_out)} {certified_on} task(s)")
    spent = cost.as_dict()
    trainer = Trainer(
        store,
        s,
        night_id,
        backend,
        optimizer,
        say,
        place=where.place,
        cost=cost,
    )
    trainer.section = section
    try:
        before = trainer.replay(held_out, doc, doc.rules, certified_on, BEFORE.format(agent=name))
        after = trainer.replay(held_out, trained, theirs, certified_on, AFTER.format(agent=name))
    except BudgetExceeded as exc:
        return AgentCopy(**base, status="not_staged", reason=f"stopped: {exc}")
    except SkilloptError as exc:
        return AgentCopy(**base, status="not_staged", reason=f"{cfg.name}: {one_line(str(exc))}")
    mb, ma = mean(before), mean(after)
    scored = {**base, "before": mb, "after": ma}
    worse = [tid for tid in before if after[tid].score < before[tid].score]
    if worse:
        return AgentCopy(
            **scored, status="not_staged", reason=f"{len(worse)} {certified_on} task(s) got worse"
        )
    if not (ma is not None and mb is not None and ma > mb):
        return AgentCopy(
            **scored,
            status="not_staged",
            reason=f"no gain through {cfg.name} ({_fmt(mb)} → {_fmt(ma)})",
        )
    base_hash = sha256_text(live)
    # named after the night's own proposal while it is reserved but not staged yet (p4 and
    # p4-codex); a night that stages only copies gives each the next number (p5-codex)
    own = proposal_id is not None and store.proposals.get(proposal_id) is None
    pid = f"{proposal_id}-{name}" if own else f"{store.proposals.next_id(after=proposal_id)}-{name}"
    same = [
        p
        for p in store.proposals.staged(str(target))
        if p["base_hash"] == base_hash and p["new_hash"] == new_hash
    ]
    if same:
        return AgentCopy(
            **scored,
            status="same",
            proposal_id=same[0]["id"],
            reason=f"same document as the staged proposal {same[0]['id']}",
        )
    summary = NightSummary(
        tasks=len(tasks),
        scorable=len(tasks),
        test=len(held_out) if certified_on == "test" else 0,
        val=len(held_out) if certified_on == "val" else 0,
        rules_before=len(doc.rules),
        rules_after=len(theirs),
        base_hash=base_hash,
        section=section,
        delivery=delivery,
        copy_for=name,
        copy_of=proposal_id,
        reason=(
            f"the rules of {proposal_id or 'the live ' + primary_agent + ' document'}, "
            f"certified through {cfg.name} on {len(held_out)} held-out {certified_on} task(s)"
        ),
    )
    stage(
        store,
        proposal_id=pid,
        delivered=where.describe(),
        night_id=night_id,
        target_path=target,
        base_text=live,
        new_text=new_text,
        base_hash=base_hash,
        edits=[e for e in edits if e.status == "applied"],
        tasks=tasks,
        cost=NightCost.model_validate({k: v - spent[k] for k, v in cost.as_dict().items()}),
        summary=summary,
        val_before=mb if certified_on == "val" else None,
        val_after=ma if certified_on == "val" else None,
        test_before=mb if certified_on == "test" else None,
        test_after=ma if certified_on == "test" else None,
        held_out=(certified_on, BEFORE.format(agent=name), AFTER.format(agent=name)),
        agent=name,
        kind=kind,
    )
    return AgentCopy(**scored, status="staged", proposal_id=pid)


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"
