"""Runs the daemon's nights, one at a time, each in a worker subprocess (:mod:`.worker`).

:class:`NightRunner` starts ``python -m skillopt_sleep.daemon.worker`` with the daemon's
config, appends its stderr to ``night.log`` (started afresh beyond :data:`NIGHT_LOG_MAX`
bytes), reads its one-line JSON result, and records a failure as the daemon's last error. A
night is refused while another runs (here or in a CLI ``run``: the store says so). On stop it
sends SIGTERM (the worker records ``interrupted``) and kills the whole process tree after
:data:`NIGHT_STOP_GRACE` seconds.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from skillopt_sleep import paths
from skillopt_sleep.daemon.clock import utc
from skillopt_sleep.night import lifecycle

log = logging.getLogger("skillopt_sleep.daemon")

NIGHT_STOP_GRACE = 30.0  # seconds a night gets to record itself interrupted on stop
NIGHT_LOG_MAX = 5_000_000  # bytes; night.log is started afresh beyond this


class NightOwner(Protocol):
    """What :class:`NightRunner` needs from the process that owns it (the daemon)."""

    stopping: threading.Event
    config_path: Path | None
    last_error: dict[str, Any] | None

    def store(self) -> AbstractContextManager[Any]: ...

    def note_error(self, message: str) -> None: ...


class NightRunner:
    """Launches nights in a worker process, one at a time."""

    def __init__(self, daemon: NightOwner):
        self.daemon = daemon
        self._lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.trigger = ""
        self.started_at = ""
        self.done = threading.Event()
        self.done.set()
        self.last: dict[str, Any] | None = None
        self.started_night = threading.Event()
        self.night_id: int | None = None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _busy_reason(self) -> str:
        if self.running():
            return f"a night is running (started {self._started_from_store() or self.started_at})"
        if not lifecycle.lock_free():
            return f"a night is running (started {self._started_from_store() or 'just now'})"
        return ""

    def _started_from_store(self) -> str:
        try:
            with self.daemon.store() as store:
                now = lifecycle.running(store)
            return (now.started_at or "") if now else ""
        except Exception:
            return ""

    def launch(self, trigger: str, wait_started: float = 0.0) -> dict[str, Any]:
        """Start a night in a worker process. ``wait_started`` > 0: wait up to that many
        seconds for the worker to report the night's id (its row exists) and include it as
        ``night_id``; a worker that ends first (a night refused or failed at once) gives its
        error instead."""
        with self._lock:
            if self.daemon.stopping.is_set():
                return {"ok": False, "error": "the daemon is stopping"}
            why = self._busy_reason()
            if why:
                log.info("night (%s) refused: %s", trigger, why)
                return {"ok": False, "error": why}
            cmd = [
                sys.executable,
                "-m",
                "skillopt_sleep.daemon.worker",
                "--trigger",
                trigger,
                "--parent",
                str(os.getpid()),
            ]
            if self.daemon.config_path:
                cmd += ["--config", str(self.daemon.config_path)]
            night_log = paths.state_dir() / "night.log"
            try:
                if night_log.stat().st_size > NIGHT_LOG_MAX:
                    os.replace(night_log, night_log.with_name("night.log.1"))
            except OSError:
                pass
            self.trigger, self.started_at = trigger, utc()
            self.done = threading.Event()
            self.started_night = threading.Event()
            self.night_id = None
            spawned: list[subprocess.Popen[bytes] | BaseException] = []
            ready = threading.Event()
            done = self.done
            # The worker arms a parent-death signal (PR_SET_PDEATHSIG), which the kernel
            # sends when the *thread* that spawned it ends: so the thread that spawns it is
            # the one that waits for it, never a short-lived control or scheduler thread.
            threading.Thread(
                target=self._spawn_and_wait,
                args=(cmd, trigger, night_log, spawned, ready, done),
                name="night-wait",
                daemon=True,
            ).start()
            ready.wait()
            if isinstance(spawned[0], BaseException):
                raise spawned[0]
            proc = self.proc = spawned[0]
            log.info("night started (%s), worker pid %d", trigger, proc.pid)
            reply: dict[str, Any] = {
                "ok": True,
                "started": True,
                "pid": proc.pid,
                "trigger": trigger,
            }
        if wait_started > 0:
            self.started_night.wait(wait_started)
            if self.night_id is not None:
                reply["night_id"] = self.night_id
            elif done.is_set() and self.last and not self.last.get("ok"):
                return {"ok": False, "error": self.last.get("error") or "the night failed"}
        return reply

    def _spawn_and_wait(
        self,
        cmd: list[str],
        trigger: str,
        night_log: Path,
        spawned: list[subprocess.Popen[bytes] | BaseException],
        ready: threading.Event,
        done: threading.Event,
    ) -> None:
        try:
            with open(night_log, "ab") as errlog:
                errlog.write(f"--- {utc()} night ({trigger})\n".encode())
                errlog.flush()
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=errlog,
                    cwd=str(paths.state_dir()),
                )
        except BaseException as exc:
            spawned.append(exc)
            ready.set()
            return
        spawned.append(proc)
        ready.set()
        self._wait(proc, done)

    def _wait(self, proc: subprocess.Popen[bytes], done: threading.Event) -> None:
        """Read the worker's stdout: a ``{"started": id}`` line once the night's row exists,
        then its result (the last line)."""
        result: dict[str, Any] = {}
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and isinstance(msg.get("started"), int):
                self.night_id = msg["started"]
                self.started_night.set()
            elif isinstance(msg, dict):
                result = msg
        proc.wait()
        if not result:
            result = {
                "ok": False,
                "error": f"the night worker exited with status {proc.returncode}",
            }
        result["exit_code"] = proc.returncode
        try:
            with self._lock, self.daemon.store() as store:
                if lifecycle.recover(store):
                    log.warning("the night worker left its night running: marked interrupted")
        except Exception:
            log.exception("could not check the night's final status")
        result["trigger"] = self.trigger
        self.last = result
        if result.get("ok"):
            log.info("%s", finished_line(result.get("result") or {}))
            err = self.daemon.last_error
            if err and str(err.get("message", "")).startswith("night:"):
                self.daemon.last_error = None  # a later good night clears a night's error
        else:
            log.warning("night failed: %s", result.get("error"))
            self.daemon.note_error(f"night: {result.get('error')}")
        done.set()
        self.started_night.set()

    def wait(self, timeout: float | None = None) -> dict[str, Any] | None:
        self.done.wait(timeout)
        return self.last

    def interrupt(self, grace: float = NIGHT_STOP_GRACE) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        log.info("interrupting the running night (worker pid %d)", proc.pid)
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log.warning("the night did not stop within %.0fs: killing it", grace)
            self._kill_tree(proc.pid)
        except ProcessLookupError:
            pass
        self.done.wait(5)

    @staticmethod
    def _kill_tree(pid: int) -> None:
        import psutil

        try:
            parent = psutil.Process(pid)
            procs = parent.children(recursive=True) + [parent]
        except psutil.NoSuchProcess:
            return
        for p in procs:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=5)


def finished_line(r: dict[str, Any]) -> str:
    """The daemon log's line for a finished night ``r`` (a ``NightResult`` as JSON): its id,
    status and every proposal it staged (a night that trained a block per project staged one
    per block), e.g. ``night 4 finished: succeeded, proposals p4, p5``."""
    from skillopt_sleep.results import NightSummary, night_label

    summary = NightSummary.model_validate(r.get("summary") or {})
    staged = summary.staged_proposals(r.get("proposal_id"))
    said = f", proposal{'s' if len(staged) > 1 else ''} {', '.join(staged)}" if staged else ""
    nid = r.get("night_id")
    label = night_label(nid) if isinstance(nid, int) else nid
    return f"night {label} finished: {r.get('status')}{said}"
