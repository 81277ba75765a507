"""``skillopt-sleep start | stop | service install | service uninstall``."""

from __future__ import annotations

import typer

from skillopt_sleep.cli.console import err, out
from skillopt_sleep.cli.console import state as _state


def register(app: typer.Typer) -> None:
    app.command("start")(start)
    app.command("stop")(stop)
    service = typer.Typer(
        help="Install or remove the login service (systemd / launchd / Task Scheduler).",
        no_args_is_help=True,
    )
    service.command("install")(service_install)
    service.command("uninstall")(service_uninstall)
    app.add_typer(service, name="service")


def start(
    foreground: bool = typer.Option(
        False, "--foreground", help="Run in this process (for service managers); do not detach."
    ),
    ready_fd: int | None = typer.Option(None, "--ready-fd", hidden=True),
    timeout: float = typer.Option(60.0, help="Seconds to wait for the daemon to report ready."),
) -> None:
    """Start the background daemon: live harvest, nightly schedule, control socket."""
    from skillopt_sleep.cli.console import first_run_setup
    from skillopt_sleep.daemon import process

    first_run_setup()
    config = _state.get("config")
    if foreground:
        from skillopt_sleep.daemon.core import run_foreground

        pid = process.running_pid() if ready_fd is None else None
        if pid:
            _same_config_or_exit(pid, config)
            out.print(f"already running (pid {pid})")
            raise typer.Exit(0)
        raise typer.Exit(run_foreground(config, ready_fd=ready_fd))
    res = process.start_detached(config, timeout=timeout)
    if res.already:
        _same_config_or_exit(res.pid, config)
        out.print(f"already running (pid {res.pid})")
        return
    out.print(f"started (pid {res.pid}); log: {process.log_path()}")


def _same_config_or_exit(pid: int, config) -> None:
    """A running daemon started with another config file cannot honour this one: say so."""
    from pathlib import Path

    from skillopt_sleep import paths
    from skillopt_sleep.daemon import process

    running = (process.read_pidfile() or {}).get("config") or str(paths.config_file())
    wanted = str(Path(config).expanduser().resolve()) if config else str(paths.config_file())
    if running != wanted:
        err.print(
            f"error: the daemon is already running (pid {pid}) with config {running}; "
            f"run `skillopt-sleep stop` first to start it with {wanted}",
            markup=False,
        )
        raise typer.Exit(1)


def stop(timeout: float = typer.Option(60.0, help="Seconds to wait before killing it.")) -> None:
    """Ask the daemon to finish or checkpoint its current step and exit."""
    from skillopt_sleep.daemon import process

    res = process.stop_daemon(timeout=timeout)
    if not res.was_running:
        out.print("not running")
        return
    extra = (
        f"; killed {len(res.killed_children)} leftover child process(es)"
        if res.killed_children
        else ""
    )
    if res.stopped:
        out.print(f"stopped (pid {res.pid}, {res.how}, {res.seconds:.1f}s){extra}")
    else:
        err.print(f"error: pid {res.pid} is still running")
        raise typer.Exit(1)


def service_install(
    now: bool = typer.Option(
        False, "--now", help="Also enable and start it (systemctl/launchctl/schtasks)."
    ),
) -> None:
    """Write the service definition for this OS, running `skillopt-sleep start --foreground`."""
    from skillopt_sleep.install import units

    res = units.install(config=_state.get("config"), activate=now)
    out.print(f"wrote {res.kind} service: {res.path}")
    if not now:
        out.print(f"enable it with: {res.hint}")


def service_uninstall(
    now: bool = typer.Option(False, "--now", help="Also stop and disable it first."),
) -> None:
    """Remove the service definition written by `service install`."""
    from skillopt_sleep.install import units

    res = units.uninstall(deactivate=now)
    if res is None:
        out.print("no service installed")
        return
    out.print(f"removed {res.kind} service: {res.path}", markup=False)
    for link in res.links:
        out.print(f"removed link: {link}", markup=False)
    for why in res.failed:
        err.print(f"warning: {why}", markup=False)
