"""A night in a child process of the daemon: ``python -m skillopt_sleep.daemon.worker``.

Why a process: ``stop`` can interrupt it (SIGTERM/SIGINT become KeyboardInterrupt inside
:func:`~skillopt_sleep.night.run.run_night`, which records the night as ``interrupted`` and
releases the night lock), and agent CLIs it spawns form a tree the daemon can kill. The worker
dies with the daemon: on Linux through ``PR_SET_PDEATHSIG``, elsewhere through a thread that
watches the parent pid; a night whose process is gone is then marked ``interrupted`` by
:func:`~skillopt_sleep.night.lifecycle.recover` when the daemon starts again.

The result is printed as one JSON line on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillopt_sleep.service import Service


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except Exception:
            pass

    def watch() -> None:
        gone_since = None
        while True:
            if os.getppid() != parent:
                if gone_since is None:
                    gone_since = time.monotonic()
                    os.kill(os.getpid(), signal.SIGTERM)
                elif time.monotonic() - gone_since > 20:
                    os._exit(137)
            time.sleep(0.5)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(137)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _pre_harvest(service: Service) -> None:
    """Bring the store up to date under the daemon's ingest lock (so it never races the
    daemon's ingest thread); the night then skips its own harvest step (one pass per night)."""
    from filelock import FileLock

    from skillopt_sleep import paths

    with FileLock(str(paths.state_dir() / "ingest.lock"), timeout=600):
        try:
            service.harvest()
        finally:
            service.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="skillopt-sleep-night-worker")
    ap.add_argument("--trigger", default="daemon")
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--parent", type=int, default=0)
    args = ap.parse_args(argv)
    from skillopt_sleep import paths

    paths.make_private()  # everything the night writes is the user's alone
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    if args.parent:
        _die_with_parent(args.parent)

    from skillopt_sleep.errors import SkilloptError
    from skillopt_sleep.results import Trigger
    from skillopt_sleep.service import Service

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    def started(night_id: int) -> None:  # the daemon answers run-now with the id
        print(json.dumps({"started": night_id}), flush=True)

    out: dict[str, Any] = {"ok": False}
    code = 1
    try:
        service = Service(args.config)
        settings = service.settings()
        _pre_harvest(service)
        result = service.run_here(
            settings,
            trigger=Trigger(args.trigger),
            harvest_first=False,  # just harvested, under the daemon's ingest lock
            progress=say,
            on_started=started,
        )
        out = {"ok": True, "result": result.model_dump(mode="json")}
        code = 0
    except KeyboardInterrupt:
        out = {"ok": False, "error": "interrupted", "interrupted": True}
        code = 130
    except SkilloptError as exc:
        out = {"ok": False, "error": str(exc)}
    except Exception as exc:  # a bug: report it, the night row is already finished by run_night
        out = {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}"}
    print(json.dumps(out, default=str), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
