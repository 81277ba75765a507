"""What every repository shares: the database handle, its writer lock and the clock."""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on first use (a harvest with nothing new needs none of it)
    from sqlite_utils import Database

#: A stored row: column name → value, as SQLite returns it (JSON columns still encoded
#: unless a method says otherwise).
Row = dict[str, Any]


def now_iso() -> str:
    """The current time, ISO 8601 UTC to the second (``2026-01-02T03:04:05+00:00``)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


#: statements that begin or end a transaction themselves (sqlite-utils' list)
_TRANSACTION_CONTROL = {"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"}


def _first_keyword(sql: str) -> str:
    """The first keyword of ``sql``, upper-cased, after whitespace, comments, bare ``;`` and a
    byte order mark ("" when there is none): sqlite-utils' rule, so :meth:`StoreDatabase.execute`
    commits exactly what ``sqlite_utils.Database.execute`` commits."""
    i, n = 0, len(sql)
    while i < n:
        if sql[i].isspace() or sql[i] in (";", "\ufeff"):
            i += 1
        elif sql.startswith("--", i):
            newline = sql.find("\n", i)
            if newline == -1:
                return ""
            i = newline + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end == -1:
                return ""
            i = end + 2
        else:
            break
    j = i
    while j < n and (sql[j].isalpha() or sql[j] == "_"):
        j += 1
    return sql[i:j].upper()


class StoreDatabase:
    """The store's connection, shareable by threads (a night's replay workers write the
    response cache while its own thread reads and writes the rest): one reentrant ``lock``
    serializes every write. A write transaction (``store.write()``, and every
    sqlite-utils write, which runs in :meth:`atomic`) holds it from ``BEGIN`` to ``COMMIT``,
    so no other thread's statement lands inside it or interleaves its savepoints; every
    statement (:meth:`execute`) takes it too, so a read waits for a transaction another
    thread has open instead of seeing its uncommitted rows. A read that may run on a worker
    thread fetches its rows under the lock (:meth:`Repository._one` does).

    :meth:`execute` and :meth:`atomic` behave as ``sqlite_utils.Database``'s; every other
    attribute (``table``, ``db[name]``, ``query``, ``enable_wal`` …) is a
    ``sqlite_utils.Database`` on the same connection, made on first use (its statements go
    through :meth:`execute` and :meth:`atomic`): a command that only reads, or a harvest that
    finds nothing new, never imports sqlite-utils."""

    #: opened read-only (see :attr:`skillopt_sleep.store.Store.read_only`)
    read_only: bool = False

    def __init__(self, conn: sqlite3.Connection):
        self.lock = threading.RLock()
        self.conn = conn
        self._utils: Database | None = None
        self.execute("PRAGMA recursive_triggers=on;")  # as sqlite-utils' Database does

    def utils(self) -> Database:
        """The ``sqlite_utils.Database`` on this connection (made on first use)."""
        if self._utils is None:
            with self.lock:
                if self._utils is None:
                    self._utils = _shared_database()(self)
        return self._utils

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_utils":
            raise AttributeError(name)
        return getattr(self.utils(), name)

    def __getitem__(self, name: str) -> Any:
        return self.utils()[name]

    @contextlib.contextmanager
    def atomic(self) -> Iterator[StoreDatabase]:
        """One transaction (``BEGIN`` … ``COMMIT``), nested: a savepoint; under the lock."""
        with self.lock:
            conn = self.conn
            if conn.in_transaction:
                savepoint = f"sqlite_utils_{secrets.token_hex(16)}"
                conn.execute(f"SAVEPOINT {savepoint};")
                try:
                    yield self
                except BaseException:
                    # a RAISE(ROLLBACK) trigger may have ended the whole transaction
                    if conn.in_transaction:
                        conn.execute(f"ROLLBACK TO SAVEPOINT {savepoint};")
                        conn.execute(f"RELEASE SAVEPOINT {savepoint};")
                    raise
                else:
                    conn.execute(f"RELEASE SAVEPOINT {savepoint};")
                return
            conn.execute("BEGIN")
            try:
                yield self
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            else:
                try:
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise

    def execute(
        self, sql: str, parameters: Sequence[Any] | dict[str, Any] | None = None
    ) -> sqlite3.Cursor:
        """Run one statement under the lock; a write outside a transaction is committed at
        once (an implicit transaction a failed statement opened is rolled back)."""
        with self.lock:
            conn = self.conn
            was_in_transaction = conn.in_transaction
            try:
                if parameters is not None:
                    cursor = conn.execute(sql, parameters)
                else:
                    cursor = conn.execute(sql)
            except Exception:
                if not was_in_transaction and conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if (
                not was_in_transaction
                and conn.in_transaction
                and cursor.description is None
                and _first_keyword(sql) not in _TRANSACTION_CONTROL
            ):
                conn.execute("COMMIT")
            return cursor

    def executescript(self, sql: str) -> sqlite3.Cursor:
        with self.lock:
            return self.utils().executescript(sql)


@functools.cache
def _shared_database() -> Any:
    """The ``sqlite_utils.Database`` subclass behind :meth:`StoreDatabase.utils`: its
    statements and transactions are the store's (:meth:`StoreDatabase.execute`,
    :meth:`StoreDatabase.atomic`), under the store's lock."""
    from sqlite_utils import Database

    class SharedDatabase(Database):
        def __init__(self, store_db: StoreDatabase):
            self.store_db = store_db
            super().__init__(store_db.conn)
            # SQLite has had upsert (ON CONFLICT … DO UPDATE) since 3.24: sqlite-utils need
            # not find out on the first upsert with a table it creates and drops, a drop that
            # fails ("database table is locked") while another thread's statement is under
            # way (parallel workers' first response-cache writes into a store upserted
            # nothing yet)
            self._supports_on_conflict = sqlite3.sqlite_version_info >= (3, 24, 0)

        def execute(
            self, sql: str, parameters: Sequence[Any] | dict[str, Any] | None = None
        ) -> sqlite3.Cursor:
            return self.store_db.execute(sql, parameters)

        @contextlib.contextmanager
        def atomic(self) -> Iterator[Database]:
            with self.store_db.atomic():
                yield self

        def executescript(self, sql: str) -> sqlite3.Cursor:
            with self.store_db.lock:
                return super().executescript(sql)

    return SharedDatabase


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

    def _count_under(self, table: str, path_column: str, source: str, root: str) -> int:
        """How many rows of ``source`` in ``table`` name a file (``path_column``) under the
        folder ``root`` (ending in a separator)."""
        row = self.db.execute(
            f"select count(*) from {table} where source = ? and substr({path_column}, 1, ?) = ?",
            [source, len(root), root],
        ).fetchone()
        return int(row[0])

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        """The rows of one query as dicts (fetched under the lock), without sqlite-utils."""
        with self.db.lock:
            cursor = self.db.execute(sql, args)
            columns = [c[0] for c in cursor.description]
            return [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]

    def _insert_plain(self, table: str, row: dict[str, Any]) -> None:
        """Insert ``row`` (plain values) into ``table`` in one transaction, the statement
        sqlite-utils' ``insert`` runs, without importing it."""
        columns = list(row)
        with self.db.atomic():
            self.db.execute(
                f"INSERT INTO [{table}] ({', '.join(f'[{c}]' for c in columns)}) "
                f"VALUES ({', '.join('?' for _ in columns)});",
                [row[c] for c in columns],
            )

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
