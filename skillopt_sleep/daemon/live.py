"""The daemon's live harvest: watcher events → debounced batches → incremental ingest.

:class:`LiveIngest` is mixed into :class:`.core.Daemon` (it uses the daemon's ``sources``,
``roots``, ``settings``, ``debouncer``, ``store()``, ``stopping`` and error record). Watch
threads only queue paths (``_on_file`` / ``_on_dir``); the one ``ingest`` thread
(``_ingest_loop``) resolves a batch to session files through each source's own ``discover``
(so its exclusions apply), ingests them one file per transaction under the ingest lock it
shares with the night worker's pre-harvest, and records the pass for ``status``. A full pass
walks every source; the periodic rescan reads only files whose size, mtime or inode changed
(or that were left pending).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillopt_sleep import paths
from skillopt_sleep.daemon.clock import utc
from skillopt_sleep.daemon.watcher import Batch, Debouncer

log = logging.getLogger("skillopt_sleep.daemon")

#: SQLite sidecars that stand for their database when they change
_SIDECARS = ("-wal", "-journal", "-shm")


class LiveIngest:
    """Live, incremental harvest for the daemon (a mixin; see the module docstring)."""

    # set by the daemon (:class:`.core.Daemon`) before the ingest thread starts
    settings: Any
    sources: dict[str, Any]
    roots: list[tuple[str, Path]]
    debouncer: Debouncer | None
    stopping: threading.Event
    clock: Callable[[], dt.datetime]
    last_ingest: dict[str, Any]
    last_activity_ts: float | None
    _seq_cond: threading.Condition
    _ingest_done_seq: int
    _ingest_req_seq: int

    def store(self) -> Any:
        """A context manager holding a fresh store connection as ``.store`` (the daemon's)."""
        raise NotImplementedError

    def note_error(self, message: str) -> None:
        raise NotImplementedError

    def _on_file(self, source: str, path: Path) -> None:
        # any file: the source's own discover() decides below (formats differ per agent)
        assert self.debouncer is not None
        self.debouncer.add_file(source, path)

    def _on_dir(self, source: str, path: Path) -> None:
        assert self.debouncer is not None
        self.debouncer.add_dir(source, path)

    def _root_of(self, source: str, path: Path) -> Path | None:
        best = None
        for name, root in self.roots:
            if (
                name == source
                and (path == root or root in path.parents)
                and (best is None or len(root.parts) > len(best.parts))
            ):
                best = root
        return best

    def _session_files(self, batch: Batch) -> list[tuple[str, str]]:
        """Resolve a batch (changed files, appeared folders) to session files. A path counts
        only if the source's ``discover``, started at the path's top folder below its root,
        yields it (so a source's exclusions, e.g. Claude Code ``tool-results/``, apply)."""
        wanted: list[tuple[str, Path, bool]] = []  # (source, path, is_dir)
        scans: dict[tuple[str, Path], set[str]] = {}
        for items, is_dir in ((batch.files, False), (batch.dirs, True)):
            for source, raw in items:
                path = Path(os.path.abspath(raw))
                root = self._root_of(source, path)
                if root is None:
                    continue
                rel = path.relative_to(root).parts
                top = root if (len(rel) <= 1 and not is_dir) or not rel else root / rel[0]
                scans.setdefault((source, top), set())
                wanted.append((source, path, is_dir))
        for source, top in list(scans):
            try:
                scans[(source, top)] = {
                    os.path.abspath(p) for p in self.sources[source].discover(top)
                }
            except OSError as exc:
                log.warning("cannot list %s: %s", top, exc)
        found: dict[tuple[str, str], None] = {}
        for source, path, is_dir in wanted:
            root = self._root_of(source, path)
            assert root is not None
            rel = path.relative_to(root).parts
            top = root if (len(rel) <= 1 and not is_dir) or not rel else root / rel[0]
            listed = scans.get((source, top), set())
            if is_dir:
                prefix = str(path).rstrip(os.sep) + os.sep
                for p in sorted(listed):
                    if p.startswith(prefix):
                        found[(source, p)] = None
            elif str(path) in listed:
                found[(source, str(path))] = None
            else:  # an SQLite sidecar (e.g. "x.db-wal") stands for its database
                for suffix in _SIDECARS:
                    if str(path).endswith(suffix) and str(path)[: -len(suffix)] in listed:
                        found[(source, str(path)[: -len(suffix)])] = None
        return list(found)

    def _ingest_loop(self) -> None:
        """The ingest thread: a pass per debounced batch until the daemon stops."""
        from skillopt_sleep.sources.ingest import ProjectFilter

        projects = ProjectFilter.of(self.settings)

        assert self.debouncer is not None
        store_ctx = None
        try:
            store_ctx = self.store()
            store = store_ctx.store
            while not self.stopping.is_set():
                batch = self.debouncer.take(self.stopping)
                if batch is None:
                    break
                t0 = time.monotonic()
                info = self._ingest_batch(store, batch, projects)
                self._record_pass(batch, info, t0)
        except Exception as exc:  # pragma: no cover - keep a record; the heartbeat stays up
            log.exception("the ingest thread died")
            self.note_error(f"ingest thread: {exc}")
        finally:
            if store_ctx is not None:
                store_ctx.store.close()

    def _ingest_batch(self, store: Any, batch: Batch, projects: Any) -> dict[str, Any]:
        """One pass under the ingest lock (every source, or the batch's files and on a rescan
        the changed ones), then the adopted documents' reach; a failure is recorded in it."""
        from skillopt_sleep.delivery.wild import record_reach

        info: dict[str, Any] = {
            "at": utc(),
            "files": 0,
            "sessions_new": 0,
            "sessions_updated": 0,
            "messages": 0,
            "full": batch.full,
        }
        try:
            with _ingest_lock():
                if batch.full:
                    self._full_pass(store, info)
                else:
                    self._files_pass(store, batch, projects, info)
                if info["sessions_new"] or info["sessions_updated"]:
                    # an adopted document's reach, judged as the sessions arrive
                    record_reach(store, similarity=self.settings.similarity)
        except Exception as exc:
            log.exception("ingest failed")
            self.note_error(f"ingest: {exc}")
            info["error"] = str(exc)
        return info

    def _full_pass(self, store: Any, info: dict[str, Any]) -> None:
        from skillopt_sleep.sources.ingest import harvest

        for name in self.sources:  # one source at a time: stop can cut in
            if self.stopping.is_set():
                break
            report = harvest(store, self.settings, sources=[name])
            for key in ("sessions_new", "sessions_updated", "messages"):
                info[key] += report.total(key)
            info["files"] += report.total("files_read")
        if info["files"]:
            self._activity()

    def _files_pass(self, store: Any, batch: Batch, projects: Any, info: dict[str, Any]) -> None:
        from skillopt_sleep.sources.ingest import harvest_file

        todo = self._session_files(batch)
        if batch.rescan:
            todo += [t for t in self._changed_files(store) if t not in todo]
            info["rescan"] = True
        for source, path in todo:
            if self.stopping.is_set():
                break
            fr = harvest_file(store, self.sources[source], path, projects)
            if fr.status == "read":
                info["files"] += 1
                self._activity(path)
            elif fr.status == "skipped" and fr.reason not in ("vanished",):
                log.warning("skipped %s: %s", path, fr.reason)
            info["sessions_new"] += len(fr.sessions_new)
            info["sessions_updated"] += len(fr.sessions_updated)
            info["messages"] += fr.messages

    def _record_pass(self, batch: Batch, info: dict[str, Any], t0: float) -> None:
        """The pass kept for ``status`` (when it read or was asked for), logged, and its
        token marked done for ``ingest_now``."""
        info["seconds"] = round(time.monotonic() - t0, 4)
        if info["files"] or batch.full or batch.rescan or info.get("error"):
            self.last_ingest = info
        if info["files"]:
            log.info(
                "ingested %d file(s): %d new / %d updated session(s), %d message(s)%s",
                info["files"],
                info["sessions_new"],
                info["sessions_updated"],
                info["messages"],
                " (full pass)" if batch.full else "",
            )
        with self._seq_cond:
            self._ingest_done_seq = max(self._ingest_done_seq, batch.token)
            self._seq_cond.notify_all()

    def _changed_files(self, store: Any) -> list[tuple[str, str]]:
        """Session files whose size, mtime or inode differ from what the store has (or that
        it has never seen, or skipped, or left something pending in): the periodic rescan,
        without reading unchanged files."""
        out: list[tuple[str, str]] = []
        for name, src in self.sources.items():
            known = store.files.stamps(name)
            for source, root in self.roots:
                if source != name or not root.is_dir():
                    continue
                try:
                    found = [os.path.abspath(p) for p in src.discover(root)]
                except OSError as exc:
                    log.warning("rescan of %s failed: %s", root, exc)
                    continue
                for key in found:
                    try:
                        st = os.stat(key)
                    except OSError:
                        continue
                    row = known.get(key)
                    if (
                        row
                        and row.status == "ok"
                        and not row.pending
                        and row.size == st.st_size
                        and row.mtime == st.st_mtime
                        and row.inode == st.st_ino
                    ):
                        continue
                    out.append((name, key))
        return out

    def _activity(self, path: str | None = None) -> None:
        ts = time.time()
        if path:
            try:
                ts = os.stat(path).st_mtime
            except OSError:
                pass
        if self.last_activity_ts is None or ts > self.last_activity_ts:
            self.last_activity_ts = ts

    def _last_activity(self) -> dt.datetime | None:
        ts = self.last_activity_ts
        try:
            with self.store() as store:
                latest = store.files.latest_mtime()
            if latest:
                ts = max(ts or 0, latest)
        except Exception:
            pass
        if ts is None:
            return None
        return dt.datetime.fromtimestamp(ts, dt.UTC).astimezone(self.clock().tzinfo)

    def ingest_now(self, timeout: float = 600) -> dict[str, Any]:
        assert self.debouncer is not None
        with self._seq_cond:
            self._ingest_req_seq += 1
            seq = self._ingest_req_seq
        self.debouncer.request_full(immediate=True, token=seq)
        deadline = time.monotonic() + timeout
        with self._seq_cond:
            while self._ingest_done_seq < seq:
                left = deadline - time.monotonic()
                if left <= 0 or self.stopping.is_set():
                    return {"ok": False, "error": "the ingest did not finish in time"}
                self._seq_cond.wait(min(left, 1.0))
        return {"ok": True, "ingest": self.last_ingest}


class _IngestLock:
    """Serialises the daemon's ingest passes with the night worker's pre-harvest."""

    def __init__(self) -> None:
        from filelock import FileLock

        self.lock = FileLock(str(paths.state_dir() / "ingest.lock"))

    def __enter__(self) -> None:
        self.lock.acquire(timeout=600)

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()


def _ingest_lock() -> _IngestLock:
    return _IngestLock()
