"""Pydantic outputs of the MCP tools (each tool returns one of these as structured content).

Most are the application service's typed results (:mod:`skillopt_sleep.results`), re-exported
under the names the tools have always used; :class:`NightInfo`, :class:`Status` and
:class:`NightStarted` add what only an MCP client sees (live progress, the start hint).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from skillopt_sleep.results import (
    AdoptResult,
    NightView,
    PendingProposal,
    ProposalDetail,
    ProposalSummary,
    RefusalLifted,
    RejectResult,
    RollbackResult,
    RuleRejected,
    SearchHit,
    SearchResult,
    SkillInfo,
    TaskInfo,
    TaskList,
    WildCheck,
)
from skillopt_sleep.results import EditRecord as EditInfo
from skillopt_sleep.results import TaskDelta as TaskDelta

__all__ = [
    "AdoptResult",
    "EditInfo",
    "NightInfo",
    "NightStarted",
    "PendingProposal",
    "ProposalDetail",
    "ProposalList",
    "ProposalSummary",
    "RefusalLifted",
    "RejectResult",
    "RollbackResult",
    "RuleRejected",
    "SearchHit",
    "SearchResult",
    "SkillInfo",
    "Status",
    "TaskDelta",
    "TaskInfo",
    "TaskList",
]


class NightInfo(NightView):
    """One night (plus live progress for nights this server started)."""

    running: bool
    progress: list[str] = Field(
        default_factory=list, description="Latest progress lines (nights started by this server)"
    )


class Status(BaseModel):
    database: str
    counts: dict[str, int]
    night_running: bool
    last_night: NightInfo | None = None
    nights: list[NightInfo] = Field(default_factory=list)
    last_error: str | None = None
    pending_proposals: list[PendingProposal] = Field(default_factory=list)
    harvest: dict[str, Any] = Field(default_factory=dict)
    daemon: dict[str, Any] = Field(
        default_factory=dict, description="The background daemon: running, pid, …"
    )
    in_the_wild: list[WildCheck] = Field(
        default_factory=list,
        description="Each adopted document in the sessions since adopt: matching sessions, "
        "how many it reached, pass rate and corrections before vs after, and a flag when it "
        "does not reach the agent",
    )
    notice: str | None = Field(
        None,
        description="Set when a staged proposal is ready that nobody has reviewed yet "
        "(get_proposal, `skillopt-sleep show` or the dashboard mark it seen): tell the user",
    )


class ProposalList(BaseModel):
    proposals: list[ProposalSummary]


class NightStarted(BaseModel):
    night_id: int
    status: str
    via: str = Field(description="'in-process' (a thread of this server) or 'daemon'")
    reason: str = Field(default="", description="Why it runs there")
    hint: str = "poll get_night(night_id) for progress and the result"
