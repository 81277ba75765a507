"""Looking back: ``nights`` (the history), ``search`` (full text over the harvested messages)
with ``session show ID``, and ``logs`` (the daemon's night log)."""

from __future__ import annotations

from typing import Any

import typer

session_app = typer.Typer(
    help="Harvested sessions (search hits name them).", no_args_is_help=True, rich_markup_mode=None
)
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON.")


def _arrow(before: float | None, after: float | None) -> str:
    from skillopt_sleep.cli.console import fmt_score

    return f"{fmt_score(before)}→{fmt_score(after)}"


def _per_block(n: Any) -> bool:
    return len(n.summary.blocks) > 1


def nights_cmd(
    limit: int = typer.Option(20, "--limit", min=1, max=1000, help="How many, newest first."),
    as_json: bool = JsonOpt,
) -> None:
    """The nights so far, newest first: status, scores, model calls, time and proposal."""
    from skillopt_sleep.cli.console import fitted_table, out, print_json, service
    from skillopt_sleep.results import night_label

    rows = service().nights(limit)
    if as_json:
        print_json([n.model_dump(mode="json") for n in rows])
        return
    if not rows:
        out.print("no nights yet (run `skillopt-sleep run`, or `skillopt-sleep demo`)")
        return
    table = [
        [
            night_label(n.id),  # a dry run: d1, d2, … (it takes no night number)
            (n.started_at or "")[5:16].replace("T", " "),  # MM-DD HH:MM (UTC)
            "dry run" if n.dry_run else n.status.value,
            # a night of several blocks has no one score: each block has its own
            "per block" if _per_block(n) else _arrow(n.val_before, n.val_after),
            "per block" if _per_block(n) else _arrow(n.test_before, n.test_after),
            str(n.calls or 0),
            f"{n.seconds:.0f}s" if n.seconds is not None else "—",
            ", ".join(n.summary.staged_proposals(n.proposal_id)) or "—",  # one per block
        ]
        for n in rows
    ]
    headers = ["night", "started", "status", "val", "test", "calls", "time", "proposal"]
    out.print(fitted_table(headers, table))


def search_cmd(
    query: str = typer.Argument(..., help="Words to find (full text, best match first)."),
    agent: str | None = typer.Option(None, "--agent", help="Only this source (codex, …)."),
    project: str | None = typer.Option(None, "--project", help="Only under this folder."),
    limit: int = typer.Option(20, "--limit", min=1, max=200),
    as_json: bool = JsonOpt,
) -> None:
    """Full-text search over the harvested (redacted) messages; `session show ID` shows one
    hit's whole session."""
    from skillopt_sleep.cli.console import fitted_table, out, print_json, service

    result = service().search(query, agent=agent, project=project, limit=limit)
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    if not result.hits:
        out.print(f"no message matches {query!r}", markup=False)
        return
    # narrow: the session's key (its source is the next column) cut in its middle; `session
    # show` takes either form as it is printed
    narrow = out.width < 120
    rows = [
        [
            _shorten_id(h.session_id.partition(":")[2] or h.session_id, 20)
            if narrow
            else h.session_id,
            h.agent,
            h.role,
            " ".join(h.snippet.split())[:200],
        ]
        for h in result.hits
    ]
    out.print(fitted_table(["session", "source", "role", "match"], rows, wrap=[3]))


def _shorten_id(session_id: str, width: int) -> str:
    """``e14a81b3-bd…8994dcc8``: a session id cut in its middle to ``width`` characters, its
    start and end kept (``session show`` resolves the shortened form)."""
    if len(session_id) <= width:
        return session_id
    tail = session_id[-8:]
    return session_id[: max(1, width - len(tail) - 1)] + "…" + tail


@session_app.command("show")
def session_show(
    session_id: str = typer.Argument(..., metavar="ID"), as_json: bool = JsonOpt
) -> None:
    """A harvested session's (redacted) messages in order. ID: as `search` shows it (on a
    narrow terminal shortened, `e14a81b3-bd…8994dcc8`), without its `codex:`, or a unique
    prefix."""
    from skillopt_sleep.cli.console import out, print_json, service

    view = service().session(session_id)
    if as_json:
        print_json(view.model_dump(mode="json"))
        return
    out.print(
        f"session {view.id} ({view.agent}) {view.project or ''} {view.started_at or ''}".rstrip(),
        markup=False,
    )
    for m in view.messages:
        tools = f" [tools: {', '.join(m.tool_names)}]" if m.tool_names else ""
        out.print(f"\n{m.role}{tools}:", markup=False)
        out.print(m.text, markup=False)


def logs_cmd(
    max_bytes: int = typer.Option(64_000, "--bytes", min=1, help="At most this much, the end."),
    night: str | None = typer.Option(
        None,
        "--night",
        "-n",
        metavar="ID",
        help="That night's own log (its id, from `nights`; a dry run's: d1, …).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """The end of the daemon's night log (the output of the nights it ran), or of one
    night's own log with --night."""
    from skillopt_sleep.cli.console import out, print_json, service
    from skillopt_sleep.errors import BadArgument
    from skillopt_sleep.results import night_label, parse_night

    night_id = None if night is None else parse_night(night)
    if night is not None and night_id is None:
        raise BadArgument(f"--night takes a night's id (3, or d1 for a dry run), not {night!r}")
    log = service().night_log_view(max_bytes, night_id=night_id)
    if as_json:
        print_json(log.model_dump(mode="json"))
        return
    if not log.text:
        hint = (
            f"; the last night's own log: "
            f"`skillopt-sleep logs --night {night_label(log.last_night_id)}`"
            if log.last_night_id is not None
            else ""
        )
        out.print(f"no night log yet ({log.path}){hint}", markup=False)
        return
    out.print(log.text.rstrip("\n"), markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("nights")(nights_cmd)
    app.command("search")(search_cmd)
    app.command("logs")(logs_cmd)
    app.add_typer(session_app, name="session")
