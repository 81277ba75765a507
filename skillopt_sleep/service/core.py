"""What every concern service shares: the config file, the store connection and its lock.

A :class:`Core` holds one store connection, opened on first use and shared under a lock (the
MCP server calls the service from several threads); a night run in a background thread opens
its own. An SQLite failure is a :class:`~skillopt_sleep.errors.StoreError` (one line).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillopt_sleep import paths
from skillopt_sleep.config import Settings, load_settings
from skillopt_sleep.errors import BadArgument, ConfigError, StoreError
from skillopt_sleep.store import Store, machine_failure

Progress = Callable[[str], None]


class Core:
    """The config file and the store of one :class:`~skillopt_sleep.service.Service`.

    ``config_path``: the TOML config (None: the user's default file; settings also read the
    ``SKILLOPT_SLEEP_*`` environment). ``store_path``: the SQLite store (None: the user's
    default database, resolved on first use).
    """

    def __init__(self, config_path: Path | None = None, *, store_path: Path | None = None):
        self.config_path = Path(config_path) if config_path else None
        self.store_path = Path(store_path) if store_path else None
        self.lock = threading.RLock()
        self._store: Store | None = None

    def settings(self, **overrides: Any) -> Settings:
        """Settings from the config file < environment < ``overrides`` (None values ignored).
        Raises ConfigError naming the offending key."""
        return load_settings(self.config_path, **overrides)

    def config_error(self) -> str | None:
        """Why the config as it is now does not load, or None."""
        try:
            self.settings()
        except ConfigError as exc:
            return str(exc)
        return None

    def config_file(self) -> Path:
        """The config file this service reads (and ``sources`` writes)."""
        return self.config_path or paths.config_file()

    def db_path(self) -> Path:
        return self.store_path or paths.db_path()

    def open(self, *, check: bool | None = None) -> Store:
        """The shared store connection (opened, created and migrated on first use). Its
        page-by-page check (:meth:`Store.check`, seconds on a large store) runs on open for a
        small store, else before the first write through :meth:`use` (``check=True``);
        ``check=False``: not on open (the caller checks before it writes)."""
        with self.lock:
            if self._store is None:
                self._store = Store(self.db_path(), check=check)
            return self._store

    def close(self) -> None:
        with self.lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    @contextmanager
    def use(self, *, check: bool = False, on_open: bool | None = None) -> Iterator[Store]:
        """The store under the lock; an SQLite failure is a StoreError (one line): a write
        to a read-only store names its folder (:meth:`Store.refuse_write`). ``check``: the
        caller writes, so a damaged file is refused first (:meth:`Store.check`).
        ``on_open``: whether opening checks it (see :meth:`open`)."""
        with self.lock:
            store = self.open(check=on_open)
            if check:
                store.check()
            try:
                yield store
            except sqlite3.Error as exc:
                code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
                if store.read_only and code == sqlite3.SQLITE_READONLY:
                    store.refuse_write()
                if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
                    raise StoreError(f"{self.db_path()}: {machine_failure(exc)}") from None
                raise StoreError(f"database error: {exc}") from None


def _project_arg(project: str | None, *, must_exist: bool = True) -> Path | None:
    """An agent's ``project`` argument: absolute (a server's cwd means nothing to its caller),
    ``~`` expanded; a directory unless ``must_exist`` is off (filters may name a project
    folder that is gone). Raises BadArgument."""
    if not project:
        return None
    path = Path(project).expanduser()
    if not path.is_absolute():
        raise BadArgument(f"project must be an absolute path, got {project!r}")
    if not path.is_dir():
        if must_exist:
            raise BadArgument(f"project {project!r} is not a directory")
        return Path(os.path.normpath(path))
    return path.resolve()


def project_arg(project: str | None) -> Path | None:
    """An agent's ``project`` for a night: an absolute, existing directory (BadArgument)."""
    return _project_arg(project, must_exist=True)


def _under(project: str | None, root: Path) -> bool:
    r = str(root).rstrip("/")
    return bool(project) and (project == r or (project or "").startswith(r + "/"))
