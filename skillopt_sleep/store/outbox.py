"""``outbox``: one row per outbound model call — backend, model, purpose, size, hash and the
redacted text sent, the text kept for ``privacy.outbox_days`` days (then emptied; the row
stays)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from skillopt_sleep.redact import redact
from skillopt_sleep.store._base import Repository


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """An ``outbox`` row (one outbound model call); fields in the table's column order."""

    id: int
    at: str | None
    role: str | None
    purpose: str | None
    backend: str | None
    model: str | None
    endpoint: str | None
    chars: int | None
    sha256: str | None
    response_chars: int | None
    status: str | None
    prompt: str | None  # the redacted text sent ("" once expired)

    def as_dict(self) -> dict[str, Any]:
        """The row as a dict (column → value, in column order)."""
        return dataclasses.asdict(self)


class OutboxRepo(Repository):
    def record(self, row: dict[str, Any]) -> int:
        """Record a call (``prompt`` is redacted here whatever the caller did)."""
        row = dict(row)
        row["prompt"] = redact(str(row.get("prompt") or ""))
        return self._insert("outbox", row)

    @staticmethod
    def cutoff(days: int) -> str:
        """The time before which a call's kept text is emptied (``days`` 0: every call)."""
        if days <= 0:
            return "9999"
        return (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")

    def expire(self, days: int) -> int:
        """Empty the kept text of calls older than ``days`` days (0: all); rows stay."""
        cutoff = self.cutoff(days)
        with self.db.atomic():
            cur = self.db.execute(
                "update outbox set prompt = '' where prompt != '' and at < ?", [cutoff]
            )
        return cur.rowcount

    def recent(self, limit: int = 50) -> list[OutboxRow]:
        """The last ``limit`` calls, newest first."""
        with self.db.lock:
            rows = list(self.db.table("outbox").rows_where(order_by="id desc", limit=limit))
        return [OutboxRow(**r) for r in rows]
