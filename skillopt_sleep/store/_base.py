"""What every repository shares: the database handle and the clock."""

from __future__ import annotations

import contextlib
import datetime as _dt
from collections.abc import Iterator
from typing import Any

from sqlite_utils import Database

#: A stored row: column name → value, as SQLite returns it (JSON columns still encoded
#: unless a method says otherwise).
Row = dict[str, Any]


def now_iso() -> str:
    """The current time, ISO 8601 UTC to the second (``2026-01-02T03:04:05+00:00``)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


@contextlib.contextmanager
def write_transaction(db: Database) -> Iterator[Database]:
    """One write transaction, taken at once (``BEGIN IMMEDIATE``). In WAL mode a deferred
    transaction that reads first and writes later fails at once with "database is
    locked" when another process committed in between (the busy timeout does not help);
    this one waits for the write lock up to the busy timeout instead. Nested: a
    savepoint."""
    if db.conn.in_transaction:
        with db.atomic():
            yield db
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.conn.rollback()
        raise
    else:
        db.conn.commit()


class Repository:
    """A repository owns the SQL of one part of the store. It never opens a transaction
    itself unless its method says so: callers group writes with ``with store.write():``."""

    def __init__(self, db: Database):
        self.db = db

    def _insert(self, table: str, row: dict[str, Any]) -> int:
        """Insert ``row`` into ``table``; returns its integer primary key."""
        pk = self.db.table(table).insert(row).last_pk
        assert isinstance(pk, int), pk
        return pk

    def _one(self, table: str, where: str, args: list[Any]) -> Row | None:
        rows = list(self.db[table].rows_where(where, args, limit=1))
        return rows[0] if rows else None
