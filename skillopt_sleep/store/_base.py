"""What every repository shares: the database handle, its writer lock and the clock."""

from __future__ import annotations

import contextlib
import datetime as _dt
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from sqlite_utils import Database

#: A stored row: column name → value, as SQLite returns it (JSON columns still encoded
#: unless a method says otherwise).
Row = dict[str, Any]


def now_iso() -> str:
    """The current time, ISO 8601 UTC to the second (``2026-01-02T03:04:05+00:00``)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class StoreDatabase(Database):
    """The store's connection, shareable by threads (a night's replay workers write the
    response cache while its own thread reads and writes the rest): one reentrant ``lock``
    serializes every write. A write transaction (``store.write()``, and every
    sqlite-utils write, which runs in :meth:`atomic`) holds it from ``BEGIN`` to ``COMMIT``,
    so no other thread's statement lands inside it or interleaves its savepoints; every
    statement (:meth:`execute`) takes it too, so a read waits for a transaction another
    thread has open instead of seeing its uncommitted rows. A read that may run on a worker
    thread fetches its rows under the lock (:meth:`Repository._one` does)."""

    #: opened read-only (see :attr:`skillopt_sleep.store.Store.read_only`)
    read_only: bool = False

    def __init__(self, conn: sqlite3.Connection):
        self.lock = threading.RLock()
        super().__init__(conn)
        # SQLite has had upsert (ON CONFLICT … DO UPDATE) since 3.24: sqlite-utils need not
        # find out on the first upsert with a table it creates and drops, a drop that fails
        # ("database table is locked") while another thread's statement is under way
        # (parallel workers' first response-cache writes into a store upserted nothing yet)
        self._supports_on_conflict = sqlite3.sqlite_version_info >= (3, 24, 0)

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Database]:
        with self.lock, super().atomic():
            yield self

    def execute(
        self, sql: str, parameters: Sequence[Any] | dict[str, Any] | None = None
    ) -> sqlite3.Cursor:
        with self.lock:
            return super().execute(sql, parameters)

    def executescript(self, sql: str) -> sqlite3.Cursor:
        with self.lock:
            return super().executescript(sql)


@contextlib.contextmanager
def write_transaction(db: StoreDatabase) -> Iterator[StoreDatabase]:
    """One write transaction, taken at once (``BEGIN IMMEDIATE``), holding the store's
    writer lock until it ends (another thread's writes wait for it). In WAL mode a deferred
    transaction that reads first and writes later fails at once with "database is
    locked" when another process committed in between (the busy timeout does not help);
    this one waits for the write lock up to the busy timeout instead. Nested (in the same
    thread): a savepoint."""
    with db.lock:
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


#: SQLite's primary result codes of a failure of the machine or the file (not of our code),
#: with what the user can do about it
_MACHINE_FAILURES: dict[int, str] = {
    sqlite3.SQLITE_CORRUPT: (
        "the database file is damaged — move skillopt.db aside (keep it: it holds the "
        "adoption history `rollback` needs; `sqlite3 skillopt.db .recover` may save it) and "
        "run `skillopt-sleep harvest` to rebuild the sessions"
    ),
    sqlite3.SQLITE_NOTADB: (
        "the database file is not an SQLite database — move skillopt.db aside (keep it) and "
        "run `skillopt-sleep harvest` to rebuild the sessions"
    ),
    sqlite3.SQLITE_FULL: (
        "the disk is full — free some space and run it again (the interrupted write was "
        "rolled back: nothing stored is lost; do not delete skillopt.db, it holds the "
        "adoption history)"
    ),
    sqlite3.SQLITE_IOERR: "the disk could not be read or written",
    sqlite3.SQLITE_READONLY: "the database cannot be written (read-only file or folder)",
    sqlite3.SQLITE_PERM: "the database cannot be written (permissions)",
    sqlite3.SQLITE_CANTOPEN: "the database file cannot be opened",
    sqlite3.SQLITE_BUSY: "another process kept the database locked too long; try again",
    sqlite3.SQLITE_LOCKED: "another process kept the database locked too long; try again",
    sqlite3.SQLITE_NOMEM: "out of memory",
    sqlite3.SQLITE_PROTOCOL: "the database's lock protocol failed (a network file system?)",
}


def machine_failure(exc: sqlite3.Error) -> str | None:
    """What the user can do about an SQLite failure of the machine or the file (damaged,
    full, read-only, locked too long), or None when it is none of these: then it is a bug
    (a misused connection, "no such savepoint", a bad statement) and must be reported as
    one, never as a damaged database."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    return _MACHINE_FAILURES.get(code & 0xFF)


class Repository:
    """A repository owns the SQL of one part of the store. It never opens a transaction
    itself unless its method says so: callers group writes with ``with store.write():``."""

    def __init__(self, db: StoreDatabase):
        self.db = db

    def _insert(self, table: str, row: dict[str, Any]) -> int:
        """Insert ``row`` into ``table``; returns its integer primary key."""
        with self.db.lock:  # last_pk is read from the connection: no other insert in between
            pk = self.db.table(table).insert(row).last_pk
        assert isinstance(pk, int), pk
        return pk

    def _one(self, table: str, where: str, args: list[Any]) -> Row | None:
        """The first row of ``table`` matching ``where`` (one statement: no look at the
        table's schema first, as a sqlite-utils ``rows_where`` takes), or None."""
        with self.db.lock:  # fetched under the lock: safe from a worker thread
            cur = self.db.execute(f"select * from [{table}] where {where} limit 1", args)
            rows = cur.fetchall()  # to the end: no statement is left running on the connection
        if not rows:
            return None
        return {d[0]: v for d, v in zip(cur.description, rows[0], strict=True)}

    def _upsert(self, table: str, row: dict[str, Any], pk: str) -> None:
        """Insert ``row`` into ``table``, or update the given columns of the row whose
        ``pk`` is ``row[pk]`` (the others are kept): one statement, as sqlite-utils'
        ``upsert(row, pk=pk, alter=False)`` does once it has read the table's schema."""
        cols = list(row)
        names = ", ".join(f"[{c}]" for c in cols)
        marks = ", ".join("?" * len(cols))
        sets = ", ".join(f"[{c}] = excluded.[{c}]" for c in cols if c != pk)
        action = f"do update set {sets}" if sets else "do nothing"
        self.db.execute(
            f"insert into [{table}] ({names}) values ({marks}) on conflict([{pk}]) {action}",
            list(row.values()),
        )
