"""What ``status`` reads from the store: the last nights, pending proposals, the latest
harvest per source, counts and the last error (the daemon's part is added by the service).

A read: it never writes. A ``running`` night whose process is gone (the night lock is free)
shows as ``interrupted``; marking it so in the database is left to the next night or daemon
start (:func:`.night.lifecycle.recover`).
"""

from __future__ import annotations

from skillopt_sleep.night import lifecycle
from skillopt_sleep.results import (
    Counts,
    HarvestView,
    NightStatus,
    NightSummary,
    NightView,
    PendingProposal,
    Status,
)
from skillopt_sleep.store import NightRow, Store

_FAILED = (NightStatus.FAILED, NightStatus.INTERRUPTED)


def night_view(row: NightRow) -> NightView:
    """A ``nights`` row, typed (its ``summary`` JSON parsed)."""
    fields = {k: getattr(row, k) for k in NightView.model_fields if k not in ("summary", "dry_run")}
    return NightView.model_validate(
        fields
        | {
            "dry_run": bool(row.dry_run),
            "summary": NightSummary.model_validate_json(row.summary or "{}"),
        }
    )


def collect_status(store: Store, *, database: str = "", nights: int = 5) -> Status:
    """The store's part of ``status``; ``database`` is the store's path, as shown."""
    recent = [night_view(r) for r in lifecycle.seen_as(store.nights.recent(nights))]
    # a dry run that only planned (or found nothing to plan) is not "the last night"; one
    # that failed is
    real = store.nights.last_real()
    last = night_view(lifecycle.seen_as([real])[0]) if real else None
    harvest: dict[str, HarvestView] = {}
    for row in store.harvests.recent(50):
        if row.source not in harvest:
            harvest[row.source] = HarvestView.model_validate(
                row.as_dict() | {"at": row.finished_at or row.started_at}
            )
    return Status(
        database=database,
        counts=Counts.model_validate(store.counts.totals()),
        sessions_by_source=store.counts.sessions_by_source(),
        last_night=last,
        nights=recent,
        last_error=last.error if last and last.status in _FAILED else None,
        pending_proposals=[
            PendingProposal.of(p, renamed={"target": "target_path"})
            for p in store.proposals.staged()
        ],
        harvest=harvest,
    )
