"""Live file watching for the daemon.

:class:`Watcher` keeps one watchdog watch per enabled source root:

* a root that exists is watched recursively (directories created later, such as a new
  ``~/.codex/sessions/YYYY/MM/DD/``, are covered; their creation is also reported so files
  written before the kernel watch was added are scanned);
* a root that does not exist yet is *waiting*: its nearest existing ancestor is watched (not
  recursively) and the watch moves down as folders appear, until the root itself is watched
  and scanned;
* a root that cannot be watched (permission denied, inotify limit) is in *error* and retried
  by :meth:`Watcher.check`, which the daemon calls periodically (its periodic rescan covers
  the gap either way);
* a watched root that disappears goes back to *waiting*.

:class:`Debouncer` collects changed paths and hands them over in batches once writes have
been quiet for ``debounce`` seconds (or at the latest after ``max_delay``), so a burst of
appends to one transcript becomes one ingest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

log = logging.getLogger("skillopt_sleep.daemon")

#: Event types that may mean new bytes (watchdog >= 4 names).
_WRITE_EVENTS = {"created", "modified", "moved", "closed"}


@dataclass
class WatchedRoot:
    source: str
    root: Path
    state: str = "new"  # watching | waiting | error
    watching: Path | None = None  # the folder actually watched (root, or an ancestor)
    error: str = ""
    watch: Any = None
    inode: int = 0  # of the watched root: a root deleted and re-created must be re-armed

    def view(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "root": str(self.root),
            "state": self.state,
            "watching": str(self.watching) if self.watching else None,
            "error": self.error,
        }


class _RootHandler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher, wr: WatchedRoot):
        self.watcher, self.wr = watcher, wr

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _WRITE_EVENTS:
            return
        raw = getattr(event, "dest_path", "") or event.src_path
        path = Path(raw.decode() if isinstance(raw, bytes) else raw)
        if event.is_directory:
            if event.event_type in ("created", "moved"):
                self.watcher.on_dir(self.wr.source, path)
            return
        self.watcher.on_file(self.wr.source, path)


class _ParentHandler(FileSystemEventHandler):
    """On an ancestor of a missing root: any folder appearing may be (on the way to) it."""

    def __init__(self, watcher: Watcher, wr: WatchedRoot):
        self.watcher, self.wr = watcher, wr

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory and event.event_type in ("created", "moved"):
            self.watcher.request_check()


class Watcher:
    """Watches ``roots`` (``(source name, root)`` pairs); calls ``on_file(source, path)`` for
    written files and ``on_dir(source, path)`` for folders that appeared (to be scanned)."""

    def __init__(
        self,
        roots: list[tuple[str, Path]],
        on_file: Callable[[str, Path], None],
        on_dir: Callable[[str, Path], None],
        observer_factory: Callable[[], Any] = Observer,
    ):
        self.roots = [WatchedRoot(source, Path(root)) for source, root in roots]
        self.on_file, self.on_dir = on_file, on_dir
        self._observer = observer_factory()
        self._lock = threading.RLock()
        self._check_requested = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._refs: dict[Any, set[int]] = {}

    def start(self) -> Watcher:
        self._observer.daemon = True
        self._observer.start()
        self.check()
        self._thread = threading.Thread(target=self._maintain, name="watch-maint", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._check_requested.set()
        try:
            self._observer.stop()
            self._observer.join(timeout=5)
        except Exception:  # pragma: no cover - shutting down anyway
            pass

    def request_check(self) -> None:
        self._check_requested.set()

    def _maintain(self) -> None:
        while not self._stopping.is_set():
            self._check_requested.wait()
            self._check_requested.clear()
            if self._stopping.is_set():
                return
            try:
                self.check()
            except Exception:  # pragma: no cover - never let the thread die
                log.exception("watcher check failed")

    def check(self) -> None:
        """(Re-)arm every root: watch roots that appeared, fall back to an ancestor for roots
        that vanished, retry roots in error."""
        with self._lock:
            for wr in self.roots:
                self._arm(wr)

    def _schedule(
        self, wr: WatchedRoot, handler: FileSystemEventHandler, path: Path, recursive: bool
    ) -> None:
        """Add ``handler`` on ``path``. watchdog shares one watch per (path, recursive) among
        handlers, so watches are reference-counted here (several roots may wait on one parent)."""
        watch = self._observer.schedule(handler, str(path), recursive=recursive)
        self._refs.setdefault(watch, set()).add(id(wr))
        wr.watch = (watch, handler)

    def _unschedule(self, wr: WatchedRoot) -> None:
        if wr.watch is None:
            return
        watch, handler = wr.watch
        wr.watch = None
        users = self._refs.get(watch, set())
        users.discard(id(wr))
        try:
            if users:
                self._observer.remove_handler_for_watch(handler, watch)
            else:
                self._refs.pop(watch, None)
                self._observer.unschedule(watch)
        except (KeyError, ValueError, OSError):
            pass

    def _arm(self, wr: WatchedRoot) -> None:
        if wr.root.is_dir():
            try:
                inode = wr.root.stat().st_ino
            except OSError:
                inode = 0
            if wr.state == "watching" and wr.watching == wr.root and wr.inode == inode:
                return
            wr.inode = inode
            self._unschedule(wr)
            try:
                self._schedule(wr, _RootHandler(self, wr), wr.root, recursive=True)
            except OSError as exc:  # permission denied, inotify watch limit, …
                if wr.state != "error" or wr.error != str(exc):
                    log.warning(
                        "cannot watch %s (%s): relying on the periodic rescan", wr.root, exc
                    )
                wr.state, wr.watching, wr.error = "error", None, str(exc)
                return
            was_waiting = wr.state in ("waiting", "new", "error")
            wr.state, wr.watching, wr.error = "watching", wr.root, ""
            log.info("watching %s root %s", wr.source, wr.root)
            if was_waiting and wr.state == "watching":
                self.on_dir(wr.source, wr.root)  # files may have arrived before the watch
            return
        parent = wr.root.parent
        while not parent.is_dir() and parent != parent.parent:
            parent = parent.parent
        if wr.state == "waiting" and wr.watching == parent:
            return
        self._unschedule(wr)
        try:
            self._schedule(wr, _ParentHandler(self, wr), parent, recursive=False)
        except OSError as exc:
            wr.state, wr.watching, wr.error = "error", None, str(exc)
            return
        wr.state, wr.watching, wr.error = "waiting", parent, ""
        log.info("%s root %s does not exist yet: watching %s", wr.source, wr.root, parent)
        # the folder may have appeared between the is_dir() test and the watch
        if wr.root.is_dir() or any(p.is_dir() for p in _between(parent, wr.root)):
            self.request_check()

    def status(self) -> list[dict[str, Any]]:
        with self._lock:
            return [wr.view() for wr in self.roots]


def _between(ancestor: Path, root: Path) -> list[Path]:
    """Folders strictly below ``ancestor`` on the way to ``root`` (inclusive of root)."""
    out = []
    p = root
    while p != ancestor and p != p.parent:
        out.append(p)
        p = p.parent
    return out


@dataclass
class Batch:
    files: dict[tuple[str, str], None] = field(default_factory=dict)  # ordered set
    dirs: dict[tuple[str, str], None] = field(default_factory=dict)
    full: bool = False  # a recorded harvest() pass (start, ingest-now)
    rescan: bool = False  # a quiet stat-compare pass over every root (periodic, resume)
    token: int = 0  # highest ingest-now request this batch answers

    def __bool__(self) -> bool:
        return bool(self.files or self.dirs or self.full or self.rescan)


class Debouncer:
    """Thread-safe collection of pending work, released in batches after a quiet period."""

    def __init__(self, debounce: float = 0.5, max_delay: float | None = None):
        self.debounce = debounce
        self.max_delay = max_delay if max_delay is not None else max(2.0, 5 * debounce)
        self._cond = threading.Condition()
        self._batch = Batch()
        self._first = 0.0
        self._last = 0.0

    def _touch(self) -> None:
        now = time.monotonic()
        if not self._batch:
            self._first = now
        self._last = now

    def add_file(self, source: str, path: Path) -> None:
        with self._cond:
            self._touch()
            self._batch.files[(source, str(path))] = None
            self._cond.notify_all()

    def add_dir(self, source: str, path: Path) -> None:
        with self._cond:
            self._touch()
            self._batch.dirs[(source, str(path))] = None
            self._cond.notify_all()

    def request_full(self, immediate: bool = True, token: int = 0) -> None:
        with self._cond:
            self._touch()
            self._batch.full = True
            self._batch.token = max(self._batch.token, token)
            if immediate:
                self._first = self._last = time.monotonic() - self.max_delay
            self._cond.notify_all()

    def request_rescan(self) -> None:
        with self._cond:
            self._touch()
            self._batch.rescan = True
            self._first = self._last = time.monotonic() - self.max_delay
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._batch.files) + len(self._batch.dirs) + int(self._batch.full)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def take(self, stop: threading.Event, poll: float = 1.0) -> Batch | None:
        """Block until a batch is due (or ``stop`` is set: returns None)."""
        with self._cond:
            while not stop.is_set():
                if self._batch:
                    now = time.monotonic()
                    due = min(self._last + self.debounce, self._first + self.max_delay)
                    if now >= due:
                        batch, self._batch = self._batch, Batch()
                        return batch
                    self._cond.wait(timeout=min(due - now, poll))
                else:
                    self._cond.wait(timeout=poll)
        return None
