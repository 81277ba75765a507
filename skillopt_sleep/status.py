"""What ``status`` shows: the last nights, pending proposals, harvest accounting, last error."""

from __future__ import annotations

import json
from typing import Any

from skillopt_sleep import paths
from skillopt_sleep.store import Store


def night_view(row: dict[str, Any]) -> dict[str, Any]:
    out = {
        k: row.get(k)
        for k in (
            "id",
            "status",
            "started_at",
            "finished_at",
            "trigger",
            "project",
            "target_path",
            "error",
            "val_before",
            "val_after",
            "test_before",
            "test_after",
            "calls",
            "cached_calls",
            "input_tokens",
            "output_tokens",
            "seconds",
            "proposal_id",
        )
    }
    out["summary"] = json.loads(row.get("summary") or "{}")
    return out


def collect_status(store: Store, *, nights: int = 5) -> dict[str, Any]:
    """What ``status`` shows. A read: it never writes. A ``running`` night whose process is
    gone (the night lock is free) shows as ``interrupted``; marking it so in the database is
    left to the next night or daemon start (:func:`.night.lifecycle.recover`)."""
    from skillopt_sleep.night import lifecycle

    last_nights = lifecycle.seen_as(store.nights.recent(nights))
    # a dry run that only planned (or found nothing to plan) is not "the last night"; one
    # that failed is
    real = store.nights.last_real()
    last = lifecycle.seen_as([real])[0] if real else None
    harvest: dict[str, Any] = {}
    for row in store.harvests.recent(50):
        harvest.setdefault(
            row["source"],
            {
                "at": row["finished_at"] or row["started_at"],
                "files_seen": row["files_seen"],
                "files_read": row["files_read"],
                "bytes_read": row["bytes_read"],
                "sessions_new": row["sessions_new"],
                "sessions_updated": row["sessions_updated"],
                "sessions_filtered": row["sessions_filtered"],
                "lines_skipped": row["lines_skipped"],
                "files_skipped": row["files_skipped"],
            },
        )
    counts = store.counts.totals()
    from skillopt_sleep.daemon.control import daemon_status

    by_source = store.counts.sessions_by_source()
    return {
        "daemon": daemon_status(),
        "sessions_by_source": by_source,
        "database": str(paths.db_path()),
        "counts": counts,
        "last_night": night_view(last) if last else None,
        "nights": [night_view(n) for n in last_nights],
        "last_error": (
            last["error"] if last and last["status"] in ("failed", "interrupted") else None
        ),
        "pending_proposals": [
            {
                "id": p["id"],
                "target": p["target_path"],
                "created_at": p["created_at"],
                "val_before": p["val_before"],
                "val_after": p["val_after"],
                "test_before": p["test_before"],
                "test_after": p["test_after"],
            }
            for p in store.proposals.staged()
        ],
        "harvest": harvest,
    }
