"""Plain data shapes shared across the package (pydantic models, no I/O).

These are the contracts between harvesters, the store, the miner, backends and the night.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Role = Literal["user", "assistant"]


class HarvestedMessage(BaseModel):
    """One message of a session as a harvester yields it (already redacted).

    ``uid`` is unique per source: the record uuid (Claude Code), the API ``message.id`` for
    assistant records split over several lines (parts with the same uid are merged), or a
    file/offset-derived id (Codex). ``kind``:

    * ``prompt`` — a real user intent typed by the user;
    * ``answer`` — assistant text (may be empty when only tools were called);
    * ``tool`` — a tool result fed back to the model (text is a short excerpt).
    """

    uid: str
    role: Role
    kind: Literal["prompt", "answer", "tool"] = "prompt"
    text: str = ""
    tool_names: list[str] = Field(default_factory=list)
    timestamp: str | None = None  # ISO 8601 as written by the agent, when present
    is_sidechain: bool = False
    is_error: bool = False


class HarvestedSession(BaseModel):
    """What a harvester knows about one session after reading some lines of a file.

    ``key`` is the agent's own session id. ``project`` is the cwd read from the log itself.
    ``headless`` marks ``claude -p`` / ``codex exec`` runs; ``self_generated`` marks sessions
    this tool created (replays), which are stored but never mined.
    """

    source: str
    key: str
    project: str | None = None
    started_at: str | None = None
    model: str | None = None
    agent_version: str | None = None
    headless: bool = False
    self_generated: bool = False
    title: str | None = None
    messages: list[HarvestedMessage] = Field(default_factory=list)


class Check(BaseModel):
    """A deterministic rule check on an answer.

    kinds: ``contains`` / ``not_contains`` (case-insensitive, matched as a whole token: ``npm``
    does not match inside ``pnpm``), ``regex`` (Python
    ``re.search``, case-insensitive), ``max_chars`` / ``min_chars`` (``value`` is an int
    as a string), ``tool_called`` (a tool of that name appears in the rollout's tool calls).
    ``origin`` says where it came from (``correction``, ``feedback``, ``answer``).
    """

    kind: Literal["contains", "not_contains", "regex", "max_chars", "min_chars", "tool_called"]
    value: str
    origin: str = "correction"
    evidence: str = ""  # the user's words the check was derived from


class Occurrence(BaseModel):
    """One time the user asked a task: the prompt of session ``session_id`` at ``seq``.

    ``split`` is its role in the night's splits (:mod:`skillopt_sleep.night.split`): the
    earlier occurrences ``train``, a later one ``val``, the latest ``test`` when there are
    enough; ``""`` when it has none (the task is not scorable, or ``note`` says why it was
    withheld). ``corrected``: the user corrected the answer to this occurrence.
    """

    session_id: str
    seq: int = 0
    when: str = ""
    prompt: str = ""
    corrected: bool = False
    split: Literal["train", "val", "test", ""] = ""
    note: str = ""

    @property
    def key(self) -> str:
        """``<session id>#<seq>``: unique among a store's occurrences."""
        return f"{self.session_id}#{self.seq}"


class Task(BaseModel):
    """A recurring, replayable task mined from sessions.

    ``id`` is a stable hash of the project and the normalised representative intent, so the
    same task keeps its id across nights. ``occurrences`` are the times the user asked it,
    oldest first, each with its role in the splits. ``split`` is ``""`` (unassigned) while
    the task is not scorable — no rule check, and no rubric a judge scores — since a night
    cannot replay it; else ``train`` (every scorable task learns from its earlier
    occurrences; see :mod:`skillopt_sleep.night.split`). A task the night replays (a *view*
    of one occurrence, :func:`~skillopt_sleep.night.split.views`) has that occurrence's
    prompt as ``intent``, its role as ``split`` and ``occurrences == [it]``. ``apart``: why
    similar prompts were kept out of this task (one line each).
    """

    id: str
    project: str | None = None
    intent: str
    sessions: list[str] = Field(default_factory=list)  # session ids it recurs in
    checks: list[Check] = Field(default_factory=list)
    rubric: str = ""
    corrections: list[str] = Field(default_factory=list)
    split: Literal["train", "val", "test", ""] = "train"
    synthetic: bool = False
    tools: list[str] = Field(default_factory=list)  # tools the judges require
    occurrences: list[Occurrence] = Field(default_factory=list)
    apart: list[str] = Field(default_factory=list)


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0


class Placement(BaseModel):
    """Where a target call's candidate document goes: exactly where, and as, the live agent
    finds it once the document is adopted (see docs/agents.md for what each CLI loads).

    ``agent``: the canonical agent whose files these are; ``scope``: ``user`` (``path`` is
    relative to the agent's home folder, e.g. ``CLAUDE.md``, ``AGENTS.md``,
    ``skills/<name>/SKILL.md``) or ``project`` (relative to the working folder); ``mode``:
    ``memory`` (loaded in every turn) or ``skill`` (listed by its description, loaded when the
    agent decides); ``text``: the whole file.
    """

    agent: str
    scope: Literal["user", "project"]
    path: str
    mode: Literal["memory", "skill"]
    text: str


class CompletionRequest(BaseModel):
    """One model call.

    A target call carries the candidate document either as ``placement`` (the replay puts the
    file where the live agent will load it: an exec backend in an overlay of the agent's
    config folder or in the working folder, an HTTP backend framed as that agent frames it) or,
    for a document no agent loads by itself, as ``system`` text. ``tools`` names the tools the
    call may use (exec backends only; ignored by HTTP ones). ``purpose`` is ``target`` /
    ``reflect`` / ``judge`` / ``consolidate`` (for accounting).
    """

    system: str = ""
    prompt: str
    model: str = ""
    max_tokens: int = 1024
    tools: list[str] = Field(default_factory=list)
    purpose: str = "target"
    placement: Placement | None = None


class Completion(BaseModel):
    """A backend's answer. ``seconds`` is wall time of the call."""

    text: str
    tool_calls: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    model: str = ""
    raw: dict[str, Any] = Field(default_factory=dict, exclude=True)
