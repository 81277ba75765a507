"""The SQLite store: one file, WAL mode, migrated on open.

``Store(db)`` takes a :class:`sqlite_utils.Database` (or a path) so tests can pass
``tmp_path / "x.db"``; :func:`open_store` opens the user's default database.
All timestamps are ISO 8601 UTC strings.

Every SQL statement on our database lives in this package, in one repository per part of
the store, reached as attributes of :class:`Store`:

==================  ==========================================================
``store.files``     harvested log files (offsets, parse state)
``store.sessions``  sessions, messages and full-text search
``store.harvests``  harvest passes
``store.tasks``     mined tasks
``store.nights``    nights (written through ``night.lifecycle``)
``store.rollouts``  replays and their scores
``store.edits``     the optimizer's edits and the gate's verdicts
``store.proposals`` staged proposals
``store.adoptions`` adoptions (and their rollback)
``store.cache``     the model response cache
``store.counts``    row counts for status
``store.forget``    deleting stored data for good (``forget``)
``store.outbox``    every outbound model call (``outbox``)
``store.mining``    each project's clustering, kept between mining runs
``store.readings``  what the optimizer model read in the user's follow-ups
==================  ==========================================================

Reads never write. ``store.write()`` groups writes in one ``BEGIN IMMEDIATE`` transaction.

A store whose folder (or file) this user cannot write — a backup, another user's folder — is
opened read-only (:attr:`Store.read_only`; SQLite ``mode=ro``, or ``immutable=1`` when its
WAL's shared-memory file cannot be made there): read commands work, and the first write
raises :class:`StoreError` naming the folder (:meth:`Store.refuse_write`).

Threads may share a store (a night's replay workers write the response cache): its
connection (:class:`~skillopt_sleep.store._base.StoreDatabase`) has one writer lock that every
write transaction holds from begin to commit and every statement takes, so writes from
several threads are serialized and never nest in each other's transactions.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from skillopt_sleep import paths
from skillopt_sleep.errors import StoreError
from skillopt_sleep.store._base import (
    Row,
    StoreDatabase,
    machine_failure,
    now_iso,
    write_transaction,
)
from skillopt_sleep.store.cache import CachedResponse, ResponseCache
from skillopt_sleep.store.counts import Counts
from skillopt_sleep.store.edits import EditsRepo
from skillopt_sleep.store.files import FileRow, FilesRepo
from skillopt_sleep.store.forget import ForgetRepo
from skillopt_sleep.store.harvests import HarvestRow, HarvestsRepo
from skillopt_sleep.store.migrations import migrations
from skillopt_sleep.store.mining import MiningRepo
from skillopt_sleep.store.nights import NightRow, NightsRepo
from skillopt_sleep.store.outbox import OutboxRepo, OutboxRow
from skillopt_sleep.store.proposals import AdoptionRow, AdoptionsRepo, ProposalRow, ProposalsRepo
from skillopt_sleep.store.readings import ReadingsRepo
from skillopt_sleep.store.rollouts import RolloutRow, RolloutsRepo
from skillopt_sleep.store.sessions import MessageRow, Place, SearchHit, SessionRow, SessionsRepo
from skillopt_sleep.store.tasks import TasksRepo
from skillopt_sleep.store.wild import WildRepo

if TYPE_CHECKING:
    from sqlite_utils import Database

__all__ = [
    "AdoptionRow",
    "CachedResponse",
    "FileRow",
    "HarvestRow",
    "MessageRow",
    "NightRow",
    "OutboxRow",
    "Place",
    "ProposalRow",
    "RolloutRow",
    "Row",
    "SearchHit",
    "SessionRow",
    "Store",
    "StoreDatabase",
    "machine_failure",
    "now_iso",
    "open_store",
]


def _check_intact(db: StoreDatabase, path: Path, table: str | None = None) -> None:
    """Refuse a damaged database file before anything reads or writes it (``PRAGMA
    quick_check``: page structure, milliseconds for a store of this size): a damaged store is
    never written on, and the command fails with the way out instead of exiting 0. ``table``:
    only that table's pages and its indexes'."""
    from skillopt_sleep.store._base import _MACHINE_FAILURES

    try:
        rows = db.execute(f"PRAGMA quick_check({table or 1})").fetchall()
        problem = "" if rows and rows[0][0] == "ok" else str(rows[0][0] if rows else "no answer")
    except sqlite3.DatabaseError as exc:
        if machine_failure(exc) is None or getattr(exc, "sqlite_errorcode", 0) & 0xFF not in (
            sqlite3.SQLITE_CORRUPT,
            sqlite3.SQLITE_NOTADB,
        ):
            raise
        problem = str(exc)
    if problem:
        first = problem.replace("*** in database main ***", "").strip().splitlines()[0]
        raise StoreError(
            f"{path}: {_MACHINE_FAILURES[sqlite3.SQLITE_CORRUPT]} (check: {first[:120]})"
        )


#: a store up to this size is checked page by page (:meth:`Store.check`) whenever it is opened
#: with ``check=None`` (read commands): about 100 ms at most in the page cache; a larger one
#: when it is first written. Measured (``tests/bench/bench_store_open.py``, 2 shared cores):
#: 31 MB 40 ms warm / 205 ms cold; 1 GB 1.5–3.0 s warm / 8.1 s cold, an open without it 1 ms
CHECK_ON_OPEN_BYTES = 32 * 1024 * 1024


def _writable(path: Path) -> bool:
    """Whether this user may write the store at ``path`` (its folder, and the file if it
    exists, with the WAL's side files)."""
    folder = path.parent
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        return False
    return all(
        not p.exists() or os.access(p, os.W_OK)
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
    )


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection: ``mode=ro`` (it sees the WAL; it needs the shared-memory file
    or a folder where it can be made), else ``immutable=1`` (the file as it is)."""
    uri = "file:" + quote(str(path.absolute()))
    last: sqlite3.Error | None = None
    for query in ("mode=ro", "mode=ro&immutable=1"):
        conn = sqlite3.connect(f"{uri}?{query}", uri=True, timeout=30, check_same_thread=False)
        try:
            conn.execute("select count(*) from sqlite_master").fetchone()
            return conn
        except sqlite3.Error as exc:
            conn.close()
            last = exc
    assert last is not None
    raise last


class Store:
    """The store: its repositories as attributes (see the module doc). Opening raises
    :class:`StoreError` when the file cannot be opened or is not a usable database.
    ``read_only``: open it read-only (default: when this user cannot write it)."""

    #: the store was opened read-only (its folder or file is not writable by this user)
    read_only: bool = False

    #: :meth:`check` found the file sound on this connection
    checked: bool = False

    def __init__(
        self,
        db: Database | StoreDatabase | str | Path,
        *,
        read_only: bool | None = None,
        check: bool | None = True,
    ):
        db_given, new = db, False
        if check is None:  # as cheap as it is on a small file, else left to the first write
            try:
                check = Path(str(db)).stat().st_size <= CHECK_ON_OPEN_BYTES
            except (OSError, TypeError):
                check = True
        self._check = check
        self.db: StoreDatabase
        if isinstance(db, StoreDatabase):
            self.db = db
        elif not isinstance(db, (str, Path)):  # a sqlite_utils.Database (tests)
            self.db = StoreDatabase(db.conn)
        elif read_only or (read_only is None and not _writable(Path(db))):
            path = Path(db)
            self.read_only, self.path = True, path
            if not path.is_file():
                raise StoreError(
                    f"cannot open database {path}: there is none, and its folder "
                    f"{path.parent} is read-only"
                )
            try:
                self.db = StoreDatabase(_connect_read_only(path))
                self.db.read_only = True
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open database {path} (read-only): {exc}") from None
        else:
            path = Path(db)
            # the store holds message text from the user's sessions: private to the user
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            new = not path.exists()
            try:
                self.db = StoreDatabase(
                    sqlite3.connect(str(path), timeout=30, check_same_thread=False)
                )
                if new:
                    self.db.execute("PRAGMA user_version")  # creates the file
                    with contextlib.suppress(OSError):
                        os.chmod(path, 0o600)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open database {path}: {exc}") from None
        db = self.db
        if self.read_only:
            self._open_read_only(Path(db_given))  # type: ignore[arg-type]
        else:
            self._open_writable(db_given, new)
        self._repositories(db)

    def _open_read_only(self, path: Path) -> None:
        try:
            if self._check:
                self.check()
            else:
                self.db.execute("select count(*) from sqlite_master").fetchone()
            pending = migrations.pending_names(self.db)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"database is unusable: {exc}") from None
        if pending:
            raise StoreError(
                f"{path}: written by an older version, and its folder {path.parent} is "
                f"read-only, so it cannot be upgraded ({pending[0]} is pending): copy the "
                "folder somewhere writable and point SKILLOPT_SLEEP_HOME at the copy"
            )

    def refuse_write(self) -> None:
        """Raise :class:`StoreError` naming the folder when the store is read-only."""
        if self.read_only:
            folder = self.path.parent
            raise StoreError(
                f"the state folder {folder} is read-only for this user: this command writes "
                "to it (read commands work: status, proposals, show, tasks, search, nights)"
            )

    def _open_writable(self, db_given: Database | StoreDatabase | str | Path, new: bool) -> None:
        try:
            self.db.execute("PRAGMA busy_timeout = 30000")
            if isinstance(db_given, (str, Path)) and not new:
                self.path = Path(db_given)
                if self._check:
                    self.check()
                else:  # the header and the schema page only: a file that is no database
                    self.db.execute("select count(*) from sqlite_master").fetchone()
            if self.db.execute("PRAGMA journal_mode").fetchone()[0] not in ("memory", "wal"):
                self.db.enable_wal()
            if self.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                # WAL + NORMAL: a commit is not fsynced (the WAL is, at each checkpoint). A
                # killed process loses nothing committed; a power cut or OS crash may lose
                # the last commits, never the database's consistency (docs/architecture.md)
                self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute("PRAGMA foreign_keys = ON")
            # deleted and overwritten text (re-redaction, forget) is zeroed, not left in pages
            self.db.execute("PRAGMA secure_delete = ON")
            if not migrations.up_to_date(self.db):  # one query when there is nothing to do
                self.check()  # a migration writes: never on a damaged file
                before = self._migrations()
                migrations.apply(self.db)
                if (
                    self._migrations() != before
                    and self.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
                ):
                    # a migration rewrote rows (m004 re-redacts): the old pages leave the file
                    self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"database is unusable: {exc}") from None

    def _repositories(self, db: StoreDatabase) -> None:
        self.files = FilesRepo(db)
        self.sessions = SessionsRepo(db)
        self.harvests = HarvestsRepo(db)
        self.tasks = TasksRepo(db)
        self.nights = NightsRepo(db)
        self.rollouts = RolloutsRepo(db)
        self.edits = EditsRepo(db)
        self.proposals = ProposalsRepo(db)
        self.adoptions = AdoptionsRepo(db)
        self.cache = ResponseCache(db)
        self.counts = Counts(db)
        self.wild = WildRepo(db)
        self.forget = ForgetRepo(db)
        self.outbox = OutboxRepo(db)
        self.mining = MiningRepo(db)
        self.readings = ReadingsRepo(db)

    def _migrations(self) -> int:
        if not self.db.table("_sqlite_migrations").exists():
            return 0
        return int(self.db.execute("select count(*) from _sqlite_migrations").fetchone()[0])

    def check(self) -> None:
        """Refuse a damaged file (``PRAGMA quick_check``, :class:`StoreError` with the way
        out); once per connection. It reads every page (seconds for a store of a GB,
        ``tests/bench/bench_store_open.py``): ``Store(path)`` runs it on open (daemon start,
        a night, tests); the service's shared store (``check=None``) only when the file is
        at most :data:`CHECK_ON_OPEN_BYTES`, else before its first write (adopt, reject,
        rollback, forget, tasks; a migration); ``harvest`` opens it unchecked and runs it
        before it writes what it read (a pass that read nothing checks only the table its
        record goes to: :meth:`check_table`) — and doctor runs the full ``quick_check``."""
        if not self.checked and getattr(self, "path", None) is not None:
            _check_intact(self.db, self.path)
        self.checked = True

    def check_table(self, table: str) -> None:
        """Refuse a damaged ``table`` (``PRAGMA quick_check(table)``: its pages and its
        indexes', milliseconds) before a write to that table alone, unless :meth:`check`
        ran: a harvest that read nothing new records its pass so (issue 14), and the whole
        file is checked before any other write."""
        if not self.checked and getattr(self, "path", None) is not None:
            _check_intact(self.db, self.path, table)

    def integrity(self) -> list[str]:
        """SQLite's ``quick_check`` of the database and its ``foreign_key_check`` (a row that
        names a night, task, proposal, adoption or session the store does not hold): [] when
        sound, else the findings."""
        rows = [str(r[0]) for r in self.db.execute("pragma quick_check").fetchall()]
        found = [] if rows == ["ok"] else rows
        for table, rowid, parent, _ in self.db.execute("pragma foreign_key_check").fetchall():
            found.append(f"{table} row {rowid} names a missing {parent} row")
        return found

    def close(self) -> None:
        """Close the connection, under the writer lock when the store has one: a worker
        thread's statement in flight finishes first (closing under a running statement
        crashes the interpreter)."""
        lock = getattr(self.db, "lock", None)
        if lock is None:
            self.db.conn.close()
            return
        with lock:
            self.db.conn.close()

    def write(self) -> contextlib.AbstractContextManager[StoreDatabase]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``) under the store's writer
        lock (other threads' writes wait for it); nested: a savepoint.
        See :func:`~skillopt_sleep.store._base.write_transaction`. A read-only store refuses
        (:meth:`refuse_write`)."""
        self.refuse_write()
        return write_transaction(self.db)


def open_store(path: Path | None = None) -> Store:
    """Open (creating and migrating) the user's store at ``paths.db_path()``."""
    return Store(path or paths.db_path())
