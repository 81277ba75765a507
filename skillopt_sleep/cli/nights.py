"""How ``run`` (and ``demo``) run a night: here, or handed to the running daemon; signals
during an in-process night; the printed outcome. Used by :mod:`skillopt_sleep.cli`."""

from __future__ import annotations

from typing import Any

import typer

from skillopt_sleep.cli import _fmt, _print_json, _store, err, out


class Terminated(KeyboardInterrupt):
    """SIGTERM / SIGHUP during an in-process night: unwinds like Ctrl-C (which Typer turns
    into exit 130), so the agent CLI running a rollout is killed with its process group and
    the night is recorded ``interrupted``; the process then exits ``128 + signal``."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum


class signals_interrupt:
    """While a night runs in this process, SIGTERM and SIGHUP raise :class:`Terminated`."""

    def __enter__(self) -> None:
        import signal
        import threading

        self.saved: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return

        def raise_terminated(signum: int, _frame: Any) -> None:
            raise Terminated(signum)

        for name in ("SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is not None:
                self.saved[sig] = signal.signal(sig, raise_terminated)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        import signal

        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        if isinstance(exc, Terminated):
            err.print(f"aborted by signal {exc.signum}: the night is recorded interrupted")
            raise typer.Exit(128 + exc.signum) from None
        if isinstance(exc, KeyboardInterrupt):
            err.print("aborted (Ctrl-C): the night is recorded interrupted")
            raise typer.Exit(130) from None


def run_here(settings: Any, dry_run: bool, as_json: bool) -> Any:
    from skillopt_sleep.night.run import run_night

    if as_json or not err.is_terminal:
        say = (lambda m: None) if as_json else (lambda m: err.print(m, markup=False))
        result = run_night(_store(), settings, dry_run=dry_run, progress=say)
    else:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TextColumn("[dim]{task.completed} rollouts"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            job = bar.add_task("starting", total=None)

            def show(m: str) -> None:
                bar.update(job, description=m)
                bar.console.print(f"[dim]{m}[/]")

            result = run_night(
                _store(),
                settings,
                dry_run=dry_run,
                progress=show,
                on_rollout=lambda _s: bar.advance(job),
            )
    return result


def print_night(r: dict[str, Any], by: str = "") -> None:
    """A night's outcome (a ``NightResult`` as a dict, from this process or the daemon)."""
    summary = r.get("summary") or {}
    cost = r.get("cost") or {}
    out.print(f"night {r.get('night_id')}{by}: {r.get('status')}")
    if summary.get("reason"):
        out.print(f"  {summary['reason']}", markup=False)
    if summary.get("warning"):
        out.print(f"  warning: {summary['warning']}", markup=False)
    out.print(
        f"  tasks: {summary.get('train', 0)} train, {summary.get('val', 0)} val, "
        f"{summary.get('test', 0)} test"
    )
    if summary.get("test_note"):
        out.print(f"  test {summary['test_note']}", markup=False)
    if r.get("status") not in ("planned", "no_tasks"):
        out.print(
            f"  val {_fmt(r.get('val_before'))} -> {_fmt(r.get('val_after'))}, "
            f"test {_fmt(r.get('test_before'))} -> {_fmt(r.get('test_after'))}"
        )
        out.print(f"  model calls: {cost.get('calls')} (+{cost.get('cached_calls')} cached)")
    if r.get("proposal_id"):
        out.print(f"  proposal {r['proposal_id']} staged for {r.get('target_path')}", markup=False)
        out.print(
            f"  review: skillopt-sleep show {r['proposal_id']}; "
            f"adopt: skillopt-sleep adopt {r['proposal_id']}"
        )


def daemon_runs_it(as_json: bool) -> bool:
    """A plain ``run`` goes to the running daemon when it was started with the default config
    file too; False when none answers or it runs with another config (the night then runs
    here). Raises NightError (one line) when the daemon refuses or the night fails."""
    from skillopt_sleep.daemon import process
    from skillopt_sleep.daemon.control import NoDaemon, request
    from skillopt_sleep.errors import NightError

    try:
        request("ping", timeout=2)
    except NoDaemon:
        return False
    if not process.runs_with_config(None):
        if not as_json:
            conf = (process.read_pidfile() or {}).get("config")
            err.print(
                f"the daemon runs with another config ({conf}): running the night here",
                markup=False,
            )
        return False
    if not as_json:
        err.print("[dim]the daemon is running: it runs the night; waiting for the result[/]")
    try:
        reply = request("run-now", timeout=None, wait=True, trigger="cli")
    except KeyboardInterrupt:
        err.print(
            "stopped waiting (Ctrl-C); the night goes on in the daemon: follow it with "
            "`skillopt-sleep status`, stop it with `skillopt-sleep stop`"
        )
        raise typer.Exit(130) from None
    except NoDaemon as exc:
        raise NightError(
            f"the daemon stopped during the night ({exc}); `skillopt-sleep status` "
            "shows the night, the daemon log says why"
        ) from None
    if not reply.get("ok"):
        if reply.get("interrupted") or reply.get("error") == "interrupted":
            raise NightError(
                "the night was interrupted (the daemon stopped or the night was "
                "killed); `skillopt-sleep status` shows it"
            )
        raise NightError(reply.get("error") or "the daemon refused to run a night")
    result = reply.get("result") or {}
    if as_json:
        _print_json(dict(result, via="daemon"))
        return True
    print_night(result, by=" (run by the daemon)")
    return True
