"""Pydantic outputs of the MCP tools (each tool returns one of these as structured content)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, Field


class NightInfo(BaseModel):
    """One night, from the ``nights`` table (plus live progress for nights this server started)."""

    id: int
    status: str = Field(description="running | succeeded | no_change | no_tasks | planned | failed | interrupted")
    running: bool
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    trigger: Optional[str] = None
    project: Optional[str] = None
    dry_run: bool = False
    target_path: Optional[str] = None
    error: Optional[str] = None
    val_before: Optional[float] = None
    val_after: Optional[float] = None
    test_before: Optional[float] = None
    test_after: Optional[float] = None
    calls: Optional[int] = None
    cached_calls: Optional[int] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    seconds: Optional[float] = None
    proposal_id: Optional[str] = None
    summary: dict[str, Any] = Field(default_factory=dict)
    progress: list[str] = Field(default_factory=list, description="Latest progress lines (nights started by this server)")


class PendingProposal(BaseModel):
    id: str
    target: str
    created_at: Optional[str] = None
    val_before: Optional[float] = None
    val_after: Optional[float] = None
    test_before: Optional[float] = None
    test_after: Optional[float] = None


class Status(BaseModel):
    database: str
    counts: dict[str, int]
    night_running: bool
    last_night: Optional[NightInfo] = None
    nights: list[NightInfo] = Field(default_factory=list)
    last_error: Optional[str] = None
    pending_proposals: list[PendingProposal] = Field(default_factory=list)
    harvest: dict[str, Any] = Field(default_factory=dict)
    daemon: dict[str, Any] = Field(default_factory=dict, description="The background daemon: running, pid, …")


class ProposalSummary(BaseModel):
    id: str
    status: str = Field(description="staged | adopted | rejected | rolled_back | superseded")
    night_id: Optional[int] = None
    created_at: Optional[str] = None
    target_path: str
    base_hash: str = Field(description="sha256 of the live file the proposal was made from ('' = absent); pass it to adopt_proposal")
    val_before: Optional[float] = None
    val_after: Optional[float] = None
    test_before: Optional[float] = None
    test_after: Optional[float] = None
    reason: Optional[str] = None


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
    epoch: Optional[int] = None
    batch: Optional[int] = None
    val_before: Optional[float] = None
    val_after: Optional[float] = None


class TaskDelta(BaseModel):
    task_id: str
    intent: str = ""
    before: Optional[float] = None
    after: Optional[float] = None


class ProposalDetail(ProposalSummary):
    new_hash: Optional[str] = None
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
    restored_previous: bool = Field(description="True: the old file was restored; False: the created file was removed")


class NightStarted(BaseModel):
    night_id: int
    status: str
    via: str = Field(description="'in-process' (a thread of this server) or 'daemon'")
    hint: str = "poll get_night(night_id) for progress and the result"


class TaskInfo(BaseModel):
    id: str
    project: Optional[str] = None
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
    project: Optional[str] = None
    role: str
    kind: Optional[str] = None
    timestamp: Optional[str] = None
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
