"""Timestamps the daemon records (status, logs, error notes): UTC ISO 8601 to the second.

A leaf module, so :mod:`.core`, :mod:`.live` and :mod:`.nights` share it without importing
each other.
"""

from __future__ import annotations

import datetime as dt
import time


def utc(ts: float | None = None) -> str:
    """``ts`` (seconds since the epoch; default now) as ``YYYY-MM-DDTHH:MM:SS+00:00``."""
    return dt.datetime.fromtimestamp(ts if ts is not None else time.time(), dt.UTC).isoformat(
        timespec="seconds"
    )
