"""The daemon process itself (``skillopt-sleep start --foreground``).

Start-up, in order: take the single-instance lock (else report "already running"), set up the
rotating log, write the pidfile, open the store (WAL, migrated), mark nights whose process is
gone ``interrupted``, start the ingest thread (first job: a full incremental pass, which
resumes from the stored offsets), the watchers, the scheduler (which may start a catch-up
night) and the control socket, then report ready.

Threads: ``ingest`` (:mod:`.live`) owns its own store connection and is the only writer of session data in
this process; ``watch`` threads only queue paths; the night runs in a child process
(:mod:`.worker`, managed by :mod:`.nights`); ``control`` threads answer requests using
short-lived connections.
The main thread's heartbeat re-arms watchers, ticks the scheduler, detects resume from
sleep (the wall clock jumps ahead of the monotonic clock) and triggers the periodic rescan.

Stop (SIGTERM, SIGINT or a ``stop`` request): stop accepting work, interrupt a running night
(SIGTERM to the worker → recorded ``interrupted``; killed after a grace period), let the
ingest thread finish the file it is on (each file is one transaction), close everything,
remove the pidfile and socket.
"""

from __future__ import annotations

import datetime as dt
import logging
import logging.handlers
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from filelock import Timeout

from skillopt_sleep import daemon_client, paths
from skillopt_sleep.daemon import control, process
from skillopt_sleep.daemon.clock import utc
from skillopt_sleep.daemon.live import LiveIngest
from skillopt_sleep.daemon.nights import NightRunner
from skillopt_sleep.daemon.scheduler import NightScheduler, system_clock
from skillopt_sleep.daemon.watcher import Debouncer, Watcher
from skillopt_sleep.night import lifecycle

log = logging.getLogger("skillopt_sleep.daemon")

HEARTBEAT = 5.0  # seconds between main-loop checks
RESUME_JUMP = 60.0  # wall clock ahead of monotonic by this much = we were asleep


def setup_logging(foreground: bool) -> logging.Handler:
    paths.state_dir().mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(
        process.log_path(), maxBytes=1_000_000, backupCount=3, encoding="utf-8"
    )
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s [%(threadName)s] %(message)s")
    )
    root = logging.getLogger("skillopt_sleep")
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    if foreground and sys.stderr is not None and not os.environ.get("SKILLOPT_DAEMON_QUIET"):
        stream = logging.StreamHandler(sys.stderr)
        stream.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        root.addHandler(stream)
    for noisy in ("apscheduler", "watchdog"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler


class _StoreCtx:
    def __init__(self) -> None:
        from skillopt_sleep.store import open_store

        self.store = open_store()

    def __enter__(self):
        return self.store

    def __exit__(self, *exc: Any) -> None:
        self.store.close()


class Daemon(LiveIngest):
    def __init__(
        self,
        config_path: Path | None = None,
        *,
        clock=system_clock,
        ready_fd: int | None = None,
        foreground: bool = True,
    ):
        self.config_path = Path(config_path).resolve() if config_path else None
        self.config_file = self.config_path or paths.config_file()
        self.config_stamp = _file_stamp(self.config_file)
        self.clock = clock
        self.ready_fd = ready_fd
        self.foreground = foreground
        self.stopping = threading.Event()
        self.started_mono = time.monotonic()
        self.started_at = utc()
        self.settings: Any = None
        self.sources: dict[str, Any] = {}
        self.roots: list[tuple[str, Path]] = []
        self.debouncer: Debouncer | None = None
        self.watcher: Watcher | None = None
        self.scheduler: NightScheduler | None = None
        self.server: control.ControlServer | None = None
        self.night = NightRunner(self)
        self.last_ingest: dict[str, Any] = {}
        self.last_error: dict[str, Any] | None = None
        self.last_rescan = 0.0
        self._ingest_thread: threading.Thread | None = None
        self._ingest_idle = threading.Event()
        self._ingest_done_seq = 0
        self._ingest_req_seq = 0
        self._seq_cond = threading.Condition()
        self.last_activity_ts: float | None = None
        self.dashboard: Any = None  # ui.server.Dashboard when ui.serve is set

    # ------------------------------------------------------------------ helpers
    def store(self) -> _StoreCtx:
        return _StoreCtx()

    def note_error(self, message: str) -> None:
        self.last_error = {"at": utc(), "message": message}

    def _signal_ready(self, message: str) -> None:
        if self.ready_fd is None:
            return
        try:
            os.write(self.ready_fd, (message + "\n").encode())
            os.close(self.ready_fd)
        except OSError:
            pass
        self.ready_fd = None

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        lock = process.instance_lock()
        try:
            lock.acquire(timeout=0)
        except Timeout:
            pid = process.running_pid()
            self._signal_ready(f"already {pid or 0}")
            print(f"already running (pid {pid})" if pid else "already running")
            return 0
        handler = None
        try:
            handler = setup_logging(self.foreground)
            try:
                self._start()
            except Exception as exc:
                from skillopt_sleep.errors import SkilloptError

                known = isinstance(exc, SkilloptError)
                reason = str(exc) if known else f"{type(exc).__name__}: {exc}"
                # a known error (bad config, …) is one line; a bug keeps its traceback in the log
                log.error("the daemon failed to start: %s", reason, exc_info=not known)
                self._signal_ready(f"error {reason}")
                self._shutdown()
                return 1
            self._signal_ready(f"ready {os.getpid()}")
            log.info("ready (pid %d)", os.getpid())
            self._loop()
            self._shutdown()
            return 0
        finally:
            try:
                info = process.read_pidfile() or {}
                if info.get("pid") == os.getpid():
                    process.pid_path().unlink()
            except OSError:
                pass
            lock.release()
            if handler is not None:
                logging.getLogger("skillopt_sleep").removeHandler(handler)
                handler.close()

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_signal(signum: int, _frame: Any) -> None:
            log.info("signal %d: stopping", signum)
            self.stopping.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        if hasattr(signal, "SIGHUP"):
            signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def _start(self) -> None:
        from skillopt_sleep.config import load_settings
        from skillopt_sleep.sources import get_source

        self._install_signals()
        process.write_json_atomic(
            process.pid_path(),
            {
                "pid": os.getpid(),
                "started_at": self.started_at,
                "ready": False,
                "argv": sys.argv,
                "config": str(self.config_path or ""),
                "settings_env": daemon_client.settings_env(),
            },
        )
        log.info("starting (pid %d, state %s)", os.getpid(), paths.state_dir())
        self.settings = s = load_settings(self.config_path)
        with self.store() as store:
            n = lifecycle.recover(store)
            if n:
                log.warning("%d night(s) left running by a stopped process marked interrupted", n)
        for name, cfg in s.sources.items():
            if not cfg.enabled:
                continue
            src = get_source(name)
            self.sources[name] = src
            roots = list(cfg.roots) or src.default_roots(os.environ, Path.home())
            self.roots += [(name, Path(r).expanduser()) for r in roots]
        self.debouncer = Debouncer(s.debounce_seconds)
        self.debouncer.request_full()  # resume from the stored offsets
        self._ingest_thread = threading.Thread(target=self._ingest_loop, name="ingest", daemon=True)
        self._ingest_thread.start()
        self.watcher = Watcher(self.roots, on_file=self._on_file, on_dir=self._on_dir).start()
        self.last_rescan = time.monotonic()
        self.scheduler = NightScheduler(
            schedule=s.schedule,
            launch=self.night.launch,
            clock=self.clock,
            catch_up=s.catch_up,
            misfire_grace=s.misfire_grace_seconds,
            idle_minutes=s.idle_minutes,
            require_mains=s.require_mains,
            last_activity=self._last_activity,
            night_since=self._night_since,
        ).start()
        self.server = control.ControlServer(self.handle).start()
        if s.ui.serve:
            self._start_dashboard(s.ui.port)
        process.write_json_atomic(
            process.pid_path(),
            {
                "pid": os.getpid(),
                "started_at": self.started_at,
                "ready": True,
                "argv": sys.argv,
                "config": str(self.config_path or ""),
                "settings_env": daemon_client.settings_env(),
            },
        )
        threading.Thread(
            target=self._tick_scheduler, args=("start",), name="catch-up", daemon=True
        ).start()

    def _start_dashboard(self, port: int) -> None:
        """Serve the dashboard (config ``ui.serve``) in a thread; a port that cannot be had is
        logged and shown by ``status``, and the daemon goes on without it."""
        from skillopt_sleep.errors import SkilloptError
        from skillopt_sleep.service import Service
        from skillopt_sleep.ui.server import Dashboard

        try:
            self.dashboard = Dashboard(Service(self.config_path), port).start()
        except SkilloptError as exc:
            log.error("dashboard: %s", exc)
            self.note_error(f"dashboard: {exc}")
            return
        log.info("dashboard on %s (token in the state folder's ui-token)", self.dashboard.url)

    def _tick_scheduler(self, reason: str) -> None:
        if self.scheduler is None or self.stopping.is_set():
            return
        try:
            self.scheduler.tick(reason)
        except Exception as exc:
            log.exception("scheduler tick failed")
            self.note_error(f"scheduler: {exc}")

    def _loop(self) -> None:
        assert self.settings is not None
        wall, mono = time.time(), time.monotonic()
        while not self.stopping.wait(HEARTBEAT):
            now_wall, now_mono = time.time(), time.monotonic()
            resumed = (now_wall - wall) - (now_mono - mono) > RESUME_JUMP
            wall, mono = now_wall, now_mono
            if resumed:
                log.info("the machine resumed from sleep: checking the schedule and rescanning")
                if self.scheduler:
                    self.scheduler.wakeup()
            if self.watcher:
                self.watcher.check()
            if resumed or now_mono - self.last_rescan >= self.settings.rescan_seconds:
                self.last_rescan = now_mono
                if self.debouncer:
                    self.debouncer.request_rescan()
            self._tick_scheduler("resume" if resumed else "heartbeat")

    def _shutdown(self) -> None:
        self.stopping.set()
        log.info("stopping")
        if self.dashboard is not None:
            self.dashboard.stop()
        if self.server:
            self.server.close()
        if self.scheduler:
            self.scheduler.shutdown()
        self.night.interrupt()
        if self.watcher:
            self.watcher.stop()
        if self.debouncer:
            self.debouncer.wake()
        if self._ingest_thread:
            self._ingest_thread.join(timeout=60)
        log.info("stopped")

    # ------------------------------------------------------------------ ingestion
    def _night_since(self, slot: dt.datetime) -> bool:
        since = slot.astimezone(dt.UTC).isoformat(timespec="seconds")
        with self.store() as store:
            return store.nights.completed_since(since)

    # ------------------------------------------------------------------ control
    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        cmd = req.get("cmd")
        if cmd == "ping":
            return {"ok": True, "pid": os.getpid()}
        if cmd == "status":
            return {"ok": True, "status": self.status()}
        if cmd == "ingest-now":
            return self.ingest_now()
        if cmd == "run-now":
            trigger = str(req.get("trigger") or "daemon")
            started = self.night.launch(trigger, wait_started=0 if req.get("wait") else 30)
            if not started.get("ok") or not req.get("wait"):
                return started
            result = self.night.wait()
            return dict(result or {"ok": False, "error": "the night did not report"}, started=True)
        if cmd == "stop":
            self.stopping.set()
            return {"ok": True, "pid": os.getpid(), "stopping": True}
        return {"ok": False, "error": f"unknown command {cmd!r}"}

    def status(self) -> dict[str, Any]:
        watched = self.watcher.status() if self.watcher else []
        try:
            with self.store() as store:
                for w in watched:
                    root = w["root"].rstrip(os.sep) + os.sep
                    w["files"] = store.files.count_under(w["source"], root)
                    w["sessions"] = store.sessions.count_under(w["source"], root)
        except Exception as exc:
            log.warning("status: %s", exc)
        night: dict[str, Any] = {"running": self.night.running()}
        if night["running"] and self.night.proc is not None:
            night.update(
                pid=self.night.proc.pid,
                trigger=self.night.trigger,
                started_at=self.night.started_at,
            )
        return {
            "pid": os.getpid(),
            "started_at": self.started_at,
            "uptime_seconds": round(time.monotonic() - self.started_mono, 1),
            "state_dir": str(paths.state_dir()),
            "log": str(process.log_path()),
            "watched": watched,
            "last_ingest": self.last_ingest,
            "ingest_pending": self.debouncer.pending() if self.debouncer else 0,
            "night": night,
            "last_daemon_night": self.night.last,
            "config": str(self.config_file),
            # the schedule and watched folders are read at start; nights read the file anew
            "config_changed": _file_stamp(self.config_file) != self.config_stamp,
            "config_error": _config_error(self.config_path)
            if _file_stamp(self.config_file) != self.config_stamp
            else None,
            "schedule": self.settings.schedule if self.settings else None,
            "next_night": self.scheduler.next_night() if self.scheduler else None,
            "last_scheduled": self.scheduler.last_launch if self.scheduler else None,
            "last_error": self.last_error,
            "ui": self.dashboard.url if self.dashboard is not None else None,
        }


def _file_stamp(path: Path) -> str | None:
    """sha256 of ``path``'s bytes (an edit undone is no change), None when it does not exist."""
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _config_error(config_path: Path | None) -> str | None:
    """Why the config file as it is now would not load (the next night would fail), or None."""
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.errors import SkilloptError

    try:
        load_settings(config_path)
    except SkilloptError as exc:
        return str(exc)
    return None


def run_foreground(config_path: Path | None = None, ready_fd: int | None = None) -> int:
    paths.make_private()
    return Daemon(config_path, ready_fd=ready_fd, foreground=ready_fd is None).run()
