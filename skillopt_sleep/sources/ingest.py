"""Incremental ingestion of agent session logs into the store.

:func:`harvest` walks every enabled source's roots and calls :func:`harvest_file` per file.
Per file the ``source_files`` table keeps the inode, size (bytes), mtime (epoch seconds), the
byte ``offset`` consumed (always just after a ``\\n``), the sha256 ``head_hash`` of the first
``min(4096, size)`` bytes and the parser ``state`` (JSON). On a later pass:

* unchanged size, mtime and inode → nothing is read (:func:`harvest` compares each file's
  ``stat`` with one query of the source's rows, and does not open the file);
* a grown file → only the bytes after ``offset`` are read (seek); an unterminated last line is
  not consumed, so it is parsed on the pass after it is completed;
* a replaced (other inode / head hash) or truncated (size < offset) file → re-read from 0 with
  an empty state (uid dedupe in the store makes this idempotent);
* ``*.zst`` → decompressed as a stream and re-read whole whenever size or mtime changes.

Bad input never raises: unreadable files, vanished files and directories, binary files (NUL in
the first 4 KiB and no JSON start: :func:`.lines.looks_binary`; NUL runs inside a text file
end a line), lines over :data:`.lines.MAX_LINE` bytes (read in :data:`.lines.CHUNK` pieces, so memory stays
bounded), malformed JSON and non-UTF-8 bytes (decoded with U+FFFD) are counted by reason.
Each file's pass runs in one ``store.write()`` transaction (in :func:`harvest`, a savepoint of
the batch's transaction: files are committed in batches), so offsets never get ahead of the
messages they stand for, and a harvest killed mid-way loses only its uncommitted batch, which
the next pass reads again. Lookback is not applied here (the miner filters by date).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import sqlite3
import stat as _stat
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, Field

from skillopt_sleep.config import Settings, SourceConfig
from skillopt_sleep.results import OnProgress, ProgressEvent
from skillopt_sleep.sources import get_source
from skillopt_sleep.sources.base import ParseResult, Source
from skillopt_sleep.sources.lines import HEAD, LineReader, SkipFile, batches, looks_binary
from skillopt_sleep.store import Store, now_iso
from skillopt_sleep.store.files import FileRow, FileStamp


@dataclass
class FileResult:
    """What one pass over one file did. ``status``: ``read`` | ``unchanged`` | ``skipped``.

    ``reason`` is the skip reason, or ``replaced``/``truncated`` when a file was re-read from 0.
    ``bytes_read`` counts bytes of JSONL read (decompressed bytes for ``.zst``).
    """

    path: str
    source: str
    status: str = "unchanged"
    reason: str = ""
    bytes_read: int = 0
    offset: int = 0
    lines_ok: int = 0
    messages: int = 0
    lines_skipped: Counter = field(default_factory=Counter)
    warnings: Counter = field(default_factory=Counter)
    sessions_new: set[str] = field(default_factory=set)
    sessions_updated: set[str] = field(default_factory=set)
    sessions_filtered: Counter = field(default_factory=Counter)
    excluded: set[str] = field(default_factory=set)


class SourceReport(BaseModel):
    """Accounting of one source in one harvest run (also stored in ``harvest_runs``)."""

    source: str
    roots: list[str] = Field(default_factory=list)
    started_at: str = ""
    finished_at: str = ""
    files_seen: int = 0
    files_read: int = 0
    files_unchanged: int = 0
    bytes_read: int = 0
    messages: int = 0
    sessions_new: int = 0
    sessions_updated: int = 0
    sessions_filtered: dict[str, int] = Field(default_factory=dict)
    lines_skipped: dict[str, int] = Field(default_factory=dict)
    files_skipped: dict[str, int] = Field(default_factory=dict)
    warnings: dict[str, int] = Field(default_factory=dict)


class HarvestReport(BaseModel):
    """A whole harvest run: one :class:`SourceReport` per source harvested."""

    started_at: str = ""
    finished_at: str = ""
    sources: dict[str, SourceReport] = Field(default_factory=dict)

    def total(self, name: str) -> int:
        """Sum of an integer field (e.g. ``"sessions_new"``) over all sources."""
        return sum(int(getattr(r, name)) for r in self.sources.values())


def _bump(target: dict[str, int], counts: Counter | dict[str, int]) -> None:
    for key, n in counts.items():
        target[key] = target.get(key, 0) + n


#: a file that keeps the folder it is in (and every folder below) out of the store
IGNORE_FILE = ".skillopt-sleep-ignore"


class ProjectFilter:
    """Which projects are never harvested (``[privacy]`` ``allow_projects`` /
    ``deny_projects`` globs, and folders under a :data:`IGNORE_FILE`). A glob matches the
    project path or any folder above it (``~/secret`` keeps ``~/secret/app`` out too)."""

    def __init__(self, allow: list[str] | tuple = (), deny: list[str] | tuple = ()):
        self.allow = [os.path.expanduser(g).rstrip("/\\") or "/" for g in allow]
        self.deny = [os.path.expanduser(g).rstrip("/\\") or "/" for g in deny]
        self._ignored: dict[str, bool] = {}

    @classmethod
    def of(cls, settings: Settings) -> ProjectFilter:
        return cls(settings.privacy.allow_projects, settings.privacy.deny_projects)

    @staticmethod
    def _folders(project: str) -> list[str]:
        """``project`` and every folder above it."""
        out, here = [], project.rstrip("/\\") or project
        while here and here not in out:
            out.append(here)
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
        return out

    def _match(self, globs: list[str], folders: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(f, g) for g in globs for f in folders)

    def _has_ignore_file(self, folders: list[str]) -> bool:
        for f in folders:
            if f not in self._ignored:
                self._ignored[f] = os.path.isfile(os.path.join(f, IGNORE_FILE))
            if self._ignored[f]:
                return True
        return False

    def reason(self, project: str | None) -> str | None:
        """Why a session of ``project`` is kept out (``denied_project``, ``ignored_project``,
        ``not_allowed_project``), or ``None`` when it may be stored."""
        folders = self._folders(project) if project else []
        if folders and self._match(self.deny, folders):
            return "denied_project"
        if folders and self._has_ignore_file(folders):
            return "ignored_project"
        if self.allow and not (folders and self._match(self.allow, folders)):
            return "not_allowed_project"
        return None


def _save_sessions(
    store: Store,
    sessions: list,
    key: str,
    res: FileResult,
    known: set[str],
    empty: set[str],
    projects: ProjectFilter | None = None,
) -> None:
    """Store parsed sessions, counting new / updated / self-generated into ``res``. A session
    with no message and no stored row yet goes to ``empty`` (counted by the caller once the
    whole file is read, since a later batch may still bring its messages). A session of a
    project ``projects`` keeps out is never stored (counted by reason, once; what an earlier
    pass stored before its project was known is forgotten)."""
    for sess in sessions:
        sid = f"{sess.source}:{sess.key}"
        why = None
        if projects is not None:
            project = sess.project
            if not project:  # the project may be known from an earlier pass only
                stored = store.sessions.get(sid)
                project = stored.project if stored else None
            why = projects.reason(project)
        if why is not None:
            if sid not in res.excluded:
                res.excluded.add(sid)
                res.sessions_filtered[why] += 1
                if store.sessions.get(sid) is not None:
                    store.forget.delete([sid], [])
            continue
        if not sess.messages and sid not in known and store.sessions.get(sid) is None:
            empty.add(sid)
            continue
        is_new, changed = store.sessions.save(sess, key)
        known.add(sid)
        res.messages += changed
        if is_new:
            res.sessions_new.add(sid)
            if sess.self_generated:
                res.sessions_filtered["self_generated"] += 1
        elif changed and sid not in res.sessions_new:
            res.sessions_updated.add(sid)


def _head_hash(head: bytes) -> str:
    return hashlib.sha256(head).hexdigest()


def _os_reason(exc: OSError, path: str) -> str:
    if isinstance(exc, FileNotFoundError):
        return "dangling_symlink" if os.path.islink(path) else "vanished"
    if isinstance(exc, PermissionError):
        return "unreadable"
    if isinstance(exc, IsADirectoryError):
        return "not_a_file"
    return "io_error"


def harvest_file(
    store: Store, source: Source | str, path: Path | str, projects: ProjectFilter | None = None
) -> FileResult:
    """Ingest what is new in one session file of ``source`` (a :class:`Source` or its name);
    sessions of a project ``projects`` keeps out are never stored.

    Never raises on bad input: the outcome and every skipped line / file is in the result.
    """
    src = get_source(source) if isinstance(source, str) else source
    key = os.path.abspath(path)
    res = FileResult(path=key, source=src.name)
    try:
        with store.write():
            _ingest(store, src, Path(key), res, projects)
    except SkipFile as exc:
        _mark(store, src, key, res, exc.reason)
    except OSError as exc:
        _mark(store, src, key, res, _os_reason(exc, key), str(exc))
    except sqlite3.IntegrityError as exc:  # another process ingested the same lines meanwhile
        _mark(store, src, key, res, "conflict", str(exc))
    except Exception as exc:  # a parser bug or corrupt compressed data: keep harvesting others
        _mark(store, src, key, res, f"error:{type(exc).__name__}", str(exc))
    return res


def _mark(
    store: Store, src: Source, key: str, res: FileResult, reason: str, detail: str = ""
) -> None:
    res.status, res.reason = "skipped", reason
    res.bytes_read = res.lines_ok = res.messages = 0
    res.sessions_new, res.sessions_updated = set(), set()
    res.sessions_filtered, res.lines_skipped = Counter(), Counter()
    old = store.files.get(key)
    row = {
        "path": key,
        "source": src.name,
        "offset": (old.offset if old else None) or 0,
        "state": (old.state if old else None) or "{}",
        "status": "skipped",
        "last_error": detail or reason,
    }
    try:
        with store.write():
            store.files.put(row)
    except sqlite3.Error:
        pass


def _open_regular(key: str) -> IO[bytes]:
    """Open a session file for reading, never blocking: non-blocking open (a FIFO swapped in
    after the ``stat`` cannot hang), then the open file must be a regular file."""
    fd = os.open(key, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not _stat.S_ISREG(os.fstat(fd).st_mode):
            raise SkipFile("not_a_file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _parse_batch(src: Source, path: Path, batch: list[bytes], state: dict) -> Iterator[ParseResult]:
    """``src.parse`` of one batch; when the parser fails on it, the batch again line by line,
    so one bad record skips that record (counted as ``bad_record:<error>``), not the file."""
    saved = json.dumps(state)
    try:
        yield src.parse(path, batch, state)
        return
    except Exception:  # a parser bug on some record: find it
        pass
    state = json.loads(saved)
    for line in batch:
        before = json.dumps(state)
        try:
            parsed = src.parse(path, [line], state)
        except Exception as exc:
            state = json.loads(before)
            yield ParseResult(skipped=Counter({f"bad_record:{type(exc).__name__}": 1}), state=state)
            continue
        state = parsed.state
        yield parsed


def _ingest(
    store: Store, src: Source, path: Path, res: FileResult, projects: ProjectFilter | None
) -> None:
    key = str(path)
    st = os.stat(key)
    if not _stat.S_ISREG(st.st_mode):
        raise SkipFile("not_a_file")
    row = store.files.get(key)
    usable = row if row is not None and row.status == "ok" else None
    if src.read_mode(path) != "jsonl":
        _ingest_whole(store, src, path, res, st, usable, projects)
        return
    zst = key.endswith(".zst")
    if zst and usable and usable.size == st.st_size and usable.mtime == st.st_mtime:
        res.offset = usable.offset or 0
        return
    with _open_regular(key) as fh:
        head = fh.read(HEAD)
        offset = 0
        state: dict = {}
        if zst:
            import zstandard

            fh.seek(0)
            stream: IO[bytes] = zstandard.ZstdDecompressor().stream_reader(fh)
            reader = LineReader(stream, 0, final=True, check_binary=True)
        else:
            if looks_binary(head):
                raise SkipFile("binary")
            resumed = _resume_point(usable, st, head, res)
            if resumed is None:  # unchanged since the last pass
                return
            offset, state = resumed
            fh.seek(offset)
            reader = LineReader(fh, offset)
        res.status = "read"
        state, cut = _read_lines(store, src, path, reader, state, res, projects, timed=not zst)
        res.offset = st.st_size if zst else reader.offset
        size = st.st_size if zst else max(st.st_size, reader.pos)
        if cut:  # recorded as read up to the offset only: the next pass goes on from there
            size = reader.offset
        # counts carried over from earlier passes (none after a re-read from 0)
        kept = usable if usable and not res.reason else None
        store.files.put(
            {
                "path": key,
                "source": src.name,
                "inode": st.st_ino,
                "size": size,
                "mtime": st.st_mtime,
                "offset": res.offset,
                "state": json.dumps(state),
                "head_hash": _head_hash(head[: min(HEAD, size)]),
                "lines_ok": res.lines_ok + ((kept.lines_ok if kept else None) or 0),
                "lines_skipped": sum(res.lines_skipped.values())
                + ((kept.lines_skipped if kept else None) or 0),
                "status": "ok",
                "last_error": "",
            }
        )


def _resume_point(
    usable: FileRow | None, st: os.stat_result, head: bytes, res: FileResult
) -> tuple[int, dict] | None:
    """Where a plain JSONL file is read from, and the parser state there: the end of the
    last pass when the file only grew, else 0 (``res.reason`` says why); None when it is
    unchanged (``res.offset`` is then the old offset)."""
    if not usable:
        return 0, {}
    prev = min(HEAD, usable.size or 0)
    if usable.inode != st.st_ino:
        res.reason = "replaced"
    elif st.st_size < (usable.offset or 0):
        res.reason = "truncated"
    elif _head_hash(head[:prev]) != usable.head_hash:
        res.reason = "replaced"
    elif st.st_size == usable.size and st.st_mtime == usable.mtime:
        res.offset = usable.offset or 0
        return None
    else:
        try:
            return usable.offset or 0, json.loads(usable.state or "{}")
        except ValueError:
            res.reason = "bad_state"
    return 0, {}


def _read_lines(
    store: Store,
    src: Source,
    path: Path,
    reader: LineReader,
    state: dict,
    res: FileResult,
    projects: ProjectFilter | None,
    *,
    timed: bool,
) -> tuple[dict, bool]:
    """Parse and save the lines of ``reader`` in batches, counting into ``res``; stop after
    :data:`MAX_FILE_SECONDS` when ``timed``. Returns the parser state and whether the read
    was cut short."""
    known: set[str] = set()
    empty: set[str] = set()
    n_lines = n_skipped = 0
    deadline = time.monotonic() + MAX_FILE_SECONDS
    cut = False
    for batch in batches(iter(reader)):
        for parsed in _parse_batch(src, path, batch, state):
            state = parsed.state
            n_skipped += sum(parsed.skipped.values())
            res.lines_skipped.update(parsed.skipped)
            _save_sessions(store, parsed.sessions, str(path), res, known, empty, projects)
        n_lines += len(batch)
        if timed and time.monotonic() > deadline:  # the rest waits for the next pass
            cut = True
            res.warnings["time_bound"] += 1
            break
    res.lines_skipped.update(reader.skipped)
    res.warnings.update(reader.warnings)
    res.lines_ok = n_lines - n_skipped
    if empty - known:
        res.sessions_filtered["no_messages"] += len(empty - known)
    res.bytes_read = reader.bytes_read
    return state, cut


#: seconds one pass spends on one JSONL file; the rest is read on the next pass (``time_bound``)
MAX_FILE_SECONDS = 30.0

#: largest whole-JSON file read in ``whole_file`` mode (bytes); larger ones are skipped
MAX_WHOLE = 64 * 1024 * 1024


def _ingest_whole(
    store: Store,
    src: Source,
    path: Path,
    res: FileResult,
    st: os.stat_result,
    row: FileRow | None,
    projects: ProjectFilter | None,
) -> None:
    """``whole_file`` / ``snapshot`` files (see :attr:`.base.Source.mode`); ``row`` is the usable
    row."""
    key = str(path)
    mode = src.read_mode(path)
    state: dict = {}
    if row is not None:
        try:
            state = json.loads(row.state or "{}")
        except ValueError:
            state, res.reason = {}, "bad_state"
    if mode == "whole_file":
        if row is not None and row.size == st.st_size and row.mtime == st.st_mtime:
            res.offset = row.offset or 0
            return
        if st.st_size > MAX_WHOLE:
            raise SkipFile("too_large")
        with _open_regular(key) as fh:
            data = fh.read(MAX_WHOLE + 1)
        if len(data) > MAX_WHOLE:
            raise SkipFile("too_large")
        if b"\x00" in data[:HEAD]:
            raise SkipFile("binary")
        digest = _head_hash(data)
        unchanged = row is not None and row.head_hash == digest
        n_bytes = len(data)
    else:
        digest = src.signature(path)
        unchanged = row is not None and row.head_hash == digest
        data, n_bytes = b"", 0
    if not unchanged:
        res.status = "read"
        if mode == "whole_file":
            parsed = src.parse(path, [data], state)
        else:
            parsed = src.read_snapshot(path, state)
            n_bytes = parsed.bytes_read
        state = parsed.state
        if parsed.pending:  # something left for later: never "unchanged" next pass
            digest = f"pending:{digest}"
        res.lines_skipped.update(parsed.skipped)
        known: set[str] = set()
        empty: set[str] = set()
        _save_sessions(store, parsed.sessions, key, res, known, empty, projects)
        if empty - known:
            res.sessions_filtered["no_messages"] += len(empty - known)
        res.bytes_read = n_bytes
        res.lines_ok = len(known)
    res.offset = st.st_size
    store.files.put(
        {
            "path": key,
            "source": src.name,
            "inode": st.st_ino,
            "size": st.st_size,
            "mtime": st.st_mtime,
            "offset": st.st_size,
            "state": json.dumps(state),
            "head_hash": digest,
            "lines_ok": res.lines_ok or (row.lines_ok if row else None) or 0,
            "lines_skipped": sum(res.lines_skipped.values())
            or (row.lines_skipped if row else None)
            or 0,
            "status": "ok",
            "last_error": "",
        }
    )


def _paths(src: Source, roots: list[Path], report: SourceReport) -> list[str]:
    seen: dict[str, None] = {}
    for root in roots:
        try:
            for p in src.discover_paths(Path(root).expanduser()):
                seen.setdefault(p, None)
        except OSError:
            report.files_skipped["root_unreadable"] = (
                report.files_skipped.get("root_unreadable", 0) + 1
            )
    return list(seen)


def harvest(
    store: Store,
    settings: Settings,
    *,
    sources: list[str] | None = None,
    on_progress: OnProgress | None = None,
) -> HarvestReport:
    """Harvest every enabled source of ``settings`` (or only the ``sources`` named: those are
    harvested even when disabled in the config). Empty ``roots`` mean the source's defaults for
    this OS and environment. Each source's accounting is also written to ``harvest_runs``.
    ``on_progress`` gets a ``harvest`` event per file (files done of the source's total,
    bytes read so far).
    """
    names = (
        list(sources)
        if sources is not None
        else [n for n, c in settings.sources.items() if c.enabled]
    )
    report = HarvestReport(started_at=now_iso())
    projects = ProjectFilter.of(settings)
    for name in names:
        report.sources[name] = _harvest_source(store, settings, name, projects, on_progress)
    report.finished_at = now_iso()
    return report


#: the columns of a source's report that ``harvest_runs`` keeps
_RUN_FIELDS = {
    "started_at",
    "finished_at",
    "source",
    "files_seen",
    "files_read",
    "bytes_read",
    "sessions_new",
    "sessions_updated",
    "sessions_filtered",
    "lines_skipped",
    "files_skipped",
}


def _harvest_source(
    store: Store,
    settings: Settings,
    name: str,
    projects: ProjectFilter,
    on_progress: OnProgress | None,
) -> SourceReport:
    """Harvest one source's files; its report, also recorded in ``harvest_runs``."""
    src = get_source(name)
    cfg = settings.sources.get(name) or SourceConfig()
    roots = list(cfg.roots) or src.default_roots(os.environ, Path.home())
    sr = SourceReport(source=name, roots=[str(r) for r in roots], started_at=now_iso())
    paths = _paths(src, roots, sr)
    sr.files_seen = len(paths)
    new: set[str] = set()
    updated: set[str] = set()
    # counted here and set on the report once (a pydantic attribute set costs more than
    # the stat of an unchanged file)
    files_read = files_unchanged = bytes_read = messages = 0
    for done, fr in enumerate(_run(store, src, paths, projects), 1):
        if fr is None:
            files_unchanged += 1
        else:
            if fr.status == "skipped":
                sr.files_skipped[fr.reason] = sr.files_skipped.get(fr.reason, 0) + 1
            elif fr.status == "read":
                files_read += 1
            else:
                files_unchanged += 1
            bytes_read += fr.bytes_read
            messages += fr.messages
            new |= fr.sessions_new
            updated |= fr.sessions_updated
            _bump(sr.sessions_filtered, fr.sessions_filtered)
            _bump(sr.lines_skipped, fr.lines_skipped)
            _bump(sr.warnings, fr.warnings)
        if on_progress is not None:
            on_progress(
                ProgressEvent(
                    step="harvest",
                    source=name,
                    done=done,
                    total=len(paths),
                    unit="files",
                    bytes=bytes_read,
                )
            )
    sr.files_read, sr.files_unchanged = files_read, files_unchanged
    sr.bytes_read, sr.messages = bytes_read, messages
    sr.sessions_new, sr.sessions_updated = len(new), len(updated - new)
    sr.finished_at = now_iso()
    store.check_table("harvest_runs")  # the whole file was checked if a file was read
    store.harvests.record(sr.model_dump(include=_RUN_FIELDS))
    return sr


#: a harvest commits after this many files read, bytes read or seconds, whichever comes first
#: (one transaction per batch of files: one commit, one FTS segment flush)
BATCH_FILES = 200
BATCH_BYTES = 32 * 1024 * 1024
BATCH_SECONDS = 2.0


def _unchanged(path: str, stamp: FileStamp | None) -> bool:
    """Whether ``path`` is what the store read last time, by its ``stat`` alone (size, mtime
    and inode as stored, read without error and nothing pending): then it is not opened."""
    if stamp is None or stamp.status != "ok" or stamp.pending:
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (
        stamp.size == st.st_size
        and stamp.mtime == st.st_mtime
        and stamp.inode == st.st_ino
        and _stat.S_ISREG(st.st_mode)
    )


def _run(
    store: Store, src: Source, paths: list[str], projects: ProjectFilter
) -> Iterator[FileResult | None]:
    """:func:`harvest_file` of every path that changed, the files read grouped in one write
    transaction per batch (:data:`BATCH_FILES`, :data:`BATCH_BYTES`, :data:`BATCH_SECONDS`),
    each file in its own savepoint inside it. A file (not a ``snapshot`` unit) whose stat
    matches the store's row (one query for the whole source) is unchanged without being
    opened: None is yielded for it.

    Killed mid-batch, nothing of the batch is kept (the files' offsets and their messages are
    committed together), so the next pass reads those files again."""
    stamps = store.files.stamps(src.name)
    # a source that reads every file one way needs no Path per file to be asked
    one_mode = src.mode if type(src).read_mode is Source.read_mode else None
    tx: contextlib.AbstractContextManager[Any] | None = None
    n_files = n_bytes = 0
    started = 0.0
    try:
        for p in paths:
            # a snapshot unit (a database) may change in its sidecars: its signature decides
            mode = one_mode or src.read_mode(Path(p))
            if mode != "snapshot" and _unchanged(p, stamps.get(p)):
                yield None
                continue
            if tx is None:
                store.check()  # a damaged store is never written on (once per connection)
                tx = store.write()
                tx.__enter__()
                n_files = n_bytes = 0
                started = time.monotonic()
            fr = harvest_file(store, src, p, projects)
            n_files += 1
            n_bytes += fr.bytes_read
            if (
                n_files >= BATCH_FILES
                or n_bytes >= BATCH_BYTES
                or time.monotonic() - started >= BATCH_SECONDS
            ):
                done: contextlib.AbstractContextManager[Any] = tx
                tx = None  # not exited again if the commit fails
                done.__exit__(None, None, None)
            yield fr
    except BaseException as exc:
        if tx is not None:
            tx.__exit__(type(exc), exc, exc.__traceback__)
        raise
    if tx is not None:
        last: contextlib.AbstractContextManager[Any] = tx
        tx = None
        last.__exit__(None, None, None)
