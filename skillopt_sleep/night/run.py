"""One night's life: :func:`run_night`, the single entry point the CLI, the daemon and the
MCP server call.

It takes the one-night-at-a-time lock, records a ``nights`` row first and always finishes it:
``succeeded`` (a proposal was staged), ``no_change`` (nothing certified), ``no_tasks``,
``planned`` (dry run), ``failed`` (a backend or budget error — re-raised so callers exit
non-zero) or, when the process dies, ``interrupted`` (set by the next run, see
:func:`.lifecycle.recover`). Every progress line also goes to the night's own log. The night
itself, stage by stage, is :class:`~skillopt_sleep.night.night.Night`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from filelock import Timeout

from skillopt_sleep.config import Settings
from skillopt_sleep.errors import NightError, SkilloptError
from skillopt_sleep.night import lifecycle
from skillopt_sleep.night.context import NightContext, OnRollout
from skillopt_sleep.night.lifecycle import NightStatus, Trigger, night_lock
from skillopt_sleep.night.log import NightLog
from skillopt_sleep.night.night import Night
from skillopt_sleep.night.progress import NightProgress
from skillopt_sleep.night.train import Progress
from skillopt_sleep.results import NightResult, OnProgress, night_label
from skillopt_sleep.store import Store


def run_night(
    store: Store,
    settings: Settings,
    *,
    dry_run: bool = False,
    trigger: Trigger | str = Trigger.CLI,
    harvest_first: bool = True,
    progress: Progress | None = None,
    on_rollout: OnRollout | None = None,
    env: dict[str, str] | None = None,
    home: Path | None = None,
    on_started: Callable[[int], None] | None = None,
    on_progress: OnProgress | None = None,
) -> NightResult:
    """Run one night and return its result.

    Raises NightError when another night holds the lock, and re-raises backend / budget errors
    after recording the failed night (so the CLI exits non-zero with the reason).
    ``harvest_first=False`` skips the harvest step (the caller has just harvested).
    ``on_started(night_id)`` is called once the night's row exists (before any work), so a
    caller that does not wait for the result learns its id without polling the store.
    ``progress(line)`` gets the night's progress lines; ``on_progress(event)`` its typed
    events (:class:`~skillopt_sleep.night.progress.NightProgress`), rollouts counted.
    """
    say = NightProgress(progress, on_progress)
    lock = night_lock()
    try:
        lock.acquire(timeout=0)
    except Timeout:
        now = lifecycle.running(store)
        since = f" (started {now.started_at})" if now and now.started_at else ""
        raise NightError(f"a night is running{since}") from None
    try:
        lifecycle.recover(store, lock_held=True)
        night_id = lifecycle.begin(store, settings, trigger, dry_run)
        say.night_id = night_id
        ctx = NightContext(
            store, settings, night_id, say=say, on_rollout=on_rollout, env=env, home=home
        )
        night = Night(ctx, dry_run=dry_run, harvest_first=harvest_first)
        night_log = NightLog(night_id)  # the night's own log: every progress line
        night_log.line(
            f"night {night_label(night_id)} started ({trigger}{', dry run' if dry_run else ''})"
        )
        caller_text = say.text

        def logged(msg: str) -> None:  # every progress line also goes to the night's log
            night_log.line(msg)
            if caller_text is not None:
                caller_text(msg)

        say.text = logged
        try:
            if on_started is not None:
                on_started(night_id)
            return _recorded(night, night_log)
        finally:
            night_log.close()
    finally:
        lock.release()


def _recorded(night: Night, night_log: NightLog) -> NightResult:
    """Run ``night``, its end in its log; a night that fails or is interrupted is recorded so
    (never left "running") and its error raised again."""
    ctx = night.ctx
    label = night_label(ctx.night_id)
    try:
        result = night.run()
    except (SkilloptError, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or a signal turned into one
            status = NightStatus.INTERRUPTED
            error = f"interrupted ({str(exc) or 'Ctrl-C'})"
        else:
            status, error = NightStatus.FAILED, str(exc) or type(exc).__name__
        _failed(night, night_log, status, error)
        raise
    except Exception as exc:  # a bug: still never leave the night "running"
        _failed(
            night, night_log, NightStatus.FAILED, f"internal error: {type(exc).__name__}: {exc}"
        )
        raise
    staged = result.summary.staged_proposals(result.proposal_id)
    night_log.line(
        f"night {label} {result.status}"
        + (f": proposal{'s' if len(staged) > 1 else ''} {', '.join(staged)}" if staged else "")
    )
    return result


def _failed(night: Night, night_log: NightLog, status: NightStatus, error: str) -> None:
    ctx = night.ctx
    lifecycle.finish(
        ctx.store, ctx.night_id, status, error=error, seconds=time.monotonic() - night.started
    )
    night_log.line(f"night {night_label(ctx.night_id)} {status}: {error}")
