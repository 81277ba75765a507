"""Staging a proposal: the new document, a unified diff, and ``report.md`` / ``report.json``.

Layout: ``<state>/proposals/<id>/`` with ``document`` (the full proposed file, bytes as they
will be written on adopt), ``diff.patch``, ``report.json`` and ``report.md``. A newer staged
proposal for the same target supersedes older staged ones.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_sleep import agents, paths
from skillopt_sleep.delivery.document import (
    Document,
    Edit,
    estimate_tokens,
    same_rule,
    scope_of,
    sha256_text,
)
from skillopt_sleep.files import atomic_write
from skillopt_sleep.mining.judges import context_state
from skillopt_sleep.mining.split import NOT_DISTINCT, task_of
from skillopt_sleep.models import Task
from skillopt_sleep.night.screen import document_flags, visible
from skillopt_sleep.results import (
    WITHHELD_SHOWN,
    Delivery,
    EditRecord,
    FlaggedRule,
    NightCost,
    NightSummary,
    ProposalReport,
    ProposalRule,
    RuleEvidence,
    Scores,
    TaskDelta,
)
from skillopt_sleep.store import Store, now_iso


def _lines(text: str) -> list[str]:
    """``text`` split after each ``\n`` only (a CRLF line keeps its ``\r``; form feeds and
    other separators ``str.splitlines`` cuts at stay inside their line, as patch sees them)."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def unified_diff(base: str | None, new: str, target: Path) -> str:
    """A unified diff of the live file (``base``; None = absent) to ``new`` that ``patch -p1``
    and ``git apply`` accept in the file's folder: a last line without a newline is marked
    ``\\ No newline at end of file``, CRLF lines keep their CR."""
    out = []
    for line in difflib.unified_diff(
        _lines(base or ""),
        _lines(new),
        fromfile=f"a/{target.name}" if base is not None else "/dev/null",
        tofile=f"b/{target.name}",
    ):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def per_task_deltas(
    store: Store, night_id: int, split: str, before_phase: str, after_phase: str
) -> list[dict[str, Any]]:
    """Per-task score before/after for ``split`` from the night's recorded rollouts."""
    rows = store.rollouts.of_night(night_id, split)
    before: dict[str, float] = {}
    after: dict[str, float] = {}
    acts: dict[str, str] = {}
    for r in rows:
        if r.phase == before_phase:
            before.setdefault(r.task_id, r.score)
        if r.phase == after_phase:
            after[r.task_id] = r.score
            acts[r.task_id] = r.acts or ""
    return [
        {
            "task_id": tid,
            "before": before.get(tid),
            "after": after.get(tid, before.get(tid)),
            "acts": acts.get(tid, ""),
        }
        for tid in sorted(set(before) | set(after))
    ]


@dataclass
class Staging:
    """What a proposal is staged from. ``target_path``: the live file it would write;
    ``base_text`` (None: absent) and ``base_hash``: that file as the night found it;
    ``new_text``: the proposed file; ``edits``: the night's (or, for an agent's copy, the
    applied ones); ``tasks``: the block's (the report's task tables name them; none: all of
    the night's rollouts); ``delivered``: where the replays put the candidates (see
    :func:`scoring_note`); ``proposal_id``: by default the next free one
    (:meth:`~skillopt_sleep.store.proposals.ProposalsRepo.next_id`); ``held_out``: for an
    agent's copy (:mod:`.copies`), the split it was certified on and the before / after
    phases of those replays (the report's task table is that split's: no val gate ran on the
    copy); ``agent`` / ``kind``: whose document it is and which kind, recorded with the
    proposal (adopt and rollback write only where the registry allows that agent's document
    of that kind); ``kind`` None: found from the target's place
    (:func:`skillopt_sleep.agents.document_of`, ``agent`` asked first), a file that is no
    agent's document being ``path``."""

    night_id: int
    target_path: Path
    base_text: str | None
    new_text: str
    base_hash: str
    edits: list[Edit]
    tasks: list[Task]
    cost: NightCost
    summary: NightSummary
    scores: Scores
    delivered: str | None = None
    proposal_id: str | None = None
    held_out: tuple[str, str, str] | None = None
    agent: str | None = None
    kind: str | None = None


def stage_proposal(
    store: Store,
    staging: Staging,
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> str:
    """Write the proposal folder and row; returns the proposal id. ``env`` / ``home``: where
    the agents' homes are, to find whose document the target is when ``staging.kind`` is
    None."""
    st = staging
    agent, kind = st.agent, st.kind
    if kind is None:
        found = agents.document_of(st.target_path, prefer=agent, env=env, home=home)
        agent, kind = found if found is not None else (agent or "", "path")
    agent = agents.get_agent(agent).name if agent else ""
    pid = st.proposal_id or store.proposals.next_id()
    final = paths.proposals_dir() / pid
    folder = _staging_folder(store, pid, final)
    atomic_write(folder / "document", st.new_text)
    diff = unified_diff(st.base_text, st.new_text, st.target_path)
    atomic_write(folder / "diff.patch", diff)
    val_tasks, test_tasks = _task_tables(store, st)
    report = ProposalReport(
        id=pid,
        night_id=st.night_id,
        created_at=now_iso(),
        target=str(st.target_path),
        base_hash=st.base_hash,
        new_hash=sha256_text(st.new_text),
        agent=agent,
        kind=kind,
        scores=st.scores,
        val_tasks=val_tasks,
        test_tasks=test_tasks,
        edits=[_edit_record(e) for e in st.edits],
        cost=st.cost,
        summary=st.summary,
        scored_as=scoring_note(st.target_path, st.delivered),
        flagged=[
            FlaggedRule(text=f.text, reason=f.reason, where=f.where)
            for f in document_flags(st.base_text, st.new_text)
        ],
        rules=proposal_rules(st),
    )
    report_text = report.to_json()
    atomic_write(folder / "report.json", report_text)
    atomic_write(folder / "report.md", render_markdown(report, diff))
    if final.exists():  # this night's own earlier staging (re-staged): replaced whole
        shutil.rmtree(final)
    folder.rename(final)
    # superseding the old and staging the new: one step, never half
    store.proposals.stage(
        {
            "id": pid,
            "night_id": st.night_id,
            "created_at": report.created_at,
            "status": "staged",
            "target_path": str(st.target_path),
            "base_hash": st.base_hash,
            "new_hash": report.new_hash,
            "dir": str(final),
            **st.scores.model_dump(),
            "summary": json.dumps(st.summary.dump()),
            "reason": "",
            "agent": agent,
            "kind": kind,
            "report_hash": sha256_text(report_text),
        },
    )
    return pid


def _staging_folder(store: Store, pid: str, final: Path) -> Path:
    """A new, empty folder to write proposal ``pid`` in before it is moved to ``final`` whole,
    just before its row is stored: a night killed while staging leaves no half-written
    proposal folder (what a killed night left in ``.staging-*`` is removed here). A folder
    ``final`` that an earlier database left (deleted or reset) is kept aside, never
    overwritten."""
    if final.exists() and store.proposals.get(pid) is None:
        final.rename(final.with_name(f"{pid}.orphan-{time.strftime('%Y%m%dT%H%M%S')}"))
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(".staging-*"):
        try:  # this proposal's own, or a killed night's (an hour old: no night stages that long)
            old = time.time() - stale.stat().st_mtime > 3600
        except OSError:
            continue
        if stale.name == f".staging-{pid}" or old:
            shutil.rmtree(stale, ignore_errors=True)
    folder = final.with_name(f".staging-{pid}")
    folder.mkdir()
    return folder


def _task_tables(store: Store, st: Staging) -> tuple[list[TaskDelta], list[TaskDelta]]:
    """The report's val and test task tables: each task's score before and after, from the
    night's recorded rollouts of the proposal's own tasks (a night that trained several blocks
    replayed each block's tasks for that block). Val: the baseline against the last val
    replay of the proposed document; an agent's copy: the split it was certified on."""
    intents = {t.id: t.intent for t in st.tasks}
    mine = (lambda tid: tid in intents) if intents else (lambda tid: True)
    new_hash = sha256_text(st.new_text)
    val_rows = [r for r in store.rollouts.of_night(st.night_id, "val") if mine(r.task_id)]
    val_base = {r.task_id: r.score for r in val_rows if r.phase == "val baseline"}
    val_new = {r.task_id: r.score for r in val_rows if r.doc_hash == new_hash}
    val_acts = {r.task_id: r.acts or "" for r in val_rows if r.doc_hash == new_hash}
    val_tasks = [
        {
            "task_id": tid,
            "before": val_base.get(tid),
            "after": val_new.get(tid, val_base.get(tid)),
            "acts": val_acts.get(tid, ""),
        }
        for tid in sorted(val_base)
    ]
    test_tasks = per_task_deltas(store, st.night_id, "test", "test before", "test after")
    if st.held_out is not None:  # an agent's copy: certified on its own held-out views
        split, before_phase, after_phase = st.held_out
        val_tasks, test_tasks = [
            per_task_deltas(store, st.night_id, x, before_phase, after_phase)
            if x in split.split("+")
            else []
            for x in ("val", "test")
        ]
    contexts = {t.id: context_state(t) for t in st.tasks}

    def table(rows: list[dict[str, Any]]) -> list[TaskDelta]:
        return [
            TaskDelta.model_validate(
                row
                | {
                    "intent": intents.get(row["task_id"], "")[:200],
                    "context": contexts.get(row["task_id"], ""),
                }
            )
            for row in rows
            if mine(row["task_id"])
        ]

    return table(val_tasks), table(test_tasks)


def proposal_rules(st: Staging) -> list[ProposalRule]:
    """The proposal's rules one by one: each rule its document adds, then each it removes
    (its block's rules against the base's), with the scope, the edit that brought it (its
    gate verdict, and the tasks it was learned from: their request, the user's words and
    sessions) and its cost in every turn."""
    section = st.summary.section
    skill = st.target_path.name == "SKILL.md"
    base = Document.parse(st.base_text, new_skill=skill, section=section).rules
    new = Document.parse(st.new_text, new_skill=skill, section=section).rules
    views = {t.id: t for t in st.tasks}
    applied = [e for e in st.edits if e.status == "applied" and e.op in ("add", "replace")]

    def evidence(e: Edit | None) -> list[RuleEvidence]:
        out: dict[str, RuleEvidence] = {}
        for vid in e.evidence if e else []:
            v = views.get(vid)
            tid = task_of(vid)
            got = out.setdefault(
                tid,
                RuleEvidence(
                    task_id=tid,
                    intent=(v.intent if v else "")[:200],
                    words=[w[:200] for w in (v.corrections if v else [])[:3]],
                ),
            )
            for o in v.occurrences if v else []:
                if o.session_id not in got.sessions:
                    got.sessions.append(o.session_id)
        return list(out.values())

    def made(rule: str) -> Edit | None:
        found = [e for e in applied if e.text == rule] or [
            e for e in applied if same_rule(e.text, rule)
        ]
        return found[-1] if found else None

    def removed_by(rule: str) -> Edit | None:
        gone = [e for e in st.edits if e.status == "applied" and e.old and same_rule(e.old, rule)]
        return gone[-1] if gone else None

    changes = [("adds", r, made(r), 1) for r in new if r not in base]
    changes += [("removes", r, removed_by(r), -1) for r in base if r not in new]
    out: list[ProposalRule] = []
    for n, (change, rule, e, sign) in enumerate(changes, 1):
        kept = "kept" if change == "adds" else "merged"
        out.append(
            ProposalRule(
                n=n,
                change=change,
                rule=rule,
                scope=scope_of(rule),
                evidence=evidence(e),
                val_before=e.val_before if e else None,
                val_after=e.val_after if e else None,
                verdict=e.reason if e else f"{kept} by the night's consolidation of its rules",
                tokens=sign * estimate_tokens(f"- {rule}\n"),
            )
        )
    return out


RULES_BEGIN, RULES_END = "<!-- rules -->", "<!-- /rules -->"


def rules_markdown(rules: list[ProposalRule], pid: str) -> list[str]:
    """The report's rules section: each rule in plain words with its number (for ``adopt
    --rules`` / ``reject --rule``), what it holds for, what it was learned from (the user's
    own words, the sessions), what the gate measured and its cost in every turn, and its
    status. Between :data:`RULES_BEGIN` and :data:`RULES_END` (rewritten as it stands now
    when shown: ``proposals/records.py``)."""
    if not rules:
        return []
    lines = ["## Rules", "", RULES_BEGIN]
    for r in rules:
        # a scoped rule says its scope first ("When writing a commit message: …")
        scope = "" if r.scope else " — for every task"
        status = "" if r.status == "proposed" else f" — **{r.status}**"
        if r.reason and r.status == "refused":
            status += f" ({_cell(r.reason)})"
        lines.append(f"{r.n}. {r.change}: {visible(r.rule)}{scope}{status}")
        for ev in r.evidence[:3]:
            said = "; ".join(f'"{_cell(w)}"' for w in ev.words[:2])
            asked = _cell(ev.intent[:100])
            where = ", ".join(f"`skillopt-sleep session show {sid}`" for sid in ev.sessions[:2])
            lines.append(
                f'   - learned from "{asked}"'
                + (f", where you said {said}" if said else "")
                + (f" ({where})" if where else "")
            )
        gate = f"val {_fmt(r.val_before)} → {_fmt(r.val_after)}"
        lines.append(
            f"   - {gate}; ~{abs(r.tokens)} tokens {'more' if r.tokens >= 0 else 'fewer'} in "
            "every turn"
        )
    lines += [RULES_END, ""]
    return lines


def _edit_record(e: Edit) -> EditRecord:
    return EditRecord.of(e)


def scoring_note(target_path: Path | str, delivered: str | None = None) -> str:
    """How the scores relate to daily use of the adopted document (shown in every report).
    ``delivered``: where the replays put each candidate (:meth:`.delivery.Where.describe`);
    None when the agent does not load the file by itself (replays gave it as system text)."""
    if delivered is None:
        return (
            f"The night gave this document to the model as system text: {Path(target_path).name} "
            "is not a file the agent loads by itself, so the scores say nothing about daily use."
        )
    if Path(target_path).name == "SKILL.md":
        return (
            f"Each replay put the candidate where the agent finds it after adopt: {delivered}. "
            "As a skill it reaches the model only when the agent decides to load it (its "
            "description decides); the scores include the replays where it was not loaded. "
            "Rules that must always apply belong in the agent's memory file "
            '(document.kind = "memory").'
        )
    return (
        f"Each replay put the candidate where the agent finds it after adopt: {delivered}; "
        "the agent loads it in every session, so the scores are what the agent does with it."
    )


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell: one line, no column bar."""
    return visible(" ".join(str(text).split())).replace("|", "/")


def _noise_line(summary: NightSummary) -> list[str]:
    """The val noise the gate measured, when the target's answers varied."""
    n = summary.noise
    if n is None:
        return []
    return [
        f"- val noise: ±{n.spread:.3f} by chance (placebo rules and samples); "
        f"{n.samples} sample(s) per val occurrence; each applied edit gained more"
    ]


def _test_line(report: ProposalReport) -> str:
    """The report's test line: the scores before and after, or why there are none."""
    sc = report.scores
    said = report.summary.no_test_line(sc)
    if said is not None:
        return f"- {visible(said)}"
    return f"- test score: {_fmt(sc.test_before)} → {_fmt(sc.test_after)} (held out; report only)"


def _withheld_lines(summary: NightSummary) -> list[str]:
    """The occurrences withheld from val or test: each with its task and why."""
    held = summary.withheld or []
    if not held:
        return []
    lines = ["Withheld from val or test (not replayed as held out):", ""]
    lines += [
        f"- `{w.occurrence}` (task `{w.task_id}`): {_cell(w.why)}" for w in held[:WITHHELD_SHOWN]
    ]
    if len(held) > WITHHELD_SHOWN:
        lines.append(f"- … and {len(held) - WITHHELD_SHOWN} more")
    return [*lines, ""]


def render_markdown(report: ProposalReport, diff: str) -> str:
    sc, cost = report.scores, report.cost
    lines = [
        f"# skillopt-sleep proposal {report.id}",
        "",
        f"- target: `{report.target}`",
        *_block_line(report.summary),
        f"- night: {report.night_id} ({report.created_at})",
        f"- val score: {_fmt(sc.val_before)} → {_fmt(sc.val_after)}",
        *_noise_line(report.summary),
        _test_line(report),
        f"- cost: {cost.calls or 0} model calls "
        f"({cost.cached_calls or 0} cached), "
        f"{(cost.input_tokens or 0) + (cost.output_tokens or 0)} tokens, "
        f"{cost.seconds or 0.0:.1f} s in model calls",
        "",
        *rules_markdown(report.rules, report.id),
        report.scored_as,
        "",
        *([report.summary.held_out.capitalize() + ".", ""] if report.summary.held_out else []),
        *(
            [
                f"{report.summary.not_validated} task(s) asked only once trained and are not "
                "yet validated on a recurrence.",
                "",
            ]
            if report.summary.not_validated
            else []
        ),
        *(
            [f"{report.summary.not_distinct} task(s) {NOT_DISTINCT}.", ""]
            if report.summary.not_distinct
            else []
        ),
        *_withheld_lines(report.summary),
        *(_delivery_lines(report.summary.delivery) if report.summary.delivery else []),
        *(
            [
                f"{report.summary.user_refused} edit(s) from proposals you rejected or rolled "
                "back were remembered: never proposed or staged again.",
                "",
            ]
            if report.summary.user_refused
            else []
        ),
        *_copy_lines(report),
        *_flag_lines(report),
        *(
            [
                "Curation before staging:",
                "",
                *(f"- {visible(n)}" for n in report.summary.curation),
                "",
            ]
            if report.summary.curation
            else []
        ),
        f"Adopt with `skillopt-sleep adopt {report.id}"
        + (" --allow-flagged" if report.flagged else "")
        + f"`, discard with `skillopt-sleep reject {report.id}`."
        + (
            f" Adopt some of its rules with `--rules 1,2`, refuse one with "
            f'`skillopt-sleep reject {report.id} --rule N --reason "…"`.'
            if len(report.rules) > 1
            else ""
        ),
        "",
        "## Edits",
        "",
        "| status | edit | val | reason | rationale |",
        "|---|---|---|---|---|",
    ]
    for e in report.edits:
        what = e.text if e.op == "add" else (e.old if e.op == "delete" else f"{e.old} → {e.text}")
        what = visible(what.replace("\n", "; ")).replace("|", "\\|")
        lines.append(
            f"| {e.status} | {e.op}: {what} | {_fmt(e.val_before)} → {_fmt(e.val_after)} "
            f"| {_cell(e.reason)} | {_cell(e.rationale)} |"
        )
    for title, deltas in (("Val tasks", report.val_tasks), ("Test tasks", report.test_tasks)):
        lines += ["", f"## {title}", "", "| task | before | after |", "|---|---|---|"]
        for t in deltas:
            intent = t.intent.replace("\n", " ").replace("|", "\\|")[:80]
            if t.context.startswith("not rebuilt"):
                intent += f" ({_cell(t.context)}: scored without the checks that need it)"
            lines.append(f"| {intent} | {_fmt(t.before)} | {_fmt(t.after)} |")
    lines += _acts_lines(report.val_tasks + report.test_tasks)
    lines += ["", "## Diff", "", "```diff", diff.rstrip("\n"), "```", ""]
    return "\n".join(lines)


#: characters of one task's acts a report shows (the rest is in the rollouts)
ACTS_SHOWN = 3000


def _acts_lines(deltas: list[TaskDelta]) -> list[str]:
    """For report.md: what the agent did with its tools in the replays of the proposed
    document (the commands it ran, the files it wrote as a diff, what was stopped), per
    held-out task that acted; none when no replay acted."""
    acted = [t for t in deltas if t.acts]
    if not acted:
        return []
    lines = ["", "## What the agent did (replays of the proposed document)"]
    for t in acted:
        intent = visible(t.intent.replace("\n", " "))[:80]
        text = t.acts if len(t.acts) <= ACTS_SHOWN else t.acts[:ACTS_SHOWN] + "\n…"
        lines += ["", f"**{intent}** (after {_fmt(t.after)})", "", "````text", text, "````"]
    return lines


def _block_line(sm: NightSummary) -> list[str]:
    """For report.md: which block of a memory file every project shares the proposal is for
    (none for a document of its own)."""
    if sm.section is not None:
        return [
            f"- block: the rules for project `{sm.section}` (this project's block of the shared "
            "file; the other projects' blocks and your own text are kept as they are)"
        ]
    if sm.block_hash is not None:
        return ["- block: the rules for every project (requests asked in no project)"]
    return []


def _item(text: str) -> str:
    """Text fit for one Markdown list item: one line, hidden characters shown."""
    return visible(" ".join(str(text).split()))


def _flag_lines(report: ProposalReport) -> list[str]:
    """For report.md: what the poisoning screen refused during the night, and what the
    document adds that it flags (then adopt refuses it without ``--allow-flagged``)."""
    lines: list[str] = []
    refused = [e for e in report.edits if e.status == "flagged"]
    if refused:
        lines += [
            f"The poisoning screen refused {len(refused)} edit(s) the optimizer proposed "
            "(never replayed, never applied):",
            "",
            *(f"- {e.op}: {_item(e.text)} — {_item(e.reason)}" for e in refused),
            "",
        ]
    if report.flagged:
        lines += [
            f"**Flagged:** this document adds {len(report.flagged)} text(s) the poisoning "
            "screen flags; `adopt` refuses it unless given `--allow-flagged`:",
            "",
            *(f"- {f.where}: {_item(f.text)} — {_item(f.reason)}" for f in report.flagged),
            "",
        ]
    return lines


def _copy_lines(report: ProposalReport) -> list[str]:
    """For report.md: whose rules an agent's copy carries, or which other agents got a copy
    of this proposal's rules (:mod:`.copies`), with their certification and per-turn cost."""
    sm = report.summary
    if sm.copy_for:
        return [
            f"This is {sm.copy_for}'s copy of "
            f"{sm.reason}. The edits below were gated on the night's own document; this copy "
            "was scored through its own agent.",
            "",
        ]
    if not sm.copies:
        return []
    lines = [
        "Other agents whose sessions these tasks came from:",
        "",
        "| agent | proposal | held-out | before | after | per turn | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in sm.copies:
        per_turn = f"~{c.delivery.per_turn_tokens} tokens" if c.delivery else "—"
        lines.append(
            f"| {c.agent} | {c.proposal_id or '—'} | {c.tasks} {c.certified_on or ''} "
            f"| {_fmt(c.before)} | {_fmt(c.after)} | {per_turn} | {_cell(c.reason or c.status)} |"
        )
    staged = [c.proposal_id for c in sm.copies if c.proposal_id]
    if staged:
        lines += [
            "",
            f"Adopt them all with `skillopt-sleep adopt {report.id} --all-agents`.",
        ]
    return [*lines, ""]


def _delivery_lines(d: Delivery) -> list[str]:
    """What the document costs once adopted (estimated tokens), for report.md."""
    head = (
        f"Size: {d.rules} rule(s); the managed block is ~{d.block_tokens} tokens "
        f"(budget {d.budget})."
    )
    if d.mode == "skill":
        return [
            head + f" As a skill it costs ~{d.per_turn_tokens} tokens in every turn (its "
            f"description) and ~{d.when_loaded_tokens} when the agent loads it.",
            "",
        ]
    return [
        head + f" Loaded in every turn, the block costs ~{d.block_tokens} tokens a turn "
        f"(the whole file, your own text included, ~{d.per_turn_tokens}).",
        "",
    ]
