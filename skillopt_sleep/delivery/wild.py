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
from dataclasses import dataclass
from pathlib import Path

from rapidfuzz import fuzz

from skillopt_sleep import agents
from skillopt_sleep.delivery.document import SKILL_NAME, Document, read_live
from skillopt_sleep.delivery.where import where_loaded
from skillopt_sleep.mining.corrections import classify
from skillopt_sleep.mining.judges import judge_answer
from skillopt_sleep.mining.meaning import Reader
from skillopt_sleep.mining.mine import INTENT_CHARS
from skillopt_sleep.mining.split import task_of
from skillopt_sleep.models import Task
from skillopt_sleep.results import NightSummary, WildCheck
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
    """One adoption in place, with what judging sessions against it needs."""

    row: AdoptionRow
    tasks: list[Task]
    mode: str
    owner: agents.Agent | None
    intact: bool
    since: dt.datetime | None


def _adopted(store: Store) -> list[_Adopted]:
    tasks_by_id = {t.id: t for t in store.tasks.all()}
    out = []
    for adoption in store.adoptions.in_place():
        proposal = store.proposals.get(adoption.proposal_id)
        night_id = proposal.night_id if proposal else None
        # rollouts name the occurrence they replayed (``<task id>@…``): its task
        rows = store.rollouts.of_night(night_id, None) if night_id else []
        ids = {task_of(r.task_id) for r in rows}
        target = Path(adoption.target_path)
        summary = NightSummary.model_validate_json((proposal.summary if proposal else None) or "{}")
        if summary.delivery is not None:  # as the night placed it (its own HOME, e.g. a demo)
            mode = summary.delivery.mode if summary.delivery.agent else "none"
            agent = summary.delivery.agent
        else:
            where = where_loaded(target, agent="claude_code")
            mode, agent = (where.mode, where.agent) if where else ("none", None)
        out.append(
            _Adopted(
                row=adoption,
                tasks=[tasks_by_id[i] for i in sorted(ids) if i in tasks_by_id],
                mode=mode,
                owner=agents.get_agent(agent) if agent else None,
                intact=_block_in_place(target, proposal, summary.section),
                since=_when(adoption.adopted_at),
            )
        )
    return out


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


def _reached(a: _Adopted, session: SessionRow, messages: list[MessageRow]) -> bool:
    if a.owner is None or session.source not in a.owner.sources:
        return False
    if a.mode == "memory":
        return a.intact
    return a.mode == "skill" and _skill_loaded(messages)


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
            with store.write():
                store.wild.record(s.id, a.row.id, _reached(a, s, messages))
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
        for s in sessions:
            started = _when(s.started_at)
            if started is None or a.since is None:
                continue
            if None not in projects and not any(_under(s.project, p) for p in projects):
                continue  # no task of this adoption is from that project: no message read
            messages = store.sessions.messages(s.id)
            prompt, answer, tools, corrected = _first_turn(messages, reader)
            task = _match(prompt, s.project, a.tasks, similarity)
            if task is None:
                continue
            if a.owner is not None and s.source not in a.owner.sources:
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
                continue
            check.sessions += 1
            reached = verdicts.get(s.id)
            if reached is None:
                reached = _reached(a, s, messages)
            if not reached:
                missed += 1
                continue  # never evidence for (or against) a document that did not reach it
            missed = 0
            if passed is None:
                check.unjudged += 1  # the next night judges it
                continue
            check.reached += 1
            check.passed += int(passed)
            check.corrected += int(corrected)
        check.pass_rate = check.passed / check.reached if check.reached else None
        check.before_pass_rate = (
            check.before_passed / check.before_sessions if check.before_sessions else None
        )
        if missed >= flag_after:
            check.flag = _fix(a.mode, a.intact, missed)
        out.append(check)
    return out


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
