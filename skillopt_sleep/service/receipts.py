"""Read receipts: which staged proposals' reports were looked at."""

from __future__ import annotations

from pathlib import Path

from skillopt_sleep.files import atomic_write
from skillopt_sleep.service.core import Core
from skillopt_sleep.store.proposals import ProposalRow


def _seen_key(proposal_id: str, created_at: str | None) -> str:
    return f"{proposal_id}@{created_at or ''}"


class Receipts:
    """The proposals whose report was looked at: a small file beside the store (a read
    receipt, so the notice that a proposal is ready is given until someone looks)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def path(self) -> Path:
        return self.core.db_path().parent / "seen-proposals.json"

    def seen(self) -> set[str]:
        import json

        try:
            data = json.loads(self.path().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return set()
        return {str(x) for x in data} if isinstance(data, list) else set()

    def saw(self, row: ProposalRow) -> None:
        """Remember that ``row``'s report was looked at (never fails the read)."""
        import json

        if row.status != "staged":
            return
        seen = self.seen()
        key = _seen_key(row.id, row.created_at)
        if key in seen:
            return
        path = self.path()
        try:
            atomic_write(path, json.dumps(sorted(seen | {key})[-500:]), private=True)
        except OSError:
            pass
