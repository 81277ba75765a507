"""Helpers every harvester may use. Sources import these (and :mod:`.base`), never each other."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from skillopt_sleep.redact import decode


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else a new empty dict (any field of a log record may be
    missing or of another type than expected)."""
    return value if isinstance(value, dict) else {}


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with ``…`` appended when it was cut."""
    return text if len(text) <= limit else text[:limit] + "…"


def looks_like_path(value: Any) -> bool:
    """An absolute POSIX / Windows path or ``~`` path (not a placeholder like "[trimmed]")."""
    return isinstance(value, str) and bool(re.match(r"^(?:/|~|[A-Za-z]:[\\/]|\\\\)", value))


def ms_to_iso(value: Any) -> str | None:
    """Epoch milliseconds (or seconds) to ISO 8601 UTC."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    secs = value / 1000 if value > 1e11 else value
    try:
        return (
            datetime.fromtimestamp(secs, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )
    except (OverflowError, OSError, ValueError):
        return None


def json_records(
    lines: Iterable[bytes], skipped: Counter, state: dict | None = None
) -> Iterator[dict]:
    """Decode JSONL lines into dict records. Undecodable lines count as ``bad_json``, other
    JSON values as ``not_an_object``; with ``state``, ``state["line"]`` counts every line."""
    for raw in lines:
        if state is not None:
            state["line"] += 1
        try:
            rec = json.loads(decode(raw))
        except ValueError:
            skipped["bad_json"] += 1
            continue
        if not isinstance(rec, dict):
            skipped["not_an_object"] += 1
            continue
        yield rec
