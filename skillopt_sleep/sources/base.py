"""The harvester interface. One module per agent implements :class:`Source`.

A source never writes to the agent's files. The ingester (:mod:`skillopt_sleep.sources.ingest`)
owns file reading, offsets and accounting; a source only lists files and turns complete lines
into sessions, keeping whatever it needs between passes in a JSON-able ``state`` dict.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from skillopt_sleep.models import HarvestedSession

#: Put at the start of every prompt this tool sends to an agent (replays); a session whose first
#: user prompt contains it is stored with ``self_generated=True`` and never mined.
SELF_MARKER = "[skillopt-sleep replay]"


@dataclass
class ParseResult:
    """What parsing some lines of one file produced.

    ``sessions`` hold only the messages found in *these* lines (the store merges them).
    ``skipped`` counts lines dropped by reason (``bad_json``, ``unknown_type``, …).
    ``state`` is the updated per-file state to persist for the next pass.
    ``pending`` says something was left for a later pass (e.g. an answer still being
    written): a snapshot source is then read again on the next pass even if unchanged.
    """

    sessions: list[HarvestedSession] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    state: dict = field(default_factory=dict)
    pending: bool = False


class Source(ABC):
    """One agent's session logs."""

    #: registry name, e.g. ``"claude_code"``
    name: str = ""

    @abstractmethod
    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        """The agent's default log roots for this OS (honouring e.g. ``CLAUDE_CONFIG_DIR``)."""

    @abstractmethod
    def discover(self, root: Path) -> Iterator[Path]:
        """Yield every session file under ``root`` (may not exist: yield nothing)."""

    @abstractmethod
    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        """Parse complete lines (without their newline) appended to ``path``.

        ``state`` is what the previous pass returned (``{}`` on a first or full re-read).
        Must never raise on bad input: count it in ``ParseResult.skipped``.
        """
