"""The schedule decision with an injected clock, and the APScheduler cron path in-process."""

from __future__ import annotations

import datetime as dt
import threading
from zoneinfo import ZoneInfo

from skillopt_sleep.daemon.process import read_json, schedule_state_path
from skillopt_sleep.daemon.scheduler import NightScheduler, last_slot, next_slot, system_clock
from tests.helpers.daemon import wait_for

TZ = ZoneInfo("Europe/Paris")


class FakeClock:
    def __init__(self, start: dt.datetime):
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += dt.timedelta(**kw)


def _sched(clock: FakeClock, launches: list[str], **kw) -> NightScheduler:
    def launch(trigger: str) -> dict:
        launches.append(trigger)
        return {"ok": True}

    return NightScheduler(
        schedule=kw.pop("schedule", "03:00"), launch=launch, clock=clock, use_cron=False, **kw
    )


def test_slots() -> None:
    now = dt.datetime(2026, 3, 10, 2, 59, tzinfo=TZ)
    assert last_slot(now, "03:00") == dt.datetime(2026, 3, 9, 3, 0, tzinfo=TZ)
    assert next_slot(now, "03:00") == dt.datetime(2026, 3, 10, 3, 0, tzinfo=TZ)
    at = dt.datetime(2026, 3, 10, 3, 0, tzinfo=TZ)
    assert last_slot(at, "03:00") == at and next_slot(at, "03:00") == at + dt.timedelta(days=1)
    assert last_slot(now, "02:58:30") == dt.datetime(2026, 3, 10, 2, 58, 30, tzinfo=TZ)


def test_first_start_records_and_does_not_run() -> None:
    clock = FakeClock(dt.datetime(2026, 3, 10, 14, 0, tzinfo=TZ))
    launches: list[str] = []
    s = _sched(clock, launches)
    assert s.tick() is None and launches == []
    assert read_json(schedule_state_path())["handled_slot"].startswith("2026-03-10T03:00")


def test_on_time_then_once_per_day_and_across_restarts() -> None:
    clock = FakeClock(dt.datetime(2026, 3, 10, 2, 0, tzinfo=TZ))
    launches: list[str] = []
    s = _sched(clock, launches)
    assert s.tick() is None
    clock.advance(hours=1)  # 03:00 exactly
    assert s.tick("cron") == {"ok": True} and launches == ["schedule"]
    clock.advance(minutes=5)
    assert s.tick() is None and s.tick("cron") is None
    # a restart the same day reads the persisted slot
    s2 = _sched(clock, launches)
    assert s2.tick("start") is None and launches == ["schedule"]
    clock.advance(days=1)
    assert s2.tick() == {"ok": True} and launches == ["schedule", "schedule"]


def test_missed_slot_catches_up_once_after_sleep() -> None:
    clock = FakeClock(dt.datetime(2026, 3, 10, 23, 0, tzinfo=TZ))
    launches: list[str] = []
    s = _sched(clock, launches, misfire_grace=600)
    clock.advance(hours=9)  # laptop slept through 03:00; wakes at 08:00
    assert s.next_night()["pending"] is True
    assert s.tick("resume") == {"ok": True} and launches == ["catch-up"]
    assert s.tick("heartbeat") is None and _sched(clock, launches).tick("start") is None
    assert launches == ["catch-up"]
    assert s.next_night()["pending"] is False


def test_catch_up_disabled_skips_a_missed_slot() -> None:
    clock = FakeClock(dt.datetime(2026, 3, 10, 23, 0, tzinfo=TZ))
    launches: list[str] = []
    s = _sched(clock, launches, misfire_grace=600, catch_up=False)
    clock.advance(hours=9)
    assert s.tick() is None and launches == []
    assert s.next_night()["pending"] is False


def test_a_night_already_run_counts_for_the_slot() -> None:
    clock = FakeClock(dt.datetime(2026, 3, 10, 2, 0, tzinfo=TZ))
    launches: list[str] = []
    s = _sched(clock, launches, night_since=lambda slot: True)
    clock.advance(hours=2)
    assert s.tick() is None and launches == []


def test_idle_and_mains_conditions_postpone_but_keep_the_slot() -> None:
    clock = FakeClock(dt.datetime(2026, 3, 10, 2, 0, tzinfo=TZ))
    launches: list[str] = []
    activity = {"at": dt.datetime(2026, 3, 10, 2, 55, tzinfo=TZ)}
    plugged = {"on": False}
    s = _sched(
        clock,
        launches,
        idle_minutes=30,
        require_mains=True,
        last_activity=lambda: activity["at"],
        power=lambda: plugged["on"],
    )
    clock.advance(hours=1, minutes=1)  # 03:01
    assert s.tick("cron") is None and "mains" in s.waiting
    plugged["on"] = True
    assert s.tick() is None and "no agent session" in s.waiting
    assert s.next_night()["waiting"]
    clock.advance(minutes=25)  # 03:26: 31 minutes since the last activity
    assert s.tick() == {"ok": True} and launches == ["schedule"] and s.waiting == ""


def test_apscheduler_cron_fires_in_process() -> None:
    fired = threading.Event()
    launches: list[str] = []

    def launch(trigger: str) -> dict:
        launches.append(trigger)
        fired.set()
        return {"ok": True}

    at = (system_clock() + dt.timedelta(seconds=2)).strftime("%H:%M:%S")
    s = NightScheduler(schedule=at, launch=launch).start()
    try:
        assert s._aps.get_job("night").next_run_time is not None
        wait_for(fired.is_set, 10, what="the cron job")
        assert launches == ["schedule"]
    finally:
        s.shutdown()


def test_waiting_for_idle_is_logged_once_not_at_every_tick(caplog) -> None:
    """The idle condition's reason carries the last activity's time, which moves while the
    user works; the log says the night waits once, not at every 5-second tick."""
    import logging

    clock = FakeClock(dt.datetime(2026, 3, 10, 2, 0, tzinfo=TZ))
    launches: list[str] = []
    activity = {"at": dt.datetime(2026, 3, 10, 2, 55, tzinfo=TZ)}
    s = _sched(clock, launches, idle_minutes=30, last_activity=lambda: activity["at"])
    clock.advance(hours=1, minutes=1)  # 03:01
    with caplog.at_level(logging.INFO, logger="skillopt_sleep.daemon"):
        for _ in range(5):
            clock.advance(seconds=5)
            activity["at"] = clock()  # the user is still working
            assert s.tick() is None and "no agent session" in s.waiting
    assert sum("due:" in r.getMessage() for r in caplog.records) == 1
