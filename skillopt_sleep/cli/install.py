"""``skillopt-sleep install <agent>``, ``uninstall <agent>`` and ``hook session-end``."""

from __future__ import annotations

from pathlib import Path

import typer

from skillopt_sleep import agents

#: ``install`` / ``uninstall`` choices, from the agent registry: every agent with an install
#: shell, by its install key (``claude-code``) and its other spellings (``claude_code``).
AGENT_CHOICES = tuple(
    dict.fromkeys(n for a in agents.installable_agents() for n in (a.install, *a.names) if n)
)
#: what help and completion offer: each agent once, by its install key (the other spellings
#: are accepted, never offered twice)
INSTALL_KEYS = tuple(a.install for a in agents.installable_agents() if a.install)
_AGENT_HELP = ", ".join(INSTALL_KEYS) + "."


def _agent_name(value: str) -> str:
    """The agent named (any spelling in :data:`AGENT_CHOICES`); a usage error (exit 2)
    naming the install keys otherwise."""
    if value not in AGENT_CHOICES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(INSTALL_KEYS)}")
    return value


#: what the argument accepts, for whoever checks commands written in the docs
_agent_name.choices = AGENT_CHOICES  # type: ignore[attr-defined]


def _complete_agent(incomplete: str) -> list[str]:
    return [n for n in INSTALL_KEYS if n.startswith(incomplete)]


_SYMBOL = {
    "create": "+",
    "update": "~",
    "unchanged": "=",
    "restore": "<",
    "delete": "-",
    "edit": "~",
    "keep": "=",
    "missing": "?",
}


def _print(report, verb: str) -> None:
    from skillopt_sleep.cli.console import out

    head = f"{verb} {report.agent} ({report.scope})" + (
        " — dry run, nothing written" if report.dry_run else ""
    )
    out.print(head, markup=False)
    for c in report.changes:
        out.print(
            f"  {_SYMBOL.get(c.action, '?')} {c.action:<9} {c.path}  [{c.what}]", markup=False
        )
    for n in report.notes:
        out.print(f"  note: {n}", markup=False)
    if not report.changes:
        out.print("  nothing to do", markup=False)
    elif not report.changed:
        out.print(
            "  no changes (already "
            + ("installed" if verb.startswith("install") else "as recorded")
            + ")",
            markup=False,
        )


_AGENT = typer.Argument(
    ...,
    help=_AGENT_HELP,
    metavar="AGENT",
    callback=_agent_name,
    autocompletion=_complete_agent,
)
_DRY_RUN = typer.Option(False, "--dry-run", help="Show what would change; write nothing.")
_JSON = typer.Option(False, "--json", help="Print machine-readable JSON.")


def _run(
    verb: str, agent: str, user: bool, project: Path | None, dry_run: bool, as_json: bool
) -> None:
    """``install`` or ``uninstall`` through the service, its report printed (or as JSON)."""
    from skillopt_sleep.cli.console import print_json as _print_json
    from skillopt_sleep.cli.console import service
    from skillopt_sleep.errors import BadArgument

    if user and project:
        raise BadArgument("--user and --project are mutually exclusive")
    svc = service()
    run = svc.install if verb == "install" else svc.uninstall
    report = run(agent, project, dry_run=dry_run)
    if as_json:
        _print_json(report.as_dict())
    else:
        _print(report, verb)


def install_cmd(
    agent: str = _AGENT,
    user: bool = typer.Option(False, "--user", help="Install for your user account (the default)."),
    project: Path | None = typer.Option(
        None, "--project", metavar="DIR", help="Install into this project's config instead."
    ),
    dry_run: bool = _DRY_RUN,
    as_json: bool = _JSON,
) -> None:
    """Install the agent shell: MCP server entry, skill, instructions snippet (Claude Code:
    the plugin with slash commands and the SessionEnd hook). Merges into existing config
    files, backs up what it changes, and is idempotent."""
    _run("install", agent, user, project, dry_run, as_json)


def uninstall_cmd(
    agent: str = _AGENT,
    user: bool = typer.Option(
        False, "--user", help="Uninstall from your user account (the default)."
    ),
    project: Path | None = typer.Option(
        None, "--project", metavar="DIR", help="Uninstall from this project's config."
    ),
    dry_run: bool = _DRY_RUN,
    as_json: bool = _JSON,
) -> None:
    """Undo `install`: every file it changed gets its original bytes back (or loses only
    install's part, if you edited it since)."""
    _run("uninstall", agent, user, project, dry_run, as_json)


def session_end(
    verbose: bool = typer.Option(False, "--verbose", help="Print what happened."),
) -> None:
    """Ask a running daemon to index new session bytes now; returns at once and exits 0
    whether or not a daemon runs (the Claude Code SessionEnd hook calls this)."""
    from skillopt_sleep.service import session_end_hook

    result = session_end_hook()
    if verbose:
        typer.echo(result)


def register(app: typer.Typer) -> None:
    app.command("install")(install_cmd)
    app.command("uninstall")(uninstall_cmd)
    hook = typer.Typer(
        help="Entry points for agent hooks (fast, silent, never fail).", no_args_is_help=True
    )
    hook.command("session-end")(session_end)
    app.add_typer(hook, name="hook")
