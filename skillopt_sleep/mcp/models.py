"""Pydantic outputs of the MCP tools (each tool returns one of these as structured content)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class NightInfo(BaseModel):
    """One night, from the ``nights`` table (plus live progress for nights this server started)."""

    id: int
    status: str = Field(
        description="running | succeeded | no_change | no_tasks | planned | failed | interrupted"
    )
    running: bool
    started_at: str | None = None
    finished_at: str | None = None
    trigger: str | None = None
    project: str | None = None
    dry_run: bool = False
    target_path: str | None = None
    error: str | None = None
    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None
    calls: int | None = None
    cached_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    seconds: float | None = None
    proposal_id: str | None = None
    summary: dict[str, Any] = Field(default_factory=dict)
    progress: list[str] = Field(
        default_factory=list, description="Latest progress lines (nights started by this server)"
    )


class PendingProposal(BaseModel):
    id: str
    target: str
    created_at: str | None = None
    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None


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


class ProposalSummary(BaseModel):
    id: str
    status: str = Field(description="staged | adopted | rejected | rolled_back | superseded")
    night_id: int | None = None
    created_at: str | None = None
    target_path: str
    base_hash: str = Field(
        description="sha256 of the live file the proposal was made from ('' = absent); pass it to adopt_proposal"
    )
    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None
    reason: str | None = None


class ProposalList(BaseModel):
    proposals: list[ProposalSummary]


class EditInfo(BaseModel):
    op: str
    text: str = ""
    old: str = ""
    status: str = Field(description="applied | rejected | unmatched | unverified")
    reason: str = ""
    rationale: str = ""
    origin: str = ""
    epoch: int | None = None
    batch: int | None = None
    val_before: float | None = None
    val_after: float | None = None


class TaskDelta(BaseModel):
    task_id: str
    intent: str = ""
    before: float | None = None
    after: float | None = None


class ProposalDetail(ProposalSummary):
    new_hash: str | None = None
    diff: str
    edits: list[EditInfo]
    val_tasks: list[TaskDelta]
    test_tasks: list[TaskDelta]
    cost: dict[str, Any]
    summary: dict[str, Any] = Field(default_factory=dict)
    report_uri: str


class AdoptResult(BaseModel):
    proposal_id: str
    target_path: str
    adopted_at: str
    backup_path: str = Field(description="'' when the file did not exist before")
    before_hash: str
    after_hash: str


class RejectResult(BaseModel):
    proposal_id: str
    status: str
    reason: str


class RollbackResult(BaseModel):
    proposal_id: str
    target_path: str
    rolled_back_at: str
    restored_previous: bool = Field(
        description="True: the old file was restored; False: the created file was removed"
    )


class NightStarted(BaseModel):
    night_id: int
    status: str
    via: str = Field(description="'in-process' (a thread of this server) or 'daemon'")
    hint: str = "poll get_night(night_id) for progress and the result"


class TaskInfo(BaseModel):
    id: str
    project: str | None = None
    intent: str
    split: str
    sessions: int
    checks: list[dict[str, Any]]
    corrections: list[str]
    synthetic: bool


class TaskList(BaseModel):
    tasks: list[TaskInfo]
    total: int


class SearchHit(BaseModel):
    message_id: int
    session_id: str
    agent: str
    project: str | None = None
    role: str
    kind: str | None = None
    timestamp: str | None = None
    snippet: str


class SearchResult(BaseModel):
    query: str
    hits: list[SearchHit]


class SkillInfo(BaseModel):
    target: str
    exists: bool
    sha256: str = Field(description="'' when the file does not exist")
    managed_block: bool
    rules: list[str]
    text: str
