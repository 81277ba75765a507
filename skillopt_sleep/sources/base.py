"""The harvester interface. One module per agent implements :class:`Source`.

A source never writes to the agent's files. The ingester (:mod:`skillopt_sleep.sources.ingest`)
owns file reading, offsets and accounting; a source only lists files and turns complete lines
into sessions, keeping whatever it needs between passes in a JSON-able ``state`` dict.
Discovery (:mod:`skillopt_sleep.sources.discovery`) uses the same methods, in memory.
Everything the ingester and discovery call is declared here; helpers shared by several
sources live in :mod:`skillopt_sleep.sources.common` (a source never imports another).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from skillopt_sleep.models import HarvestedSession

#: Put at the start of every prompt this tool sends to an agent (replays); a session whose first
#: user prompt contains it is stored with ``self_generated=True`` and never mined.
SELF_MARKER = "[skillopt-sleep replay]"

#: How the ingester reads a file (see :attr:`Source.mode`).
ReadMode = Literal["jsonl", "whole_file", "snapshot"]


@dataclass
class ParseResult:
    """What parsing some lines of one file (or one snapshot) produced.

    ``sessions`` hold only the messages found in *these* lines (the store merges them).
    ``skipped`` counts lines / records dropped by reason (``bad_json``, ``unknown_type:<t>``,
    …). ``state`` is the updated per-file state to persist for the next pass (JSON-able).
    ``pending`` says something was left for a later pass (e.g. an answer still being
    written): a snapshot source is then read again on the next pass even if unchanged.
    ``bytes_read`` is what a snapshot read cost (bytes; line sources leave it 0: the ingester
    counts the bytes it read itself).
    """

    sessions: list[HarvestedSession] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    state: dict = field(default_factory=dict)
    pending: bool = False
    bytes_read: int = 0


class Source(ABC):
    """One agent's session logs.

    A subclass sets :attr:`name`, :attr:`mode` (when not ``"jsonl"``) and
    :attr:`format_version`, and implements :meth:`default_roots`, :meth:`discover` and
    :meth:`parse`; a ``snapshot`` source also implements :meth:`signature` and
    :meth:`read_snapshot`. None of these methods may write to the agent's files.
    """

    #: registry name, e.g. ``"claude_code"`` (the key of :data:`skillopt_sleep.sources.REGISTRY`)
    name: str = ""

    #: how the ingester reads this source's files (:meth:`read_mode` may decide per file):
    #:
    #: * ``"jsonl"`` — append-only JSONL read by byte offset; :meth:`parse` gets the complete
    #:   lines appended since the last pass;
    #: * ``"whole_file"`` — one JSON document, re-read whole when its size, mtime and sha256
    #:   change; :meth:`parse` gets all its bytes as a single "line";
    #: * ``"snapshot"`` — something the source reads itself (a SQLite database opened
    #:   read-only, a tree of JSON files): re-read when :meth:`signature` changes, through
    #:   :meth:`read_snapshot`.
    mode: ReadMode = "jsonl"

    #: the agent version(s) whose log format this parser was written and tested against
    #: (corpus ``SOURCES.md``); a newer format shows up as ``unknown_type:…`` skips.
    format_version: str = ""

    @abstractmethod
    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        """The agent's default log roots for this OS (honouring e.g. ``CLAUDE_CONFIG_DIR``).

        ``env`` is the environment to read overrides from, ``home`` the user's home folder.
        The roots need not exist. Never raises."""

    @abstractmethod
    def discover(self, root: Path) -> Iterator[Path]:
        """Yield every session file (or snapshot unit) under ``root``, in a stable order.

        ``root`` may not exist: yield nothing. An unreadable ``root`` may raise ``OSError``
        (counted as ``root_unreadable``); unreadable entries below it are skipped."""

    def discover_paths(self, root: Path) -> Iterator[str]:
        """:meth:`discover` as absolute paths (strings: the ingester's keys), in its order. A
        source may list them without a ``Path`` per file (:func:`walk_paths`)."""
        for p in self.discover(root):
            yield os.path.abspath(p)

    @abstractmethod
    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        """Parse complete lines (bytes, without their ``\\n``) appended to ``path``.

        ``state`` is what the previous pass returned (``{}`` on a first or full re-read).
        In ``whole_file`` mode ``lines`` is one item: the whole file.
        Must never raise on bad input: count it in ``ParseResult.skipped``.
        """

    def read_mode(self, path: Path) -> ReadMode:
        """How to read ``path``: :attr:`mode` unless a source mixes formats (one per file)."""
        return self.mode

    def signature(self, path: Path) -> str:
        """``snapshot`` mode: a string that changes whenever the unit at ``path`` may have
        changed (e.g. a hash of its files' names, sizes and mtimes). Must not raise on a
        missing file (hash it as missing)."""
        raise NotImplementedError(f"{self.name}: a snapshot source must define signature()")

    def read_snapshot(self, path: Path, state: dict) -> ParseResult:
        """``snapshot`` mode: read the unit at ``path`` (opened read-only) and return the
        sessions new since ``state`` (``{}`` on a first read) with the updated state and
        ``bytes_read``. Bad records are counted in ``skipped``; an unreadable unit may raise
        (``OSError``, ``sqlite3.Error``: the ingester skips the file with that reason)."""
        raise NotImplementedError(f"{self.name}: a snapshot source must define read_snapshot()")

    def count_sessions(self, path: Path) -> int:
        """Sessions held by one discovered file, for discovery's count (a file is one session
        unless it is e.g. a database). Never raises: an unreadable file counts 0."""
        return 1


def walk_files(
    root: Path, names: Callable[[list[str], list[str]], Iterable[str]]
) -> Iterator[Path]:
    """Each file ``names(dirnames, filenames)`` picks in each folder of ``os.walk(root)`` (which
    it may prune and order through ``dirnames``), as a Path."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in names(dirnames, filenames):
            yield Path(os.path.join(dirpath, name))


def ending(suffix: str) -> Callable[[list[str], list[str]], list[str]]:
    """A ``names`` for :func:`walk_files`: every folder in name order, the files whose name
    ends with ``suffix``, sorted."""

    def names(dirnames: list[str], filenames: list[str]) -> list[str]:
        dirnames.sort()
        return [name for name in sorted(filenames) if name.endswith(suffix)]

    return names


def walk_paths(root: Path, names: Callable[[list[str], list[str]], Iterable[str]]) -> Iterator[str]:
    """The absolute path of every name ``names(dirnames, filenames)`` picks in each folder of
    ``os.walk(root)`` (which it may prune and order through ``dirnames``), as strings: what
    ``os.path.abspath`` of each ``Path`` would give, without making one per file."""
    top = str(root)
    plain = os.path.isabs(top) and os.path.normpath(top) == top  # joins need no normalizing
    for dirpath, dirnames, filenames in os.walk(top):
        for name in names(dirnames, filenames):
            p = os.path.join(dirpath, name)
            yield p if plain else os.path.abspath(p)
