"""``skillopt-sleep doctor``: what works and what does not, one check a line (exit 1 when a
check fails)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor_cmd(
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
        offline: bool = typer.Option(
            False, "--offline", help="Skip the backend checks (no connection, no agent run)."
        ),
    ) -> None:
        """Check the config, the store's integrity, every agent's logs and CLI (with its
        version), the backends (reachable and authorised), the login service and daemon."""
        from skillopt_sleep.cli.console import fitted_table, out, print_json, service

        checks = service().doctor(backends=not offline)
        if as_json:
            print_json([c.model_dump(mode="json") for c in checks])
        else:
            rows = [[c.status, c.name, c.detail] for c in checks]
            out.print(fitted_table(["status", "check", "detail"], rows, wrap=[2]))
        if any(c.status == "fail" for c in checks):
            raise typer.Exit(1)
