"""``source_files``: one row per harvested log file (how far it was read, its parse state)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from skillopt_sleep.redact import redact, redact_json
from skillopt_sleep.store._base import Repository, now_iso


@dataclass(frozen=True, slots=True)
class FileRow:
    """A ``source_files`` row (see :class:`FilesRepo`); fields in the table's column order."""

    path: str
    source: str
    inode: int | None
    size: int | None
    mtime: float | None
    offset: int | None
    state: str | None  # JSON text
    head_hash: str | None
    lines_ok: int | None
    lines_skipped: int | None
    status: str | None
    last_error: str | None
    updated_at: str | None


@dataclass(frozen=True)
class FileStamp:
    """What a rescan compares with the file on disk to skip an unchanged file."""

    size: int | None
    mtime: float | None
    inode: int | None
    status: str | None
    pending: bool  # a split record is waiting for its end (``head_hash`` starts "pending:")


def redact_state(state: str) -> str:
    """A parse state (JSON text) with every string in it redacted (as text when not JSON)."""
    try:
        return json.dumps(redact_json(json.loads(state)))
    except ValueError:
        return redact(state)


class FilesRepo(Repository):
    """Rows: ``path`` (absolute, the key), ``source``, ``inode``, ``size`` (bytes), ``mtime``
    (epoch seconds), ``offset`` (bytes ingested), ``state`` (JSON), ``head_hash``,
    ``lines_ok``, ``lines_skipped``, ``status`` (ok | skipped | error), ``last_error``,
    ``updated_at``."""

    def get(self, path: str) -> FileRow | None:
        """The file's row, or None when never seen."""
        row = self._one("source_files", "path = ?", [path])
        return FileRow(**row) if row is not None else None

    def put(self, row: dict[str, Any]) -> None:
        """Insert or update the row keyed by ``row["path"]`` (``updated_at`` set to now). The
        parse ``state`` (JSON) and ``last_error`` are stored redacted: a harvester's state
        holds titles, paths and ids read from the logs."""
        row = dict(row, updated_at=now_iso())
        if row.get("state"):
            row["state"] = redact_state(row["state"])
        if row.get("last_error"):
            row["last_error"] = redact(row["last_error"])
        self._upsert("source_files", row, "path")

    def all(self, source: str | None = None) -> list[FileRow]:
        """Every file row, or those of one source."""
        if source:
            rows = self.db.table("source_files").rows_where("source = ?", [source])
        else:
            rows = self.db.table("source_files").rows
        return [FileRow(**r) for r in rows]

    def stamps(self, source: str) -> dict[str, FileStamp]:
        """``{path: FileStamp}`` for every file of ``source``."""
        rows = self.db.execute(
            "select path, size, mtime, inode, status, head_hash like 'pending:%' "
            "from source_files where source = ?",
            [source],
        )
        return {r[0]: FileStamp(r[1], r[2], r[3], r[4], bool(r[5])) for r in rows}

    def latest_mtime(self) -> float | None:
        """The newest modification time (epoch seconds) of any harvested file, or None."""
        row = self.db.execute("select max(mtime) from source_files").fetchone()
        return float(row[0]) if row and row[0] else None

    def count_under(self, source: str, root: str) -> int:
        """How many files of ``source`` lie under the folder ``root`` (ending in a separator)."""
        return self._count_under("source_files", "path", source, root)
