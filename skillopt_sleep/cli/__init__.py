"""The ``skillopt-sleep`` command line: parse, call one core function, print.

Every :class:`~skillopt_sleep.errors.SkilloptError` is caught once, in :func:`main`, and
printed as ``error: <one-line reason>`` with exit status 1.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from skillopt_sleep.cli.console import (
    err,
    first_run_setup,
    fitted_table,
    out,
    print_json,
    service,
    wrap_words,
)
from skillopt_sleep.cli.console import fmt_score as _fmt
from skillopt_sleep.cli.console import state as _state
from skillopt_sleep.errors import BadArgument, SkilloptError

if TYPE_CHECKING:
    from skillopt_sleep.mining.mine import MineReport
    from skillopt_sleep.models import Check, Task
    from skillopt_sleep.results import (
        DaemonStatus,
        HarvestView,
        NightView,
        PendingProposal,
        Status,
        WildCheck,
    )

app = typer.Typer(
    name="skillopt-sleep",
    help="Train your coding agents' skill documents on the tasks you repeat, while you sleep.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON.")


def _version(value: bool) -> None:
    if value:
        from skillopt_sleep import __version__

        out.print(f"skillopt-sleep {__version__}", markup=False)
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="Config file (default: the user config dir's config.toml).",
        envvar="SKILLOPT_SLEEP_CONFIG_FILE",
    ),
) -> None:
    if config is not None and not config.is_file():
        from skillopt_sleep.errors import ConfigError

        raise ConfigError(f"config file {config} does not exist (given with --config)")
    if config is not None and ctx.invoked_subcommand not in _READ_BROKEN_CONFIG:
        # a file the user names is read before any command, even one that needs no setting
        # (`proposals`, `show`, `ui`…): a typo in it fails loudly instead of being ignored
        from skillopt_sleep.config import load_settings

        load_settings(config)
    _state["config"] = config
    _state["service"] = None


#: the commands that run with a config file that does not load: they are how one finds out
#: what is wrong with it (``doctor``, ``status``) and fixes it (``config edit``)
_READ_BROKEN_CONFIG = ("config", "doctor", "status")


@app.command()
def harvest(as_json: bool = JsonOpt) -> None:
    """Read new bytes of every enabled agent's session logs into the store."""
    first_run_setup()
    from skillopt_sleep.cli.progress import LiveProgress

    with LiveProgress(as_json) as live:
        report = service().harvest(on_progress=live)
    if as_json:
        print_json(report.model_dump())
        return
    rows, notes = [], []
    for name, acc in report.sources.items():
        skipped = {**acc.files_skipped, **acc.sessions_filtered}
        rows.append(
            [
                name,
                str(acc.files_seen),
                str(acc.files_read),
                str(acc.bytes_read),
                str(acc.sessions_new),
                str(acc.sessions_updated),
                str(sum(skipped.values())) if skipped else "—",
                "\n".join(acc.roots),
            ]
        )
        if skipped:  # the reasons below the table, whole words (a column broke them)
            notes.append(f"{name} skipped: {_counts(skipped)}")
    headers = ["source", "files", "read", "bytes", "new", "updated", "skipped", "roots"]
    out.print(fitted_table(headers, rows, path=7))
    for note in notes:
        out.print(
            wrap_words(note),
            markup=False,
        )


tasks_app = typer.Typer(
    help="Mine and list recurring tasks with their split and checks; `tasks score` shows how "
    "a task judges an answer; `tasks join` / `tasks split` say which requests are one task.",
    rich_markup_mode=None,
)
app.add_typer(tasks_app, name="tasks")


@tasks_app.callback(invoke_without_command=True)
def tasks(
    ctx: typer.Context,
    project: Path | None = typer.Option(None, help="Only this project (default: all)."),
    as_json: bool = JsonOpt,
) -> None:
    """Mine and list recurring tasks with their split and checks."""
    if ctx.invoked_subcommand is not None:
        return
    svc = service()
    from skillopt_sleep.cli.progress import LiveProgress

    with LiveProgress(as_json) as live:
        report = svc.mine(project, on_progress=live)
    if as_json:
        print_json([t.model_dump() for t in report.tasks])
        return
    if not report.tasks:
        dropped = _dropped(report.dropped)
        out.print(
            f"no recurring or corrected task yet ({report.sessions_considered} sessions, "
            f"{report.prompts} prompts considered"
            + (f"; dropped: {dropped}" if dropped else "")
            + ")"
            + ("; harvest first: `skillopt-sleep harvest`" if not svc.harvested_yet() else ""),
            markup=False,
        )
        return
    _print_tasks(_task_rows(report.tasks))
    for t in report.tasks:
        _print_task_notes(t)
    _print_mining_notes(report)


@tasks_app.command("join")
def tasks_join(
    first: str = typer.Argument(..., help="A task's id (or a unique prefix), as `tasks` lists it."),
    second: str = typer.Argument(..., help="Another task of the same project."),
) -> None:
    """Make two tasks one: the same request in other words (or another language) that mining
    kept apart. Kept for every later mining run; `tasks split` undoes it."""
    out.print(service().link_tasks(first, second), markup=False)


@tasks_app.command("split")
def tasks_split(
    task_id: str = typer.Argument(..., help="The task's id (or a unique prefix)."),
) -> None:
    """Undo a join: the requests joined to this task by their meaning (or by `tasks join`)
    become tasks of their own again, and stay apart."""
    out.print(service().link_tasks(task_id), markup=False)


@tasks_app.command("score")
def tasks_score(
    task_id: str = typer.Argument(
        ..., help="The task's id (or a unique prefix), as `tasks` lists it."
    ),
    answer_file: Path = typer.Option(
        ..., "--answer-file", help="The answer to judge, a file ('-': standard input)."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """How a stored task judges an answer: the answer's integrity (empty, a bare word, code cut
    off or not parsing scores 0), then each of the task's checks, as a night scores a replay."""
    try:
        if str(answer_file) == "-":
            answer = sys.stdin.read()
        else:
            answer = answer_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadArgument(f"cannot read {answer_file}: {exc}") from None
    res = service().score_answer(task_id, answer)
    if as_json:
        print_json(res.model_dump(mode="json"))
        return
    score = "rubric only: a night's judge scores it" if res.score is None else f"{res.score:.2f}"
    out.print(
        f"{res.task_id}: {score}" + ("" if res.whole else " (the answer is not whole)"),
        markup=False,
    )
    for v in res.verdicts:
        mark = "pass" if v.passed else "FAIL"
        what = f"whole: {v.why}" if v.kind == "whole" else f"{v.kind} {v.value}".strip()
        # a wrapped verdict hangs under its text, not under its mark
        out.print(wrap_words(what, indent=" " * 8, first=f"  {mark}  "), markup=False)
    if res.rubric:
        out.print(
            wrap_words(res.rubric, indent=" " * 4, first="  rubric (not judged here): "),
            markup=False,
        )


def _task_rows(tasks: list[Task]) -> list[list[str]]:
    """A row per task: id, occurrences, checks (controls), context, intent."""
    from skillopt_sleep.mining.judges import context_state
    from skillopt_sleep.mining.mine import block_key

    # several projects: each intent says its project's folder (the same words asked in two
    # projects are two tasks), or "no project" (no folder, or an agent's own folder)
    several = len({t.project for t in tasks}) > 1
    table_rows = []
    for t in tasks:
        checks = ", ".join(check_line(c) for c in t.checks)
        if not checks:
            checks = "rubric" if t.rubric else "none: not scored until a correction arrives"
        demoted = "; ".join(check_line(c) for c in t.demoted)
        if demoted:
            checks += f"; demoted to the rubric: {demoted}"
        block = block_key(t.project)  # the project itself, or None: no project of the user's
        table_rows.append(
            [
                t.id,
                _occurrences(t),
                checks,
                context_state(t),
                (f"[{Path(block).name if block else 'no project'}] " if several else "")
                + t.intent.replace("\n", " ")[:70],
            ]
        )
    return table_rows


def _print_tasks(table_rows: list[list[str]]) -> None:
    """The tasks as a table, or on a narrow terminal a block per task."""
    headers = ["id", "occurrences", "checks (controls)", "context", "intent"]
    if out.width >= 120:
        out.print(fitted_table(headers, table_rows, wrap=[2, 4]))
        return
    # a narrow terminal: a block per task, its free text wrapped whole words
    for tid, occurrences, checks, context, intent in table_rows:
        out.print(
            wrap_words(f"{tid}  {occurrences}  context: {context}", "    "),
            markup=False,
        )
        for label, text in (("intent", intent), ("checks", checks)):
            out.print(
                wrap_words(f"{label}: {text}", "    ", first="  "),
                markup=False,
            )


def _print_task_notes(t: Task) -> None:
    """A task's withheld occurrences and the like tasks kept apart from it (those of other
    projects on one line when there are three or more)."""
    fitted = wrap_words  # a line of free text, wrapped to the terminal in whole words
    for o in t.occurrences:
        if o.note:
            out.print(fitted(f"{t.id}: an occurrence {o.note}"), markup=False)
    joined = [o for o in t.occurrences if o.joined]
    if joined:
        by = "your `tasks join`" if all(o.joined == "user" for o in joined) else "their meaning"
        asks = "; ".join(repr(o.prompt[:60]) for o in joined[:3])
        out.print(
            fitted(
                f"{t.id}: {len(joined)} request(s) joined by {by}, not by their words ({asks}"
                f"{' …' if len(joined) > 3 else ''}); `skillopt-sleep tasks split {t.id}` "
                "undoes it"
            ),
            markup=False,
        )
    # a request asked in many projects: one line for the other projects' tasks, by id
    elsewhere = [w for w in t.apart if w.endswith(_OTHER_PROJECT)]
    grouped = len(elsewhere) >= 3
    for why in t.apart:
        if not (grouped and why.endswith(_OTHER_PROJECT)):
            out.print(fitted(f"{t.id} kept apart from {why}"), markup=False)
    if grouped:
        ids = ", ".join(w.split(" ", 1)[0] for w in elsewhere)
        out.print(
            fitted(
                f"{t.id} kept apart from {len(elsewhere)} like tasks of other projects "
                f"({ids}){_OTHER_PROJECT} each"
            ),
            markup=False,
        )


def _print_mining_notes(report: MineReport) -> None:
    """The tasks asked once, those not distinct, what was not mined."""
    fitted = wrap_words
    if report.tasks_once:
        out.print(
            fitted(
                f"{report.tasks_once} task(s) asked once: they train, not yet validated on a "
                "recurrence (held out = the next time you ask)"
            ),
            markup=False,
        )
    if report.tasks_undistinct:
        from skillopt_sleep.mining.split import NOT_DISTINCT

        out.print(fitted(f"{report.tasks_undistinct} task(s) {NOT_DISTINCT}"), markup=False)
    if report.unread:
        out.print(
            fitted(
                f"{report.unread} reading(s) by meaning wait for the next night's optimizer "
                "(follow-ups the word patterns cannot decide, or a project's requests to group)"
            ),
            markup=False,
        )
    if report.dropped:
        out.print(fitted(f"not mined: {_dropped(report.dropped)}"), markup=False)


def _occurrences(task: Task) -> str:
    """``3: train 1, val 1, test 1`` (``unscored`` when the task is not scorable)."""
    occs = task.occurrences
    if not occs:
        return task.split or "-"
    if not task.split:
        return f"{len(occs)}: unscored"
    roles: Counter[str] = Counter(o.split or "withheld" for o in occs)
    order = ("train", "val", "test", "withheld")
    return f"{len(occs)}: " + ", ".join(f"{r} {roles[r]}" for r in order if roles[r])


def check_line(check: Check) -> str:
    """``kind 'value' [controls]`` of a check as ``tasks`` shows it: each control of the
    transcript (``neg``: fails the corrected answer, ``pos``: passes the accepted one,
    ``gaming``: its own words do not pass the task) with its result."""
    head = check.kind + (f" {check.value!r}" if check.value else "")
    if check.context:
        head += " (needs context)"
    controls = check.controls
    names = {"negative": "neg", "positive": "pos", "anti_gaming": "gaming"}
    shown = " ".join(f"{names.get(k, k)} {v}" for k, v in controls.items())
    return f"{head} [{shown}]" if shown else head


@app.command()
def run(
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Harvest and mine only; no model calls, nothing staged."
    ),
    project: Path | None = typer.Option(None, help="Only tasks from this project."),
    target_backend: str | None = typer.Option(None, help="Backend that replays tasks."),
    target_model: str | None = typer.Option(None),
    optimizer_backend: str | None = typer.Option(None, help="Backend that reflects and judges."),
    optimizer_model: str | None = typer.Option(None),
    as_json: bool = JsonOpt,
) -> None:
    """Run one night now: harvest, mine, replay, reflect, gate, stage a proposal."""

    if not dry_run:
        first_run_setup()
    from skillopt_sleep.cli.nights import print_night, run_night

    target = {k: v for k, v in (("name", target_backend), ("model", target_model)) if v}
    optimizer = {k: v for k, v in (("name", optimizer_backend), ("model", optimizer_model)) if v}
    outcome = run_night(
        service(),
        dry_run=dry_run,
        project=project,
        target=target,
        optimizer=optimizer,
        as_json=as_json,
    )
    assert outcome.result is not None  # a waited-for night has its result
    if as_json:
        print_json(
            outcome.result.model_dump(mode="json") | {"via": outcome.via, "reason": outcome.reason}
        )
        return
    print_night(outcome.result, by=" (run by the daemon)" if outcome.via == "daemon" else "")


def _short(score: float | None) -> str:
    """A score in a list: two decimals (`show` gives three), "—" when there is none."""
    return "—" if score is None else f"{score:.2f}"


@app.command("proposals")
def proposals_cmd(
    all_: bool = typer.Option(
        False, "--all", help="Include adopted, rejected and superseded ones."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """List staged proposals."""
    rows = service().proposals(None if all_ else "staged")
    if as_json:
        print_json([p.model_dump() for p in rows])
        return
    if not rows:
        out.print("no proposals" + ("" if all_ else " staged (see --all)"))
        return
    headers = ["id", "status", "created", "val", "test", "target"]
    cells = [
        [
            r.id,
            r.status,
            (r.created_at or "")[5:16].replace("T", " "),  # MM-DD HH:MM (UTC)
            f"{_short(r.val_before)}→{_short(r.val_after)}",
            f"{_short(r.test_before)}→{_short(r.test_after)}",
            r.target_path,
        ]
        for r in rows
    ]
    if any(r.block for r in rows):  # a shared memory file: which project's block each writes
        from pathlib import PurePath

        headers.insert(5, "block")
        for row, r in zip(cells, rows, strict=True):
            row.insert(5, PurePath(r.block).name if r.block else "(all)")
    out.print(fitted_table(headers, cells, path=len(headers) - 1))


@app.command()
def show(proposal_id: str = typer.Argument(..., metavar="ID"), as_json: bool = JsonOpt) -> None:
    """Show a proposal's report: scores, edits with rationale, per-task deltas, diff."""
    svc = service()
    detail = svc.proposal(proposal_id)
    if as_json:
        report = svc.report(proposal_id)
        print_json(
            report.model_dump(mode="json")
            | {
                "status": detail.status,
                "folder": detail.folder,
                "diff": detail.diff,
                # each rule's status now (refused one by one, adopted or left out)
                "rules": [r.model_dump(mode="json") for r in detail.rules],
            }
        )
        return
    head = f"status: {detail.status}   folder: {detail.folder}"
    text = svc.proposal_markdown(proposal_id)
    if not out.is_terminal:  # piped: the Markdown as it is
        out.print(head, markup=False)
        out.print(text, markup=False)
        return
    # a terminal: rendered Markdown, the diff coloured, through $PAGER (less -R by default)
    import os

    from rich.markdown import Markdown

    os.environ.setdefault("LESS", "-R")
    with out.pager(styles=True):
        out.print(head, markup=False)
        # wrapped at the terminal's width (the console's soft wrap would crop the diff's lines)
        out.print(Markdown(text, code_theme="ansi_dark"), soft_wrap=False)


def _numbers(said: str, option: str) -> list[int]:
    """``"1,3"`` as ``[1, 3]``; BadArgument for anything else."""
    try:
        nums = [int(x) for x in said.replace(" ", "").split(",") if x]
    except ValueError:
        nums = []
    if not nums or any(n < 0 for n in nums):
        raise BadArgument(f"{option} takes rule numbers as `show` lists them, e.g. {option} 1,3")
    return nums


@app.command("adopt")
def adopt_cmd(
    proposal_id: str = typer.Argument(..., metavar="ID"),
    force: bool = typer.Option(
        False, "--force", help="Apply the managed block even if the file changed."
    ),
    all_agents: bool = typer.Option(
        False,
        "--all-agents",
        help="Also adopt the staged copies of its rules for the other agents (p3-codex, …).",
    ),
    allow_flagged: bool = typer.Option(
        False,
        "--allow-flagged",
        help="Write it even though it adds rules the poisoning screen flags (commands that "
        "download and run code, send data out, read credentials, weaken permissions or skip "
        "confirmations, hidden text); each one written is printed. Never allows a target "
        "outside the agents' locations or a document that changed since it was staged.",
    ),
    rules: str | None = typer.Option(
        None,
        "--rules",
        metavar="N,N",
        help="Adopt only these of its rules, by the numbers `show` lists (e.g. 1,3); the "
        "others are left out, not refused (a later night may propose them again).",
    ),
) -> None:
    """Write a staged proposal to its live file (atomically, with a backup)."""
    svc = service()
    chosen = _numbers(rules, "--rules") if rules is not None else None
    done = (
        svc.adopt_all_agents(proposal_id, force=force, allow_flagged=allow_flagged, rules=chosen)
        if all_agents
        else [svc.adopt(proposal_id, force=force, allow_flagged=allow_flagged, rules=chosen)]
    )
    for a in done:
        out.print(f"adopted {a.proposal_id} -> {a.target_path}", markup=False)
        for text in a.left_out:
            out.print(f"  left out: {text}", markup=False)
        for text in a.allowed_flagged:
            out.print(f"  written although flagged (--allow-flagged): {text}", markup=False)
        if a.backup_path:
            out.print(f"  backup: {a.backup_path}", markup=False)
    out.print(
        f"  undo with: skillopt-sleep rollback {proposal_id}"
        + (" --all-agents (every file above), or each by its id" if len(done) > 1 else ""),
        markup=False,
    )
    if not all_agents:
        others = svc.agent_copies(proposal_id)
        if others:
            out.print(
                f"  also staged for other agents: {', '.join(others)} "
                f"(adopt {proposal_id} --all-agents, or each by its id)",
                markup=False,
            )
    else:
        for c in svc.copies_not_staged(proposal_id):
            out.print(f"  no copy for {c.agent} to adopt: {c.reason}", markup=False)


@app.command("reject")
def reject_cmd(
    proposal_id: str = typer.Argument(..., metavar="ID"),
    reason: str = typer.Option("", help="Why (kept with the proposal)."),
    undo: bool = typer.Option(
        False,
        "--undo",
        help="Take back a refusal: a proposal you rejected or rolled back is staged again, "
        "and nights may propose its rules again.",
    ),
    rule: int | None = typer.Option(
        None,
        "--rule",
        metavar="N",
        help="Refuse only this rule (its number in `show`); the others stay adoptable, and "
        "nights may still propose them. With --undo: take that rule's refusal back.",
    ),
) -> None:
    """Discard a staged proposal (a refusal: nights do not propose the same again)."""
    if rule is not None and undo:
        if reason:
            raise BadArgument("--undo takes no --reason")
        back = service().lift_rule_refusal(proposal_id, rule)
        out.print(
            f"lifted the refusal of rule {back.n} of {proposal_id}: {back.rule} "
            f"({proposal_id} is {back.status})",
            markup=False,
        )
        if back.copies:
            out.print(f"  and in its copies: {', '.join(back.copies)}", markup=False)
        return
    if rule is not None:
        got = service().reject_rule(proposal_id, rule, reason)
        out.print(f"refused rule {got.n} of {proposal_id}: {got.rule}", markup=False)
        if got.copies:
            out.print(
                f"  and in its copies for other agents: {', '.join(got.copies)}", markup=False
            )
        if got.status == "rejected":
            out.print(f"  every rule of {proposal_id} is refused: it is rejected", markup=False)
        else:
            out.print(
                f"  {got.remaining} rule(s) left: skillopt-sleep adopt {proposal_id}", markup=False
            )
        return
    if undo:
        if reason:
            raise BadArgument("--undo takes no --reason")
        lifted = service().lift_refusal(proposal_id)
        out.print(
            f"lifted the refusal of {proposal_id} (it was {lifted.was.replace('_', ' ')}): "
            f"now {lifted.status}",
            markup=False,
        )
        for pid, now in lifted.copies.items():
            out.print(f"  and of its copy {pid}: now {now}", markup=False)
        return
    r = service().reject(proposal_id, reason)
    out.print(f"rejected {proposal_id}", markup=False)
    if r.withdrawn:
        out.print(f"  and its copies for other agents: {', '.join(r.withdrawn)}", markup=False)
    out.print(f"  changed your mind? skillopt-sleep reject {proposal_id} --undo", markup=False)


@app.command("rollback")
def rollback_cmd(
    target: str | None = typer.Argument(
        None,
        metavar="[ID|FILE]",
        help="A proposal's id (p3) or an agent's copy's id (p3-codex), or the live file "
        "(default: the latest adoption).",
    ),
    all_agents: bool = typer.Option(
        False,
        "--all-agents",
        help="Also roll back the adopted copies of its rules for the other agents (p3-codex, "
        "…), each restoring its own file.",
    ),
    force: bool = typer.Option(
        False, "--force", help="Restore even if the file changed since adoption."
    ),
) -> None:
    """Restore the file as it was before the adoption, byte for byte (one file; the copies
    for other agents stay adopted unless --all-agents)."""
    a = service().rollback(target, force=force, all_agents=all_agents)
    for line in a.outcome():
        out.print(line if line.startswith("rolled back") else f"  {line}", markup=False)
    if a.still_adopted:
        ids = [c.proposal_id for c in a.still_adopted]
        each = (
            f"skillopt-sleep rollback {ids[0]}"
            if len(ids) == 1
            else f"skillopt-sleep rollback ID (each of {' '.join(ids)})"
        )
        out.print(
            f"  they stay adopted until you roll them back: {each}, or all of them with "
            f"skillopt-sleep rollback {a.proposal_id} --all-agents",
            markup=False,
        )
    if a.kept_copy:
        out.print(f"  your edited version was kept at {a.kept_copy}", markup=False)
    done = [a.proposal_id, *(c.proposal_id for c in a.copies_rolled_back)]
    lift = (
        f"skillopt-sleep reject {done[0]} --undo"
        if len(done) == 1
        else f"skillopt-sleep reject ID --undo (each of {' '.join(done)})"
    )
    head = a.proposal_id.split("-", 1)[0]  # a copy (p3-codex) belongs to its night's p3
    again = (
        f"adopt {head} --all-agents re-applies them"
        if all_agents or len(done) > 1
        else f"adopt {done[0]} re-applies it"
    )
    out.print(
        "  a rollback counts as a refusal: nights will not propose the same again (lift it "
        f"with: {lift}; {again})",
        markup=False,
    )


@app.command()
def status(as_json: bool = JsonOpt) -> None:
    """Show the last nights, pending proposals, harvest accounting and the last error. A
    config file that does not load is reported too (after the rest), with exit 1."""
    st = service().status()
    config_error = st.config_error
    if as_json:
        print_json(st.model_dump(mode="json"))
        if config_error:
            raise typer.Exit(1)
        return
    _print_daemon(st.daemon)
    say = _Say()
    _say_store(say, st)
    _say_last_night(say, st.last_night)
    _say_pending(say, st.pending_proposals, st.notice)
    _say_in_the_wild(say, st.in_the_wild)
    _say_harvest(say, st.harvest)
    if config_error:
        err.print(f"error: {config_error}", markup=False)
        raise typer.Exit(1)


class _Say:
    """``status``'s lines: wrapped at the terminal's width, paths never broken."""

    def __init__(self) -> None:
        self.room = max(24, out.width // 2)

    def path(self, p: str) -> str:
        """A path cut in its middle, its file name whole."""
        from skillopt_sleep.cli.console import shorten_middle

        return shorten_middle(str(p), self.room)

    def __call__(self, line: str) -> None:
        out.print(wrap_words(line, "  " if not line.startswith("  ") else "    "), markup=False)


def _say_store(say: _Say, st: Status) -> None:
    c = st.counts
    say(
        f"store: {say.path(st.database)} ({c.sessions} sessions, {c.messages} "
        f"messages, {c.tasks} tasks)"
        + (f"; {c.headless} headless sessions (claude -p, codex exec, ...)" if c.headless else "")
    )


def _say_last_night(say: _Say, n: NightView | None) -> None:
    from skillopt_sleep.results import night_label

    if not n:
        say("last night: none yet (run `skillopt-sleep run`)")
        return
    say(
        f"last night: #{night_label(n.id)} {n.status} at {n.started_at}"
        f" — val {_fmt(n.val_before)} -> {_fmt(n.val_after)},"
        f" test {_fmt(n.test_before)} -> {_fmt(n.test_after)}, calls {_fmt(n.calls)}"
    )
    if n.error:
        say(f"  error: {n.error}")
    elif n.summary.reason:
        say(f"  {n.summary.reason}")
    if n.summary.dropped:
        say(f"  not mined: {_dropped(n.summary.dropped)}")


def _say_pending(say: _Say, pending: list[PendingProposal], notice: str | None) -> None:
    """The staged proposals, and the notice of one nobody reviewed (its paths shortened)."""
    for p in pending:
        say(
            f"pending proposal {p.id} for {say.path(p.target)} (val "
            f"{_fmt(p.val_before)} -> {_fmt(p.val_after)})"
            + ("" if p.seen else ", not yet reviewed")
        )
    if notice:
        for p in pending:
            notice = notice.replace(p.target, say.path(p.target))
        say(f"notice: {notice}")


def _say_in_the_wild(say: _Say, wild: list[WildCheck]) -> None:
    for w in wild:
        rate = f"{w.pass_rate:.0%}" if w.pass_rate is not None else "—"
        before = f"{w.before_pass_rate:.0%}" if w.before_pass_rate is not None else "—"
        say(
            f"adopted {w.proposal_id} ({w.mode}) {say.path(str(w.target_path))}: {w.sessions} "
            f"matching session(s) since, reached {w.reached}, passed {rate} (before adopt: "
            f"{before} of {w.before_sessions}), corrected {w.corrected} (before: "
            f"{w.before_corrected})"
            + (f"; {w.other_agents} other agents' session(s)" if w.other_agents else "")
            + (f"; {w.unjudged} to be judged by the next night" if w.unjudged else "")
            + (
                f"; reach seen in the transcript for {w.observed} of {w.reached}, inferred "
                "for the others"
                if w.reached
                else ""
            )
        )
        for r in w.rules:
            said = f"  rule: {r.rule} — {r.verdict} ({r.why})"
            if r.rollback:
                said += f"; removal staged as {r.rollback}"
            say(said)
        if w.flag:
            say(f"  warning: {w.flag}")


def _say_harvest(say: _Say, harvest: dict[str, HarvestView]) -> None:
    from skillopt_sleep.results import unreadable_lines

    for name, h in harvest.items():
        # what a parser leaves out by design is no problem: only unreadable lines are said
        bad = unreadable_lines(h.lines_skipped)
        say(
            f"harvest {name}: {h.files_seen} files, {h.sessions_new} new / "
            f"{h.sessions_updated} updated sessions at {h.at}"
            + (
                f"; {_count(h.files_skipped, 'file')} skipped ({_counts(h.files_skipped)})"
                if h.files_skipped
                else ""
            )
            + (f"; {_count(bad, 'unreadable log line')} skipped ({_counts(bad)})" if bad else "")
        )


#: how mining words a task kept apart from a like one of another project
_OTHER_PROJECT = ": a different project"


def _count(counts: dict[str, int], what: str) -> str:
    """``3 files``: the total of ``counts`` with ``what``, plural when it is not one."""
    n = sum(counts.values())
    return f"{n} {what}{'' if n == 1 else 's'}"


#: what each reason mining drops a session or prompt for means, for the user
DROP_REASONS = {
    "headless_session": "headless or programmatic runs (claude -p, Agent SDK, codex exec, "
    "copilot -p, opencode run, openclaw agent), not your own requests; set mine_headless = "
    "true to mine them",
    "self_generated_session": "this tool's own replays",
    "outside_lookback": "sessions older than lookback_days",
    "correction_by_role": "follow-ups that correct or amend the answer before them, kept as "
    "that task's corrections, never tasks of their own",
}


def _dropped(dropped: dict[str, int]) -> str:
    """``headless_session 3 (why), …``: mining's drops with the reason of each."""
    return "; ".join(
        f"{k} {v}" + (f" ({DROP_REASONS[k]})" if k in DROP_REASONS else "")
        for k, v in sorted(dropped.items())
    )


def _counts(counts: Any) -> str:
    """``{"bad_json": 2, "injected": 5}`` as ``injected 5, bad_json 2`` (largest first)."""
    if not isinstance(counts, dict):
        return str(counts)
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _print_daemon(d: DaemonStatus) -> None:
    if not d.running:
        out.print("daemon: not running (start it with `skillopt-sleep start`)")
        return
    if d.responding is False:
        out.print(f"daemon: running (pid {d.pid}) but not answering")
        return
    out.print(f"daemon: running (pid {d.pid}), up {int(d.uptime_seconds or 0)}s")
    for w in d.watched:
        extra = (
            f" via {w.watching}" if w.state == "waiting" else (f": {w.error}" if w.error else "")
        )
        from skillopt_sleep.cli.console import shorten_middle

        root = shorten_middle(w.root, max(24, out.width // 2))
        out.print(
            f"  {w.source}: {root} [{w.state}{extra}] {w.files} files, {w.sessions} sessions",
            markup=False,
        )
    li = d.last_ingest  # the daemon's record of its last pass, as it keeps it (keys vary)
    if li:
        out.print(
            f"  last ingest: {li.get('at')} ({li.get('files', 0)} files, "
            f"{li.get('sessions_new', 0)} new / {li.get('sessions_updated', 0)} updated sessions)"
        )
    night = d.night
    if night.running:
        out.print(f"  night running: {night.trigger} since {night.started_at} (pid {night.pid})")
    if d.ui:
        out.print(f"  dashboard: {d.ui} (`skillopt-sleep ui` prints it with its token)")
    nxt = d.next_night
    if nxt:
        when = "now (due)" if nxt.pending else nxt.at
        out.print(f"  next night: {when}" + (f" — {nxt.waiting}" if nxt.waiting else ""))
    if d.config_error:
        out.print(
            f"  config {d.config} changed since the daemon started and no longer "
            f"loads — the next night will fail: {d.config_error}",
            markup=False,
        )
    elif d.config_changed:
        out.print(
            f"  config {d.config} changed since the daemon started: nights use it, the "
            "schedule and watched folders after a restart (`skillopt-sleep stop`, then `start`)",
            markup=False,
        )
    if d.last_error:
        out.print(f"  daemon error: {d.last_error.message} at {d.last_error.at}", markup=False)


@app.command()
def demo(
    keep: Path | None = typer.Option(
        None,
        help="Put the sandbox in this folder (default: a new temporary folder, kept when a "
        "proposal was staged so you can look around; delete it when done).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Run a full night in a sandbox against the bundled simulator (no agent or key needed)."""
    from skillopt_sleep.cli.nights import signals_interrupt
    from skillopt_sleep.cli.progress import LiveProgress

    with signals_interrupt(), LiveProgress(as_json) as live:
        result = service().demo(keep, None, on_progress=live)
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    out.print(
        f"demo night: {result.status}; val {_fmt(result.val_before)} -> {_fmt(result.val_after)}, "
        f"test {_fmt(result.test_before)} -> {_fmt(result.test_after)}"
    )
    out.print(f"report: {result.report}")
    if result.sandbox:
        out.print(f"sandbox: {result.sandbox}")
    if result.proposal_id:
        import shlex

        # the environment the demo's night ran with: pasted, it works in the sandbox
        out.print(
            f"look around: HOME={shlex.quote(result.user_home)} "
            f"SKILLOPT_SLEEP_HOME={shlex.quote(result.home)} "
            f"skillopt-sleep show {result.proposal_id}",
            markup=False,
        )
    out.print(
        "your own sessions next: skillopt-sleep harvest; skillopt-sleep run --dry-run; "
        "skillopt-sleep run; skillopt-sleep proposals",
        markup=False,
    )


#: Modules that add command groups; each defines ``register(app: typer.Typer) -> None``.
COMMAND_MODULES: list[str] = [
    "mcp",
    "sources",
    "install",
    "daemon",
    "ui",
    "config_cmd",
    "browse",
    "export",
    "doctor",
    "privacy",
]


def _register_extra_commands() -> None:
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(f"skillopt_sleep.cli.{name}").register(app)


_register_extra_commands()


def main() -> None:
    """Console entry point. Click reports usage errors (exit 2) and Ctrl-C (exit 130) itself;
    a SkilloptError, and a filesystem or database failure of the machine (read-only, full,
    damaged, locked too long), is one line with exit 1; anything else is a bug (one line,
    exit 3), an SQLite error of our own making ("no such savepoint") included: it is never
    reported as a damaged database."""
    import sqlite3

    from skillopt_sleep import paths

    paths.make_private()  # the state folder and all in it: the user's alone (0700 / 0600)
    try:
        app()  # standalone mode: ends with sys.exit
    except SkilloptError as exc:
        err.print(f"error: {exc}", markup=False)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("aborted")
        sys.exit(130)
    except (OSError, sqlite3.DatabaseError) as exc:
        # the machine, not a bug: a read-only or full disk, a damaged database, a lock file
        # that cannot be made — one line with the path, exit 1
        from skillopt_sleep.store import machine_failure

        what = machine_failure(exc) if isinstance(exc, sqlite3.DatabaseError) else ""
        if what is None:  # SQLite says our code misused it: a bug
            _internal_error(exc)
        filename = getattr(exc, "filename", None)
        where = f" ({filename})" if filename else ""
        hint = "; the state folder is " + str(paths.state_dir()) + (f" — {what}" if what else "")
        err.print(
            f"error: {type(exc).__name__}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}"
            f"{where}{hint}",
            markup=False,
        )
        sys.exit(1)
    except Exception as exc:
        _internal_error(exc)


def _internal_error(exc: BaseException) -> NoReturn:
    """A bug: one line on stderr, the traceback in ``<state>/last-error.txt``, exit 3."""
    import traceback

    from skillopt_sleep import paths

    where = ""
    try:
        paths.state_dir().mkdir(parents=True, exist_ok=True)
        target = paths.state_dir() / "last-error.txt"
        target.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
        where = f" (traceback in {target})"
    except OSError:
        pass
    err.print(f"error: internal error: {type(exc).__name__}: {exc}{where}", markup=False)
    sys.exit(3)
