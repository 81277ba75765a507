"""In the wild: does an adopted document help the user's real sessions after adopt?

For every adoption still in place, the sessions harvested since that ask one of the proposal's
tasks again (same project, token-set similarity of the first prompt to the task's intent ≥
``similarity``) are scored with the task's checks against the agent's real first answer, and
compared with the sessions that asked before adopt. A session counts as evidence only when
the document reached it:

* **memory** (a file the agent loads in every turn): the session is the document's agent's,
  and the adopted file is still in place and unchanged (its hash is the adoption's);
* **skill**: the transcript shows the agent loaded it (a tool call whose result names the
  skill, e.g. Claude Code's ``Skill`` → "Launching skill: skillopt-sleep-learned").

When the latest ``flag_after`` matching sessions (default 3) were all not reached, the check
is flagged with the fix. A document whose placement no agent loads by itself never
reaches anything.

Whether the document reached a session is judged once, when the session is harvested
(:func:`record_reach`, called after every harvest: the file's state then, not at a later
``status``); a session not judged yet is judged on the file's state now, without writing.
A session's correction is any later prompt of it that
:func:`skillopt_sleep.mining.corrections.classify` labels a correction, or the follow-up
right after its answer that a night's optimizer read as one (``store.readings``, as mining
reads it: the same classifier, in any language).

An answer is judged as a replay judges it (:func:`~skillopt_sleep.mining.judges.judge_answer`):
whole first, then the task's checks on the artifact it asks for. A task judged by its rubric
alone (no check) is scored by the night's rubric judge, once its judge has passed the task's
own controls (night/night.py, ``check_judges``): each night judges the first answers of the
reached sessions since adopt that no night judged yet (:func:`to_judge`), keeps the score
with the session's verdict, and such an answer passes at :data:`RUBRIC_PASS`; until judged
it counts in ``unjudged``, not in ``reached``. Its sessions before adopt are not judged and
not counted.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

from rapidfuzz import fuzz

from skillopt_sleep import agents
from skillopt_sleep.delivery.document import SKILL_NAME, Document, read_live
from skillopt_sleep.delivery.where import where_loaded
from skillopt_sleep.marks import rule_mark
from skillopt_sleep.mining.corrections import classify
from skillopt_sleep.mining.judges import judge_answer
from skillopt_sleep.mining.meaning import Reader
from skillopt_sleep.mining.mine import INTENT_CHARS
from skillopt_sleep.mining.split import task_of
from skillopt_sleep.models import Task
from skillopt_sleep.results import (
    NightSummary,
    ProposalRule,
    RuleVerdict,
    WildCheck,
    load_report_json,
)
from skillopt_sleep.store import AdoptionRow, MessageRow, ProposalRow, SessionRow, Store

#: matching sessions the document must have reached at least once before a check is flagged
FLAG_AFTER = 3
#: a rubric judge's score at which an answer of a task judged by its rubric alone passes
RUBRIC_PASS = 0.5


def _when(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _under(project: str | None, root: str | None) -> bool:
    if not project or not root:
        return project == root
    return project == root or project.startswith(root.rstrip("/") + "/")


def _first_turn(
    messages: list[MessageRow], reader: Reader | None = None
) -> tuple[str, str, list[str], bool]:
    """(first prompt, the first answer text after it, tool names used answering it, a
    later prompt corrected it). A later prompt is a correction by its words
    (:func:`~skillopt_sleep.mining.corrections.classify`) or, for the one right after the
    answer, by what a night's optimizer read in it (``reader``: the store's readings, the
    same as mining's)."""
    prompt, answer, tools, corrected = "", "", [], False
    seen_prompt = False
    turn: list[str] = []  # the answer's texts, as mining shows them to the reader
    followups = 0
    for m in messages:
        if m.is_sidechain:
            continue
        if m.kind == "prompt":
            text = (m.text or "").strip()
            if not seen_prompt:
                prompt, seen_prompt = m.text or "", True
                continue
            if not answer:
                continue
            followups += 1
            if classify(text) == "correction":
                corrected = True
            elif followups == 1 and reader is not None and text:
                read = reader.read(prompt.strip()[:INTENT_CHARS], "\n".join(turn).strip(), text)
                corrected = corrected or (read is not None and read.label == "correction")
        elif seen_prompt and m.role == "assistant":
            tools += [t for t in m.tool_names or [] if t not in tools]
            if not answer and (m.text or "").strip():
                answer = m.text or ""
            if m.text and not followups:
                turn.append(m.text)
    return prompt, answer, tools, corrected


def _skill_loaded(messages: list[MessageRow]) -> bool:
    return any(
        (m.kind == "tool" and SKILL_NAME in (m.text or ""))
        or (
            m.role == "assistant"
            and any(t.lower() == "skill" for t in m.tool_names or [])
            and SKILL_NAME in (m.text or "")
        )
        for m in messages
    )


@dataclass
class _Adopted:
    """One adoption in place, with what judging sessions against it needs: ``rules`` (the
    rules it wrote, each with its scope and the tasks it was learned from) and ``marks`` (of
    those rules: what a transcript that shows the memory it loaded must hold,
    :mod:`skillopt_sleep.marks`)."""

    row: AdoptionRow
    tasks: list[Task]
    mode: str
    owner: agents.Agent | None
    intact: bool
    since: dt.datetime | None
    rules: list[ProposalRule] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)


def _adopted(store: Store) -> list[_Adopted]:
    tasks_by_id = {t.id: t for t in store.tasks.all()}
    out = []
    for adoption in store.adoptions.in_place():
        proposal = store.proposals.get(adoption.proposal_id)
        night_id = proposal.night_id if proposal else None
        # rollouts name the occurrence they replayed (``<task id>@…``): its task
        rows = store.rollouts.of_night(night_id, None) if night_id else []
        # (not the collateral gate's probes: the user's other tasks it replayed are no task of
        # this adoption's)
        ids = {task_of(r.task_id) for r in rows if r.split in ("train", "val", "test")}
        target = Path(adoption.target_path)
        summary = NightSummary.model_validate_json((proposal.summary if proposal else None) or "{}")
        if summary.delivery is not None:  # as the night placed it (its own HOME, e.g. a demo)
            mode = summary.delivery.mode if summary.delivery.agent else "none"
            agent = summary.delivery.agent
        else:
            where = where_loaded(target, agent="claude_code")
            mode, agent = (where.mode, where.agent) if where else ("none", None)
        rules = _adopted_rules(proposal, adoption)
        out.append(
            _Adopted(
                row=adoption,
                tasks=[tasks_by_id[i] for i in sorted(ids) if i in tasks_by_id],
                mode=mode,
                owner=agents.get_agent(agent) if agent else None,
                intact=_block_in_place(target, proposal, summary.section),
                since=_when(adoption.adopted_at),
                rules=rules,
                marks=[rule_mark(r.rule) for r in rules],
            )
        )
    return out


def _adopted_rules(proposal: ProposalRow | None, adoption: AdoptionRow) -> list[ProposalRule]:
    """The rules an adoption wrote: its proposal's added rules (report.json), less those it
    left out (``adopt --rules``, refused one by one)."""
    if proposal is None:
        return []
    try:
        where = Path(proposal.dir) / "report.json"
        report = load_report_json(where.read_text("utf-8"), str(where))
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    left = set(json.loads(adoption.left_out or "[]"))
    return [r for r in report.rules if r.change == "adds" and r.rule not in left]


def _block_in_place(target: Path, proposal: ProposalRow | None, section: str | None) -> bool:
    """Whether the adopted rules are still the managed block (of ``section``) of the live
    file: the user's own text around it may change freely."""
    if proposal is None:
        return False
    try:
        adopted = (Path(proposal.dir) / "document").read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    live = _read(target)
    if live is None:
        return False
    want = Document.parse(adopted, section=section)
    have = Document.parse(live, section=section)
    return have.had_block and have.rules == want.rules


def _reached(a: _Adopted, session: SessionRow, messages: list[MessageRow]) -> tuple[bool, bool]:
    """(whether the adoption reached the session, whether its transcript showed it). A memory
    file: observed where the transcript records the memory the agent loaded (every adopted
    rule's mark in it: reached; else not, e.g. a CLI run without user settings); inferred
    from the file being in place otherwise. A skill: its load is in the transcript."""
    if a.owner is None or session.source not in a.owner.sources:
        return False, False
    if a.mode == "memory":
        loaded = session.loaded_marks
        if loaded is not None and a.marks:
            return all(m in loaded for m in a.marks), True
        return a.intact, False
    return a.mode == "skill" and _skill_loaded(messages), a.mode == "skill"


def record_reach(store: Store, *, similarity: float = 0.72) -> int:
    """Judge, once, whether each adoption in place reached each session harvested since that
    asks one of its tasks again; returns how many verdicts were recorded. Call it right after
    a harvest (a write)."""
    n = 0
    if not store.adoptions.in_place():  # nothing adopted: no task or session is loaded
        return 0
    adopted = _adopted(store)
    if not adopted:
        return 0
    for s in store.sessions.all():
        started = _when(s.started_at)
        if started is None:
            continue
        messages: list[MessageRow] | None = None
        for a in adopted:
            if a.since is None or started < a.since:
                continue
            if s.id in store.wild.verdicts(a.row.id):
                continue
            messages = messages if messages is not None else store.sessions.messages(s.id)
            prompt = _first_turn(messages)[0]
            if _match(prompt, s.project, a.tasks, similarity) is None:
                continue
            reached, observed = _reached(a, s, messages)
            with store.write():
                store.wild.record(s.id, a.row.id, reached, observed)
            n += 1
    return n


def in_the_wild(
    store: Store,
    *,
    similarity: float = 0.72,
    flag_after: int = FLAG_AFTER,
) -> list[WildCheck]:
    """One :class:`~skillopt_sleep.results.WildCheck` per adoption in place, newest first. A
    read: sessions not judged yet are judged on the files' state now, and not recorded."""
    if not store.adoptions.in_place():  # nothing adopted: no session is read
        return []
    sessions = store.sessions.all()
    reader = Reader(store)  # what the nights read in the user's follow-ups, no call
    out: list[WildCheck] = []
    for a in _adopted(store):
        verdicts = store.wild.verdicts(a.row.id)
        missed = 0  # matching sessions in a row (the latest ones) the document did not reach
        check = WildCheck(
            proposal_id=a.row.proposal_id,
            target_path=a.row.target_path,
            adopted_at=a.row.adopted_at,
            mode=a.mode,
        )
        projects = {t.project for t in a.tasks}
        judged = store.wild.judged(a.row.id)
        seen_observed = store.wild.observed(a.row.id)
        tally = _Tally(a)
        for s in sessions:
            started = _when(s.started_at)
            if started is None or a.since is None:
                continue
            if None not in projects and not any(_under(s.project, p) for p in projects):
                continue  # no task of this adoption is from that project: no message read
            messages = store.sessions.messages(s.id)
            prompt, answer, tools, corrected = _first_turn(messages, reader)
            task = _match(prompt, s.project, a.tasks, similarity)
            own_agent = a.owner is None or s.source in a.owner.sources
            if task is None:
                # another request of the user's: what the rules may harm (whole? corrected?)
                if own_agent and prompt.strip() and answer.strip() and not s.self_generated:
                    after = started >= a.since
                    if after:
                        got = verdicts.get(s.id)
                        reached = got if got is not None else _reached(a, s, messages)[0]
                        if not reached:
                            continue
                    probe = Task(id="-", intent=prompt)
                    bad = bool(judge_answer(probe, answer, tools, []).faults) or corrected
                    tally.other(after, bad)
                continue
            if not own_agent:
                if started >= a.since:
                    check.other_agents += 1  # another agent's session: this file is not its
                continue
            # judged as a replay is: a broken answer never passes, and each check judges the
            # artifact the task asks for
            verdict = judge_answer(task, answer, tools, task.checks)
            passed: bool | None = verdict.passed
            if not task.checks:
                # judged by its rubric alone: the reached sessions since adopt a night judged
                if started < a.since or not task.rubric:
                    continue
                if not verdict.faults:
                    passed = judged[s.id] >= RUBRIC_PASS if s.id in judged else None
            if started < a.since:
                check.before_sessions += 1
                check.before_passed += int(bool(passed))
                check.before_corrected += int(corrected)
                tally.task(task.id, False, passed, corrected)
                continue
            check.sessions += 1
            recorded = verdicts.get(s.id)
            reached, observed = (
                (recorded, s.id in seen_observed)
                if recorded is not None
                else _reached(a, s, messages)
            )
            if not reached:
                missed += 1
                continue  # never evidence for (or against) a document that did not reach it
            missed = 0
            if passed is None:
                check.unjudged += 1  # the next night judges it
                continue
            check.reached += 1
            check.observed += int(observed)
            check.passed += int(passed)
            check.corrected += int(corrected)
            tally.task(task.id, True, passed, corrected)
        check.pass_rate = check.passed / check.reached if check.reached else None
        check.before_pass_rate = (
            check.before_passed / check.before_sessions if check.before_sessions else None
        )
        if missed >= flag_after:
            check.flag = _fix(a.mode, a.intact, missed)
        check.rules = tally.verdicts()
        for v in check.rules:
            if v.verdict == "hurt":
                v.rollback = _removal_staged(store, a.row.target_path, v.rule)
        out.append(check)
    return out


def _removal_staged(store: Store, target: str, rule: str) -> str | None:
    """The staged proposal for ``target`` that removes ``rule``, if any."""
    for p in store.proposals.staged(target):
        where = Path(p.dir) / "report.json"
        try:
            report = load_report_json(where.read_text("utf-8"), str(where))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if any(r.change == "removes" and r.rule == rule for r in report.rules):
            return p.id
    return None


#: an adopted rule's verdict needs at least this many reached sessions of its own tasks, or
#: of the user's other requests, since adopt
MIN_OWN, MIN_OTHER = 2, 3
#: how far a pass rate (or a rate of broken or corrected answers) must move to count
MOVE = 0.25


class _Tally:
    """The sessions of one adoption, counted per adopted rule: its own tasks' (the tasks it
    was learned from) and every other request's, before adopt and reached since."""

    def __init__(self, a: _Adopted):
        self.a = a
        self.own = {r.rule: {ev.task_id for ev in r.evidence} for r in a.rules}
        self.counts = {r.rule: RuleVerdict(rule=r.rule, scope=r.scope) for r in a.rules}

    def task(self, task_id: str, after: bool, passed: bool | None, corrected: bool) -> None:
        for rule, v in self.counts.items():
            if task_id in self.own[rule]:
                if passed is None:
                    continue
                if after:
                    v.own_after += 1
                    v.own_after_passed += int(passed)
                else:
                    v.own_before += 1
                    v.own_before_passed += int(passed)
            else:
                self._other(v, after, passed is False or corrected)

    def other(self, after: bool, bad: bool) -> None:
        for v in self.counts.values():
            self._other(v, after, bad)

    @staticmethod
    def _other(v: RuleVerdict, after: bool, bad: bool) -> None:
        if after:
            v.other_after += 1
            v.other_after_bad += int(bad)
        else:
            v.other_before += 1
            v.other_before_bad += int(bad)

    def verdicts(self) -> list[RuleVerdict]:
        return [_verdict(v) for v in self.counts.values()]


def _rate(n: int, of: int) -> float:
    return n / of if of else 0.0


def _verdict(v: RuleVerdict) -> RuleVerdict:
    """helped / no effect / hurt / too few sessions, from the counts (see :data:`MOVE`)."""
    own_before, own_after = (
        _rate(v.own_before_passed, v.own_before),
        _rate(v.own_after_passed, v.own_after),
    )
    bad_before, bad_after = (
        _rate(v.other_before_bad, v.other_before),
        _rate(v.other_after_bad, v.other_after),
    )
    enough_own, enough_other = v.own_after >= MIN_OWN, v.other_after >= MIN_OTHER
    if enough_other and bad_after - bad_before >= MOVE:
        v.verdict = "hurt"
        v.why = (
            f"your other requests went wrong more often since adopt: {v.other_after_bad} of "
            f"{v.other_after} broken or corrected, {v.other_before_bad} of {v.other_before} before"
        )
    elif enough_own and v.own_before and own_before - own_after >= MOVE:
        v.verdict = "hurt"
        v.why = (
            f"its own tasks passed less often since adopt: {v.own_after_passed} of "
            f"{v.own_after}, {v.own_before_passed} of {v.own_before} before"
        )
    elif enough_own and v.own_before and own_after - own_before >= MOVE:
        v.verdict = "helped"
        v.why = (
            f"its own tasks passed {v.own_after_passed} of {v.own_after} since adopt, "
            f"{v.own_before_passed} of {v.own_before} before"
        )
    elif enough_own and not v.own_before and not enough_other:
        v.verdict = "too few sessions"
        v.why = (
            f"its tasks passed {v.own_after_passed} of {v.own_after} since adopt, and were not "
            "asked before it to compare with"
        )
    elif enough_own or enough_other:
        v.verdict = "no effect"
        v.why = (
            f"no move of {MOVE:.2f} or more: its tasks passed {v.own_before_passed} of "
            f"{v.own_before} before, {v.own_after_passed} of {v.own_after} since; your other "
            f"requests broken or corrected {v.other_before_bad} of {v.other_before} before, "
            f"{v.other_after_bad} of {v.other_after} since"
        )
    else:
        v.verdict = "too few sessions"
        v.why = (
            f"{v.own_after} reached session(s) of its tasks and {v.other_after} of other "
            f"requests since adopt (a verdict needs {MIN_OWN} or {MIN_OTHER})"
        )
    return v


@dataclass(frozen=True)
class ToJudge:
    """A reached session's first answer to a task judged by its rubric alone."""

    adoption_id: int
    session_id: str
    task_id: str
    answer: str


def to_judge(store: Store, task_ids: set[str], *, similarity: float = 0.72) -> list[ToJudge]:
    """The first answers a night's rubric judge should score (:meth:`Night.judge_wild`): of
    sessions since an adoption in place that it reached (recorded at harvest), asking one of
    ``task_ids`` (tasks judged by their rubric alone), whole, and not judged yet."""
    out: list[ToJudge] = []
    for a in _adopted(store):
        tasks = [t for t in a.tasks if t.id in task_ids]
        if not tasks:
            continue
        reached = store.wild.verdicts(a.row.id)
        done = store.wild.judged(a.row.id)
        for session_id, ok in reached.items():
            if not ok or session_id in done:
                continue
            session = store.sessions.get(session_id)
            if session is None:
                continue
            prompt, answer, tools, _ = _first_turn(store.sessions.messages(session_id))
            task = _match(prompt, session.project, tasks, similarity)
            if task is None or not answer.strip() or judge_answer(task, answer, tools, []).faults:
                continue
            out.append(ToJudge(a.row.id, session_id, task.id, answer))
    return out


def _read(path: Path) -> str | None:
    try:
        return read_live(path)
    except Exception:  # unreadable now: not the adopted text
        return "\0unreadable"


def _match(prompt: str, project: str | None, tasks: list[Task], similarity: float) -> Task | None:
    if not prompt.strip():
        return None
    best: tuple[float, Task] | None = None
    for t in tasks:
        if t.project and not _under(project, t.project):
            continue
        score = fuzz.token_set_ratio(prompt.lower(), t.intent.lower()) / 100.0
        if score >= similarity and (best is None or score > best[0]):
            best = (score, t)
    return best[1] if best else None


def _fix(mode: str, intact: bool, n: int) -> str:
    if mode == "skill":
        return (
            f"the skill was not loaded in the last {n} matching sessions: its description does "
            'not make the agent load it — retrain it, or train the memory file (document.kind = "memory")'
        )
    if mode == "memory" and not intact:
        return (
            f"the adopted rules are no longer the file's managed block (edited or removed), so "
            f"they reached none of the last {n} matching sessions: run a night to stage them "
            "again"
        )
    return (
        f"the document reached none of the last {n} matching sessions: the agent does not load "
        'this file by itself — train the agent\'s memory file (document.kind = "memory")'
    )
