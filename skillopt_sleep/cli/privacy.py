"""``skillopt-sleep forget`` (delete stored data for good) and ``outbox`` (what was sent)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("forget")
    def forget_cmd(
        project: str | None = typer.Option(
            None, "--project", help="Forget the sessions of this folder (and below)."
        ),
        session: str | None = typer.Option(
            None, "--session", help="Forget this session (`source:key`, or its key)."
        ),
        before: str | None = typer.Option(
            None, "--before", help="Forget sessions last active before this date (YYYY-MM-DD)."
        ),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="Only count what would be forgotten."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    ) -> None:
        """Delete stored data for good: sessions, messages and their search index, the tasks
        mined from them with their replays, and their texts in proposal reports (criteria
        given together must all match). The database is then compacted so no page keeps it.
        To keep a project out from now on: `[privacy] deny_projects` or a
        `.skillopt-sleep-ignore` file in it."""
        from skillopt_sleep.cli.console import out, print_json, service

        res = service().forget(project=project, session=session, before=before, dry_run=dry_run)
        if as_json:
            print_json(res.model_dump(mode="json"))
            return
        verb = "would forget" if res.dry_run else "forgot"
        out.print(
            f"{verb} {res.sessions} session(s), {res.messages} message(s), {res.tasks} task(s), "
            f"{res.rollouts} replay(s)"
            + (f"; reports edited: {', '.join(res.reports)}" if res.reports else ""),
            markup=False,
        )

    @app.command("outbox")
    def outbox_cmd(
        limit: int = typer.Option(50, "--limit", min=1, help="Show the last N calls."),
        prompts: bool = typer.Option(
            False, "--prompts", help="Also print the (redacted) text each call sent, while kept."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    ) -> None:
        """Every outbound model call, newest first: when, role and purpose, backend, model,
        endpoint host, characters sent and answered, a sha256 of what was sent, and the status.
        The redacted text sent is kept for `privacy.outbox_days` days."""
        from skillopt_sleep.cli.console import out, print_json, service

        rows = service().outbox(limit=limit)
        if as_json:
            print_json([r.as_dict() for r in rows])
            return
        if not rows:
            out.print("no outbound model calls recorded yet")
            return
        for r in rows:
            at = str(r.at or "")[:19].replace("T", " ")  # UTC, to the second
            call = f"{at}  {r.role}/{r.purpose}  {r.status}"
            where = f"{r.backend} {r.model}" + (f" @{r.endpoint}" if r.endpoint else "")
            sizes = f"sent {r.chars} chars, got {r.response_chars}"
            sha = (r.sha256 or "")[:12]
            line = f"{call}  {where}  {sizes}  sha256 {sha}"
            if len(line) > out.width:  # a narrow terminal: the call, then where and what
                line = f"{call}  {sizes}\n    {where}  sha256 {sha}"
            out.print(line, markup=False)
            if prompts and r.prompt:
                out.print("    " + r.prompt.replace("\n", "\n    "), markup=False)
