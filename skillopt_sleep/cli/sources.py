"""``skillopt-sleep sources``: every known agent, whether its logs exist here, and what is enabled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from skillopt_sleep.service.onboarding import SourcesReport
    from skillopt_sleep.sources.discovery import SourceStatus


def register(app: typer.Typer) -> None:
    app.command("sources")(sources_cmd)


def sources_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    enable_found: bool = typer.Option(
        False,
        "--enable-found",
        help="Enable the agents whose logs were found: adds [sources.<name>] tables the config "
        "file does not have yet and switches `enabled = false` to true for agents whose "
        "logs exist now (edited in place; nothing else in the file changes).",
    ),
) -> None:
    """List every known agent: root found?, sessions and bytes, enabled?, readable format?

    On a new install (no config file yet) the first run writes one that enables every agent
    whose logs were found. Later, agents found but not enabled are named with a hint;
    `--enable-found` enables them.
    """
    from skillopt_sleep.cli.console import out, service
    from skillopt_sleep.cli.console import print_json as _print_json

    found = service().sources(enable_found=enable_found)
    if as_json:
        _print_json(
            {
                "config": str(found.config),
                "created": found.created,
                "enabled_now": found.enabled_now,
                "found_not_enabled": found.found_not_enabled,
                "sources": [s.to_dict() for s in found.sources],
            }
        )
        return
    out.print(_table(found.sources))
    _say_enabled(found, enable_found)


def _table(statuses: list[SourceStatus]) -> Any:
    """A row per agent: source, its agent (where there is room), on, root, files, bytes,
    status."""
    from skillopt_sleep.agents import get_agent
    from skillopt_sleep.cli.console import fitted_table, out

    # the agent's label only where there is room: the source name says it too; a root
    # that is not there says so in `status` ("not found")
    labels = out.width >= 100
    rows = []
    for s in statuses:
        root = next((r.path for r in s.roots if r.exists), s.roots[0].path if s.roots else "—")
        label = [get_agent(s.agent).label if s.agent else ""] if labels else []
        rows.append(
            [
                s.name,
                *label,
                "yes" if s.enabled else "no",
                root,
                str(s.sessions),
                _size(s.bytes),
                s.status,
            ]
        )
    headers = ("source", *(["agent"] if labels else []), "on", "root", "files", "bytes")
    path = len(headers) - 3
    return fitted_table((*headers, "status"), rows, path=path, wrap=(len(headers),))


def _say_enabled(found: SourcesReport, enable_found: bool) -> None:
    """What the config file now enables (the daemon to restart), and what it does not yet."""
    from skillopt_sleep.cli.console import out, service

    config_path, changed, idle = found.config, found.enabled_now, found.found_not_enabled
    if found.created:
        out.print(
            f"created {config_path}" + (f" enabling: {', '.join(changed)}" if changed else "")
        )
    elif changed:
        out.print(f"enabled in {config_path}: {', '.join(changed)}")
    if changed:
        if service().daemon_status(timeout=1).running:
            out.print(
                "the running daemon watches its old list: restart it "
                "(`skillopt-sleep stop && skillopt-sleep start`)"
            )
    elif enable_found:
        out.print(
            "--enable-found: nothing to enable (every agent whose logs were found is enabled)"
        )
    if idle:
        out.print(
            f"found but not enabled: {', '.join(idle)} "
            "(run `skillopt-sleep sources --enable-found` to enable them)",
            markup=False,
        )


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
