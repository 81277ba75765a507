"""Nights: where one asked for now runs, running it, and reading them.

* **the night dispatch policy** (:meth:`NightsService.dispatch`): a night asked for now runs in
  the running daemon only when the daemon would run the very night this caller would — a
  plain night (no dry run, no project, no backend flags), with the same config file and the
  same ``SKILLOPT_SLEEP_*`` settings variables; otherwise here, and the decision says why;
* running a night here (waiting, or in a background thread that reports the night's id as
  soon as its row exists, through ``on_started`` — never by polling the store); a night run
  in a background thread opens its own store connection.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt_sleep import paths
from skillopt_sleep.config import Settings
from skillopt_sleep.errors import BadArgument, NightError, SkilloptError, one_line
from skillopt_sleep.results import (
    Dispatch,
    NightLog,
    NightOutcome,
    NightResult,
    NightView,
    OnProgress,
    Trigger,
    night_label,
)
from skillopt_sleep.service.core import Core, Progress
from skillopt_sleep.store import Store

if TYPE_CHECKING:
    from skillopt_sleep.night.context import OnRollout

#: how many progress lines are kept per night started by this service (for MCP get_night)
PROGRESS_LINES = 40

#: seconds the SessionEnd hook waits for the daemon at most (agents wait for their hooks)
HOOK_TIMEOUT = 0.3


class NightsService:
    """Dispatch, run and read nights (the night dispatch policy: :meth:`dispatch`)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._progress: dict[int, collections.deque[str]] = {}
        self._progress_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._thread_night: int | None = None

    def dispatch(
        self, *, dry_run: bool = False, project: Path | None = None, overridden: bool = False
    ) -> Dispatch:
        """Where a night asked for now runs, and why (see the module docstring).
        ``overridden``: backend or model flags were given."""
        from skillopt_sleep import daemon_client

        daemon = daemon_client.running_daemon()
        if dry_run:
            return Dispatch(
                where="here", reason="a dry run runs here", daemon_running=daemon is not None
            )
        if project is not None or overridden:
            return Dispatch(
                where="here",
                reason="a night for one project or with other backends runs here (the daemon "
                "runs nights with its own settings)",
                daemon_running=daemon is not None,
            )
        if daemon is None:
            return Dispatch(where="here", reason="no daemon is running")
        if daemon.config != daemon_client.config_key(self.core.config_path):
            return Dispatch(
                where="here",
                reason=f"the daemon runs with another config ({daemon.config})",
                daemon_running=True,
            )
        ours = daemon_client.settings_env()
        if daemon.settings_env != ours:
            differ = sorted(
                {
                    k
                    for k in set(ours) | set(daemon.settings_env)
                    if ours.get(k) != daemon.settings_env.get(k)
                }
            )
            return Dispatch(
                where="here",
                reason="the daemon runs with other SKILLOPT_SLEEP_* settings "
                f"({', '.join(differ)})",
                daemon_running=True,
            )
        try:
            daemon_client.request("ping", timeout=2)
        except daemon_client.NoDaemon as exc:
            return Dispatch(
                where="here", reason=f"the daemon does not answer ({exc})", daemon_running=True
            )
        return Dispatch(
            where="daemon",
            reason=f"the daemon (pid {daemon.pid}) runs with the same config and settings",
            daemon_running=True,
        )

    def run_night(
        self,
        *,
        dry_run: bool = False,
        project: Path | None = None,
        target: dict[str, str] | None = None,
        optimizer: dict[str, str] | None = None,
        trigger: Trigger = Trigger.CLI,
        wait: bool = True,
        progress: Progress | None = None,
        on_rollout: OnRollout | None = None,
        on_dispatch: Callable[[Dispatch], None] | None = None,
        start_timeout: float = 15.0,
        on_progress: OnProgress | None = None,
    ) -> NightOutcome:
        """Run a night now, here or in the daemon (:meth:`dispatch`).

        ``wait``: return its result; otherwise return as soon as it started (its
        ``night_id`` known, the night going on in a thread of this process or in the daemon).
        ``target`` / ``optimizer``: backend overrides (``{"name": …, "model": …}``).
        Raises ConfigError before anything starts, NightError when a night is already running
        or the daemon refuses or fails it, and what a night raises (backend and budget errors,
        KeyboardInterrupt) when it runs here and is waited for. ``on_progress``: the typed
        progress events of a night waited for here (a night in the daemon reports none).
        """
        settings = self.core.settings(
            project=project, target=target or None, optimizer=optimizer or None
        )
        decision = self.dispatch(
            dry_run=dry_run, project=project, overridden=bool(target or optimizer)
        )
        if on_dispatch is not None:
            on_dispatch(decision)
        if decision.where == "daemon":
            return self._run_in_daemon(decision, trigger, wait)
        if wait:
            result = self.run_here(
                settings,
                dry_run=dry_run,
                trigger=trigger,
                progress=progress,
                on_rollout=on_rollout,
                on_progress=on_progress,
            )
            return NightOutcome(
                via="here", reason=decision.reason, night_id=result.night_id, result=result
            )
        return self._start_here(settings, dry_run, trigger, progress, start_timeout, decision)

    def run_here(
        self,
        settings: Settings,
        *,
        dry_run: bool = False,
        trigger: Trigger = Trigger.CLI,
        harvest_first: bool = True,
        progress: Progress | None = None,
        on_rollout: OnRollout | None = None,
        on_started: Callable[[int], None] | None = None,
        on_progress: OnProgress | None = None,
    ) -> NightResult:
        """Run one night in this process, on a connection of its own (the daemon's worker
        and waiting callers). See :func:`skillopt_sleep.night.run.run_night`."""
        from skillopt_sleep.night.run import run_night

        store = Store(self.core.db_path())
        try:
            return run_night(
                store,
                settings,
                dry_run=dry_run,
                trigger=trigger,
                harvest_first=harvest_first,
                progress=progress,
                on_rollout=on_rollout,
                on_started=on_started,
                on_progress=on_progress,
            )
        finally:
            store.close()

    def _run_in_daemon(self, decision: Dispatch, trigger: Trigger, wait: bool) -> NightOutcome:
        from skillopt_sleep import daemon_client

        try:
            reply = daemon_client.request(
                "run-now", timeout=None if wait else 60, wait=wait, trigger=str(trigger)
            )
        except daemon_client.NoDaemon as exc:
            raise NightError(
                f"the daemon stopped during the night ({exc}); `skillopt-sleep status` shows "
                "the night, the daemon log says why"
            ) from None
        if not reply.get("ok"):
            if reply.get("interrupted") or reply.get("error") == "interrupted":
                raise NightError(
                    "the night was interrupted (the daemon stopped or the night was killed); "
                    "`skillopt-sleep status` shows it"
                )
            raise NightError(one_line(reply.get("error") or "the daemon refused to run a night"))
        if wait:
            result = NightResult.model_validate(reply.get("result") or {})
            return NightOutcome(
                via="daemon", reason=decision.reason, night_id=result.night_id, result=result
            )
        night_id = reply.get("night_id")
        if not isinstance(night_id, int):
            raise NightError(
                "the daemon accepted the night but did not report it started; see "
                "`skillopt-sleep status`"
            )
        return NightOutcome(via="daemon", reason=decision.reason, night_id=night_id)

    def _start_here(
        self,
        settings: Settings,
        dry_run: bool,
        trigger: Trigger,
        progress: Progress | None,
        timeout: float,
        decision: Dispatch,
    ) -> NightOutcome:
        """Start a night in a background thread; returns once its row exists."""
        from skillopt_sleep.night import lifecycle

        with self.core.lock:
            if self._thread is not None and self._thread.is_alive():
                raise NightError(
                    f"a night is running (night {self._thread_night}, started by this process)"
                )
            with self.core.use() as store:
                now = lifecycle.running(store)
            if now is not None:
                raise NightError(f"a night is running{now.since()}")
            started = threading.Event()
            box: dict[str, Any] = {}

            def on_started(night_id: int) -> None:
                with self._progress_lock:
                    self._progress[night_id] = collections.deque(maxlen=PROGRESS_LINES)
                self._thread_night = box["night_id"] = night_id
                started.set()

            def say(msg: str) -> None:
                night_id = box.get("night_id")
                if night_id is not None:
                    with self._progress_lock:
                        self._progress[night_id].append(one_line(msg, 300))
                if progress is not None:
                    progress(msg)

            def work() -> None:
                try:
                    self.run_here(
                        settings,
                        dry_run=dry_run,
                        trigger=trigger,
                        progress=say,
                        on_started=on_started,
                    )
                except BaseException as exc:  # recorded in the night's row by run_night
                    box["error"] = exc
                finally:
                    started.set()

            self._thread = threading.Thread(target=work, name="skillopt-sleep-night", daemon=False)
            self._thread.start()
        started.wait(timeout)
        night_id = box.get("night_id")
        if night_id is None:
            err = box.get("error")
            if isinstance(err, SkilloptError):
                raise err
            if err is not None:
                raise NightError(f"the night could not start: {type(err).__name__}: {err}")
            raise NightError(f"the night did not start within {timeout:.0f} s")
        return NightOutcome(via="here", reason=decision.reason, night_id=night_id)

    def wait_background(self, timeout: float | None = None) -> None:
        """Wait for a night this service started in the background (tests, shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def night_running(self) -> bool:
        """Whether a night runs now, in this process or any other."""
        from skillopt_sleep.night import lifecycle

        if self._thread is not None and self._thread.is_alive():
            return True
        return not lifecycle.lock_free()

    def night(self, night_id: int) -> NightView:
        """One night (a stale ``running`` one shows ``interrupted``). BadArgument when
        unknown."""
        from skillopt_sleep.night import lifecycle
        from skillopt_sleep.status import night_view

        with self.core.use() as store:
            row = store.nights.get(night_id)
            if row is None:
                last = store.nights.recent(1)
                latest = night_label(last[0].id) if last else ""
                hint = f"; the latest is {latest}" if last else "; no night has run yet"
                raise BadArgument(f"no night {night_label(night_id)}{hint}")
            return night_view(lifecycle.seen_as([row])[0])

    def nights(self, limit: int = 5) -> list[NightView]:
        from skillopt_sleep.night import lifecycle
        from skillopt_sleep.status import night_view

        with self.core.use() as store:
            return [night_view(r) for r in lifecycle.seen_as(store.nights.recent(limit))]

    def progress(self, night_id: int) -> list[str]:
        """The latest progress lines of a night this service started ([] for others)."""
        with self._progress_lock:
            return list(self._progress.get(night_id, ()))

    def night_log(self, max_bytes: int = 64_000, night_id: int | None = None) -> str:
        """The end of the daemon's night log (``<state>/night.log``: the stderr of the nights
        it ran), or with ``night_id`` of that night's own log
        (:mod:`skillopt_sleep.night.log`), at most ``max_bytes``; "" when there is none.
        BadArgument for a night that does not exist."""
        if night_id is not None:
            from skillopt_sleep.night.log import read_night_log

            self.night(night_id)  # BadArgument when unknown
            return read_night_log(night_id, max_bytes)
        path = paths.state_dir() / "night.log"
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - max_bytes))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def night_log_view(self, max_bytes: int = 64_000, night_id: int | None = None) -> NightLog:
        """:meth:`night_log` with where it is read from and, when the daemon has no night log
        yet, the last night (whose own log there is)."""
        text = self.night_log(max_bytes, night_id=night_id)
        where = paths.night_log_path(night_id) if night_id is not None else None
        last = self.nights(limit=1) if night_id is None and not text else []
        return NightLog(
            night_id=night_id,
            path=str(where or paths.state_dir() / "night.log"),
            text=text,
            last_night_id=last[0].id if last else None,
        )


def session_end_hook(timeout: float = HOOK_TIMEOUT) -> str:
    """An agent session ended (the Claude Code plugin's ``SessionEnd`` hook): ask a running
    daemon to ingest now. Never raises, never waits more than ``timeout`` seconds.

    Returns what happened (``"sent"``, ``"answered"``, ``"refused"``, ``"no daemon"``) for
    callers that want to log it; the hook discards it.
    """
    from skillopt_sleep import daemon_client

    try:
        reply = daemon_client.request("ingest-now", timeout=timeout)
    except daemon_client.NoDaemon as exc:
        # connected but the ingest outlasted the timeout: the daemon keeps going
        return "sent" if "did not answer" in str(exc) else "no daemon"
    except Exception:
        return "no daemon"
    return "answered" if reply.get("ok") else "refused"
