"""The nightly schedule: an APScheduler 3 cron job plus catch-up, at most once per slot.

A *slot* is one occurrence of the configured local time (``schedule``, "HH:MM[:SS]"). The
scheduler persists the last slot it handled in ``schedule.json`` (written *before* the night
is launched, so a crash can never make the same slot run twice). :meth:`NightScheduler.tick`
is the only place a scheduled night starts; it is called

* by the APScheduler ``BackgroundScheduler`` cron job at the slot time (``coalesce=True``,
  ``max_instances=1``, ``misfire_grace_time`` from the config), and
* by the daemon on start, every heartbeat, and right after it notices the machine resumed
  from sleep (wall clock jumped ahead of the monotonic clock) — this is the catch-up: if the
  most recent slot has not been handled, the night runs once, soon after.

A slot counts as handled when this scheduler launched a night for it, or when any completed
night (not a dry run, not the demo) started at or after it (e.g. the user ran ``run`` at
03:10). The very first start only records the current slot as handled: installing the daemon
at 14:00 does not start a night at 14:00.

Optional conditions (checked at each tick; the slot stays pending while they fail): no agent
session written in the last ``idle_minutes``; on mains power when ``require_mains`` (where
the OS reports no battery, it counts as mains). ``catch_up = false`` skips a slot that was
missed by more than the misfire grace period.

The clock is injectable (``clock() -> aware local datetime``) for tests.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable
from typing import Any

from skillopt_sleep.daemon.process import read_json, schedule_state_path, write_json_atomic

log = logging.getLogger("skillopt_sleep.daemon")

Clock = Callable[[], dt.datetime]


def local_tz() -> dt.tzinfo:
    try:
        from tzlocal import get_localzone

        return get_localzone()
    except Exception:  # pragma: no cover
        return dt.datetime.now().astimezone().tzinfo  # type: ignore[return-value]


def system_clock() -> dt.datetime:
    return dt.datetime.now(local_tz())


def parse_schedule(value: str) -> tuple[int, int, int]:
    parts = [int(p) for p in value.split(":")]
    return parts[0], parts[1], parts[2] if len(parts) > 2 else 0


def _at(day: dt.date, hms: tuple[int, int, int], tz: dt.tzinfo | None) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(*hms), tzinfo=tz)


def last_slot(now: dt.datetime, schedule: str) -> dt.datetime:
    """The most recent occurrence of ``schedule`` at or before ``now``."""
    hms = parse_schedule(schedule)
    today = _at(now.date(), hms, now.tzinfo)
    return today if today <= now else _at(now.date() - dt.timedelta(days=1), hms, now.tzinfo)


def next_slot(now: dt.datetime, schedule: str) -> dt.datetime:
    """The first occurrence of ``schedule`` strictly after ``now``."""
    hms = parse_schedule(schedule)
    today = _at(now.date(), hms, now.tzinfo)
    return today if today > now else _at(now.date() + dt.timedelta(days=1), hms, now.tzinfo)


def on_mains() -> bool:
    """True unless the OS reports a battery that is discharging."""
    try:
        import psutil

        battery = psutil.sensors_battery()
    except Exception:
        return True
    return battery is None or battery.power_plugged is not False


def _parse(value: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(value) if value else None
    except (TypeError, ValueError):
        return None


class NightScheduler:
    """Decides when the scheduled night starts; ``launch(trigger)`` starts it and returns a
    dict (``{"ok": bool, ...}``)."""

    def __init__(
        self,
        *,
        schedule: str,
        launch: Callable[[str], dict[str, Any]],
        clock: Clock = system_clock,
        catch_up: bool = True,
        misfire_grace: int = 3600,
        idle_minutes: int | None = None,
        require_mains: bool = False,
        last_activity: Callable[[], dt.datetime | None] = lambda: None,
        night_since: Callable[[dt.datetime], bool] = lambda _slot: False,
        power: Callable[[], bool] = on_mains,
        use_cron: bool = True,
    ):
        self.schedule, self.launch, self.clock = schedule, launch, clock
        self.catch_up, self.misfire_grace = catch_up, misfire_grace
        self.idle_minutes, self.require_mains = idle_minutes, require_mains
        self.last_activity, self.night_since, self.power = last_activity, night_since, power
        self.use_cron = use_cron
        self._lock = threading.Lock()
        self._aps: Any = None
        self.waiting = ""  # why a due night has not started yet
        self.last_launch: dict[str, Any] | None = None
        state = read_json(schedule_state_path()) or {}
        self.handled = _parse(state.get("handled_slot"))
        if self.handled is None:  # first start ever: nothing is "missed" yet
            self.handled = last_slot(self.clock(), schedule)
            self._save(initialized=True)

    # ------------------------------------------------------------------ persistence
    def _save(self, initialized: bool = False) -> None:
        state = read_json(schedule_state_path()) or {}
        state["handled_slot"] = self.handled.isoformat() if self.handled else None
        if initialized:
            state["initialized_at"] = self.clock().isoformat()
        if self.last_launch:
            state["last_launch"] = self.last_launch
        write_json_atomic(schedule_state_path(), state)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> NightScheduler:
        if self.use_cron:
            from apscheduler.schedulers.background import BackgroundScheduler
            from apscheduler.triggers.cron import CronTrigger

            tz = self.clock().tzinfo or local_tz()
            h, m, s = parse_schedule(self.schedule)
            self._aps = BackgroundScheduler(
                timezone=tz,
                job_defaults={
                    "coalesce": True,
                    "max_instances": 1,
                    "misfire_grace_time": self.misfire_grace,
                },
            )
            self._aps.add_job(
                self._on_cron,
                CronTrigger(hour=h, minute=m, second=s, timezone=tz),
                id="night",
                name="nightly run",
            )
            self._aps.start()
        return self

    def shutdown(self) -> None:
        if self._aps is not None:
            self._aps.shutdown(wait=False)
            self._aps = None

    def wakeup(self) -> None:
        """After a resume from sleep: let APScheduler re-evaluate its jobs now."""
        if self._aps is not None:
            self._aps.wakeup()

    def _on_cron(self) -> None:
        try:
            self.tick("cron")
        except Exception:  # pragma: no cover - never kill the scheduler thread
            log.exception("scheduled night failed to start")

    # ------------------------------------------------------------------ the decision
    def blocked(self) -> str:
        """Why a due night may not start now ("" = it may)."""
        if self.require_mains and not self.power():
            return "waiting for mains power"
        if self.idle_minutes:
            last = self.last_activity()
            if last is not None:
                quiet_until = last + dt.timedelta(minutes=self.idle_minutes)
                if self.clock() < quiet_until:
                    return (
                        f"waiting until no agent session was active for {self.idle_minutes} min "
                        f"(last activity {last.isoformat(timespec='seconds')})"
                    )
        return ""

    def due(self) -> dt.datetime | None:
        """The slot that should run now, if any (no side effects)."""
        slot = last_slot(self.clock(), self.schedule)
        if self.handled is not None and self.handled >= slot:
            return None
        return slot

    def tick(self, reason: str = "tick") -> dict[str, Any] | None:
        """Start the night for the most recent slot if it is due and unhandled. Returns the
        launch result, or None when nothing started."""
        with self._lock:
            now = self.clock()
            slot = self.due()
            if slot is None:
                self.waiting = ""
                return None
            late = (now - slot).total_seconds() > self.misfire_grace
            if self.night_since(slot):
                log.info(
                    "slot %s: a night already ran since; nothing to catch up", slot.isoformat()
                )
                self.handled = slot
                self._save()
                return None
            if late and not self.catch_up:
                log.info("slot %s missed and catch_up is off: skipped", slot.isoformat())
                self.handled = slot
                self._save()
                return None
            why = self.blocked()
            if why:
                # the reason's kind, not its changing details (the last activity's time)
                if why.split(" (", 1)[0] != self.waiting.split(" (", 1)[0]:
                    log.info("night for slot %s due: %s", slot.isoformat(), why)
                self.waiting = why
                return None
            self.waiting = ""
            trigger = "catch-up" if late else "schedule"
            self.handled = slot  # recorded first: a crash never makes a slot run twice
            self.last_launch = {
                "slot": slot.isoformat(),
                "at": now.isoformat(),
                "trigger": trigger,
                "reason": reason,
            }
            self._save()
        log.info("starting the %s night for slot %s (%s)", trigger, slot.isoformat(), reason)
        result = self.launch(trigger)
        with self._lock:
            self.last_launch = dict(
                self.last_launch or {}, ok=bool(result.get("ok")), error=result.get("error", "")
            )
            self._save()
        return result

    def next_night(self) -> dict[str, Any]:
        now = self.clock()
        slot = self.due()
        if slot is not None:
            return {
                "at": now.isoformat(timespec="seconds"),
                "slot": slot.isoformat(),
                "pending": True,
                "waiting": self.waiting,
            }
        nxt = next_slot(now, self.schedule)
        return {
            "at": nxt.isoformat(timespec="seconds"),
            "slot": nxt.isoformat(),
            "pending": False,
            "waiting": "",
        }
