"""A night's own log (``<state>/nights/<id>/night.log``, :func:`~skillopt_sleep.paths.
night_log_path`): every progress line of the night, timestamped, written as the night runs
(in this process or in the daemon's worker), then how it ended. Each line is redacted before
it is written; a log stops growing at :data:`NIGHT_LOG_MAX` bytes (a last line says so).
The daemon's shared ``night.log`` (the workers' stderr) is kept as it was."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from skillopt_sleep import paths
from skillopt_sleep.redact import redact

NIGHT_LOG_MAX = 2_000_000  # bytes


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NightLog:
    """Appends lines to one night's log; safe to call from several threads. A log that
    cannot be written (a full disk, a read-only state folder) never fails the night: it stops
    writing."""

    def __init__(self, night_id: int, path: Path | None = None):
        self.night_id = night_id
        self.path = path or paths.night_log_path(night_id)
        self._lock = threading.Lock()
        self._fh: IO[bytes] | None = None
        self._size = 0
        self._full = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._fh = os.fdopen(fd, "ab")
            self._size = self._fh.seek(0, os.SEEK_END)
        except OSError:
            self._fh = None

    def line(self, text: str) -> None:
        """Write ``text`` (each of its lines), redacted and timestamped."""
        with self._lock:
            if self._fh is None or self._full:
                return
            stamp = _stamp()
            data = "".join(
                f"{stamp} {part}\n" for part in redact(str(text)).splitlines() or [""]
            ).encode("utf-8", "replace")
            if self._size + len(data) > NIGHT_LOG_MAX:
                self._full = True
                data = f"{stamp} [the log stops here: {NIGHT_LOG_MAX} bytes]\n".encode()
            try:
                self._fh.write(data)
                self._fh.flush()
                self._size += len(data)
            except OSError:
                self._close()

    def _close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._close()


def read_night_log(night_id: int, max_bytes: int = 64_000) -> str:
    """The end of night ``night_id``'s log, at most ``max_bytes``; "" when it has none."""
    try:
        with open(paths.night_log_path(night_id), "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - max_bytes))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
