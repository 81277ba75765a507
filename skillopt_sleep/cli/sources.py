"""``skillopt-sleep sources``: every known agent, whether its logs exist here, and what is enabled."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("sources")
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
        from skillopt_sleep import paths
        from skillopt_sleep.cli import _print_json, _settings, _state, out
        from skillopt_sleep.sources.discovery import (
            discover_sources,
            enableable,
        )
        from skillopt_sleep.sources.discovery import (
            enable_found as do_enable,
        )

        config_path = _state["config"] or paths.config_file()
        settings = _settings()
        statuses = discover_sources(settings, config_path=config_path)
        created = not config_path.exists()
        changed: list[str] = []
        if enable_found or created:
            changed = do_enable(config_path, statuses, switch_disabled=enable_found)
            if changed or created:
                from skillopt_sleep.config import load_settings

                statuses = discover_sources(load_settings(config_path), config_path=config_path)
        idle = enableable(config_path, statuses)  # found here, not enabled
        if as_json:
            _print_json(
                {
                    "config": str(config_path),
                    "created": created,
                    "enabled_now": changed,
                    "found_not_enabled": idle,
                    "sources": [s.to_dict() for s in statuses],
                }
            )
            return
        from rich.table import Table

        from skillopt_sleep.agents import get_agent

        table = Table("source", "agent", "enabled", "root", "session files", "bytes", "status")
        for s in statuses:
            root = next(
                (r["path"] for r in s.roots if r["exists"]), s.roots[0]["path"] if s.roots else "—"
            )
            table.add_row(
                s.name,
                get_agent(s.agent).label if s.agent else "",
                "yes" if s.enabled else "no",
                ("" if s.found else "(missing) ") + root,
                str(s.sessions),
                _size(s.bytes),
                s.status,
            )
        out.print(table)
        if created:
            out.print(
                f"created {config_path}" + (f" enabling: {', '.join(changed)}" if changed else "")
            )
        elif changed:
            out.print(f"enabled in {config_path}: {', '.join(changed)}")
        if changed:
            from skillopt_sleep.daemon.control import daemon_status

            if daemon_status(timeout=1).get("running"):
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
