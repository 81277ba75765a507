"""What every stage of one night shares (:class:`NightContext`), what a block needs of the
planned night (:class:`PlannedNight`), and how a block of a night ends (:class:`Ended`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from skillopt_sleep.config import Settings
from skillopt_sleep.night.progress import NightProgress
from skillopt_sleep.night.replay import Cost, Scored
from skillopt_sleep.results import NightStatus, NightSummary, Scores
from skillopt_sleep.store import Store

if TYPE_CHECKING:
    from skillopt_sleep.backends.base import Backend
    from skillopt_sleep.delivery.where import Where
    from skillopt_sleep.mining.mine import MineReport

#: Called once per scored rollout (for progress bars).
OnRollout = Callable[[Scored], None]


@dataclass
class NightContext:
    """One night's shared state: the store, the settings, the night's id, its progress
    reporter, its running cost (one budget for every block and every copy of the night), the
    caller's rollout callback, and where the agents' homes are (``env`` / ``home``: the
    environment and home folder the agents' paths are resolved against; None: this
    process's)."""

    store: Store
    settings: Settings
    night_id: int
    say: NightProgress = field(default_factory=NightProgress)
    cost: Cost = field(default_factory=Cost)
    on_rollout: OnRollout | None = None
    env: Mapping[str, str] | None = None
    home: Path | None = None


@dataclass
class Ended:
    """How one block of a night ended: its status, its summary, the scores the night's row
    records and the proposal it staged (None: none)."""

    status: NightStatus
    summary: NightSummary
    scores: Scores | None = None
    proposal_id: str | None = None

    def row(self) -> dict[str, Any]:
        """The night's row values this block gives (scores, proposal id), as
        :func:`~skillopt_sleep.night.lifecycle.finish` takes them."""
        out: dict[str, Any] = self.scores.model_dump() if self.scores is not None else {}
        if self.proposal_id is not None:
            out["proposal_id"] = self.proposal_id
        return out


@dataclass
class Removals:
    """What :func:`stage_removals` did: ``staged`` (proposal ids) and, per live file and
    block, the rules the night's training leaves out (``dropped``)."""

    staged: list[str] = field(default_factory=list)
    dropped: dict[tuple[str, str | None], list[str]] = field(default_factory=dict)


class PlannedNight(Protocol):
    """What a block (:class:`~skillopt_sleep.night.block.Block`) reads of its night once
    :meth:`~skillopt_sleep.night.night.Night.plan` has run: the shared context, what mining
    found, the document as the night found it and where its agent loads it."""

    ctx: NightContext
    dry_run: bool
    report: MineReport
    target_path: Path
    live: str | None
    base_hash: str
    is_skill: bool
    where: Where | None
    shared: bool
    warning: str | None
    document_agent: str
    removals: Removals
    unread: int

    def backends(self) -> tuple[Backend, Backend]: ...

    def copy_kind(self) -> str: ...
