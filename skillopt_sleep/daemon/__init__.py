"""The background daemon: ``skillopt-sleep start``.

* :mod:`.process`   — pidfile, single-instance lock, detach with a ready handshake, stop.
* :mod:`.core`      — the daemon itself: logging, crash recovery, ingest loop, main loop.
* :mod:`.watcher`   — watchdog observers on every source root (debounced, parent-watching
  for roots that do not exist yet, periodic rescan).
* :mod:`.scheduler` — the nightly APScheduler 3 cron job with catch-up (at most once per
  scheduled slot) and optional idle / mains-power conditions.
* :mod:`.control`   — a 0600 Unix socket in the state dir (ping, status, ingest-now, run-now,
  stop) and client helpers that fall back to in-process work when no daemon runs.
* :mod:`.client`    — the socket's client side (its path, one request), shared by
  :mod:`.control` and :mod:`.process`.
* :mod:`.live`      — the live harvest (watcher batches → incremental ingest), mixed into
  the daemon; :mod:`.nights` runs its nights in workers; :mod:`.clock` — UTC timestamps.
* :mod:`.worker`    — a night runs in a child process (``python -m
  skillopt_sleep.daemon.worker``) so ``stop`` can interrupt it and a crash of either side
  leaves the store consistent.
* :mod:`.units`     — systemd / launchd / Task Scheduler definitions (``service install``).
"""

from __future__ import annotations
