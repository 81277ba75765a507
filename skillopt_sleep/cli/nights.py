"""How ``run`` (and ``demo``) run a night: here, or handed to the running daemon; signals
during an in-process night; the printed outcome. Used by :mod:`skillopt_sleep.cli`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from skillopt_sleep.cli.console import err, out
from skillopt_sleep.cli.console import fmt_score as _fmt
from skillopt_sleep.results import (
    WITHHELD_SHOWN,
    AgentCopy,
    Dispatch,
    NightOutcome,
    NightResult,
    NightStatus,
    Trigger,
    night_label,
)
from skillopt_sleep.service import Service


class Terminated(KeyboardInterrupt):
    """SIGTERM / SIGHUP during an in-process night: unwinds like Ctrl-C (which Typer turns
    into exit 130), so the agent CLI running a rollout is killed with its process group and
    the night is recorded ``interrupted``; the process then exits ``128 + signal``."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum


class signals_interrupt:
    """While a night runs, SIGTERM and SIGHUP raise :class:`Terminated`. ``in_daemon()``
    tells whether the night runs in the daemon (this process only waits for it)."""

    def __init__(self, in_daemon: Callable[[], bool] = lambda: False) -> None:
        self.in_daemon = in_daemon

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
        if isinstance(exc, KeyboardInterrupt) and self.in_daemon():
            err.print(
                "stopped waiting; the night goes on in the daemon: follow it with "
                "`skillopt-sleep status`, stop it with `skillopt-sleep stop`"
            )
            raise typer.Exit(128 + exc.signum if isinstance(exc, Terminated) else 130) from None
        if isinstance(exc, Terminated):
            err.print(f"aborted by signal {exc.signum}: the night is recorded interrupted")
            raise typer.Exit(128 + exc.signum) from None
        if isinstance(exc, KeyboardInterrupt):
            err.print("aborted (Ctrl-C): the night is recorded interrupted")
            raise typer.Exit(130) from None


def run_night(
    service: Service,
    *,
    dry_run: bool,
    project: Path | None,
    target: dict[str, str],
    optimizer: dict[str, str],
    as_json: bool,
) -> NightOutcome:
    """Run a night through the service: here (live progress on a terminal, JSON lines on
    stderr with ``--json``: :mod:`.progress`) or in the daemon (waiting for its result; its
    progress is not streamed, one line says so). Ctrl-C / SIGTERM / SIGHUP: a night here is
    killed with its agent CLIs and recorded ``interrupted``; a night in the daemon goes on
    there."""
    from skillopt_sleep.cli.progress import LiveProgress

    route: dict[str, Dispatch] = {}
    in_daemon = "the daemon is running: it runs the night; waiting for the result"

    with (
        signals_interrupt(in_daemon=lambda: "d" in route and route["d"].where == "daemon"),
        LiveProgress(as_json) as live,
    ):

        def on_dispatch(d: Dispatch) -> None:
            route["d"] = d
            if d.where == "daemon":
                live.note(in_daemon + " (its progress is in the daemon log)", step="dispatch")
                if not as_json and live.mode == "off":
                    err.print(f"[dim]{in_daemon}[/]")
            elif d.daemon_running:
                live.note(f"{d.reason}: running the night here", step="dispatch")
                if not as_json and live.mode == "off":
                    err.print(f"{d.reason}: running the night here", markup=False)

        return service.run_night(
            dry_run=dry_run,
            project=project,
            target=target,
            optimizer=optimizer,
            trigger=Trigger.CLI,
            on_dispatch=on_dispatch,
            on_progress=live,
        )


def _line(text: str) -> None:
    """One line of a night's outcome, printed as it is (no rich markup: it quotes the
    user's text)."""
    out.print(text, markup=False)


def copy_lines(copies: list[AgentCopy]) -> list[str]:
    """One line per other agent the night's tasks came from: its copy staged (certified on
    which of its own tasks, through which backend), or why not and what to do."""
    out = []
    for c in copies:
        on = f"{c.tasks} {c.certified_on} task(s) of its own" if c.certified_on else ""
        if c.status == "staged":
            out.append(
                f"{c.agent}'s copy: {c.proposal_id} staged, certified through {c.backend} on "
                f"{on} ({_fmt(c.before)} -> {_fmt(c.after)})"
            )
        elif c.status == "same":
            out.append(f"{c.agent}'s copy: {c.reason}")
        else:
            out.append(f"{c.agent}'s copy not staged: {c.reason}")
    return out


def print_night(r: NightResult, by: str = "") -> None:
    """A night's outcome (from this process or the daemon)."""
    summary, cost = r.summary, r.cost
    if r.night_id < 0:  # a dry run: no night number taken
        out.print(f"dry run {night_label(r.night_id)}{by}: {r.status}")
    else:
        out.print(f"night {r.night_id}{by}: {r.status}")
    if summary.reason:
        _line(f"  {summary.reason}")
    if summary.warning:
        _line(f"  warning: {summary.warning}")
    out.print(
        f"  tasks: {summary.scorable} scored; occurrences: {summary.train} train, "
        f"{summary.val} val, {summary.test} test"
    )
    if summary.held_out:
        _line(f"  {summary.held_out}")
    if summary.not_validated:
        _line(
            f"  {summary.not_validated} task(s) asked once: trained, not yet validated on a "
            "recurrence"
        )
    if summary.not_distinct:
        _line(
            f"  {summary.not_distinct} task(s) asked again only in the same words with the same "
            "context: not yet validated on a distinct recurrence"
        )
    for w in (summary.withheld or [])[:WITHHELD_SHOWN]:
        _line(f"  {w.occurrence} (task {w.task_id}): {w.why}")
    if len(summary.withheld or []) > WITHHELD_SHOWN:
        _line(f"  … and {len(summary.withheld or []) - WITHHELD_SHOWN} more withheld")
    no_test = summary.no_test_line(r)
    if no_test:
        _line(f"  {no_test}")
    if summary.noise is not None:
        _line(
            f"  the target's answers vary: val scored on {summary.noise.samples} sample(s) per "
            f"occurrence, spread ±{summary.noise.spread:.3f} (a gain had to exceed it)"
        )
    if r.status not in (NightStatus.PLANNED, NightStatus.NO_TASKS):
        if len(summary.blocks) > 1:  # no one score: each block has its own
            out.print("  val and test: scored per block (below)")
        else:
            out.print(
                f"  val {_fmt(r.val_before)} -> {_fmt(r.val_after)}, "
                + (
                    "no test score (above)"
                    if no_test
                    else f"test {_fmt(r.test_before)} -> {_fmt(r.test_after)}"
                )
            )
        tokens = (cost.input_tokens or 0) + (cost.output_tokens or 0)
        # the same numbers the proposal's report gives (its "cost" line), then the night's time
        out.print(
            f"  model calls: {cost.calls or 0} (+{cost.cached_calls or 0} cached), "
            f"{tokens} tokens, {cost.seconds or 0.0:.1f} s in model calls"
            + (f"; the night took {r.seconds:.1f} s" if r.seconds is not None else "")
        )
    for b in summary.blocks:  # a night that trained one block per project
        where = f"the block for {b.section}" if b.section else "the block every project reads"
        _line(
            f"  {where}: {b.status}"
            + (f", proposal {b.proposal_id}" if b.proposal_id else "")
            + (
                f" (val {_fmt(b.val_before)} -> {_fmt(b.val_after)})"
                if b.val
                # nothing held out: the gate ran on train, which certifies nothing
                else f" (no val occurrence: train {_fmt(b.val_before)} -> {_fmt(b.val_after)}, "
                "unverified)"
            )
            + (f"; {b.test_note}" if b.test_note and b.test_before is None else "")
        )
    staged = [b.proposal_id for b in summary.blocks if b.proposal_id][1:]
    if r.proposal_id and staged:
        _line(
            f"  proposals {', '.join([r.proposal_id, *staged])} staged for {r.target_path} "
            "(one block each)"
        )
    elif r.proposal_id:
        _line(f"  proposal {r.proposal_id} staged for {r.target_path}")
    for line in copy_lines(summary.copies):
        _line(f"  {line}")
    if r.proposal_id:
        if summary.notified:
            _line(f"  desktop notification: {summary.notified}")
        out.print(
            f"  review: skillopt-sleep show {r.proposal_id}; "
            f"adopt: skillopt-sleep adopt {r.proposal_id}"
        )
