"""Typed results that cross a layer or a process: a night's result and summary, a proposal's
``report.json``, adopt / reject / rollback results, status and the daemon's status.

They travel as these models' JSON: the daemon's night worker prints a :class:`NightResult`,
the control socket carries :class:`DaemonStatus` and :class:`NightOutcome`, the CLI prints
them with ``--json``, and the MCP tools return them (or models built from them). Readers
validate what they read (``model_validate``), so a shape change fails at the boundary with
the field's name, never later as a ``KeyError``.

Stored JSON written by older versions stays readable: unknown keys are ignored on read
(``extra="ignore"``) and absent ones take their defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field


class NightStatus(StrEnum):
    """How a night ended (``running`` while it runs)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"  # a proposal was staged (or an identical one stands)
    NO_CHANGE = "no_change"  # nothing certified
    NO_TASKS = "no_tasks"  # nothing to train on
    PLANNED = "planned"  # a dry run
    FAILED = "failed"  # a backend, budget or configuration error (or a bug)
    INTERRUPTED = "interrupted"  # Ctrl-C, a signal, or its process died


#: Statuses of a night that ended normally (the daemon's "a night ran since" check).
COMPLETED = (NightStatus.SUCCEEDED, NightStatus.NO_CHANGE, NightStatus.NO_TASKS)


class Trigger(StrEnum):
    """Who started a night."""

    CLI = "cli"
    MCP = "mcp"
    UI = "ui"  # the dashboard's "Start a night" button
    DAEMON = "daemon"  # the daemon's control channel (a client asked it)
    SCHEDULE = "schedule"  # the nightly schedule
    CATCH_UP = "catch-up"  # a night missed while the machine slept
    DEMO = "demo"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    @classmethod
    def of(cls, row: object, *, renamed: Mapping[str, str] | None = None, **given: Any) -> Self:
        """This view of a typed row (a store row, a task, an edit): each field read from the
        row's attribute of the same name, or of the name ``renamed`` gives it (field ->
        attribute); ``given`` values win; a field the row has no attribute for keeps its
        default (a ``renamed`` key that names no field is a TypeError). The one way a row
        becomes a view, instead of a constructor call listing every field."""
        names = renamed or {}
        unknown = sorted(set(names) - set(cls.model_fields))
        if unknown:  # a misspelt field would silently keep its default
            raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}")
        data = {
            f: getattr(row, names.get(f, f))
            for f in cls.model_fields
            if f not in given and hasattr(row, names.get(f, f))
        }
        return cls.model_validate(data | given)


# ---------------------------------------------------------------------------- progress
class ProgressEvent(_Model):
    """One step of live progress: what a long operation (a harvest, mining, a night's
    rollouts) reports while it runs, through an :data:`OnProgress` callback. The domain emits
    them; a face renders them (the CLI: a rich progress display on a terminal, one JSON
    object per line on stderr with ``--json``). Fields a step has nothing to say about are
    None (left out of the JSON).

    ``step``: ``harvest`` (``done`` / ``total`` files of ``source``, ``bytes`` read), ``mine``
    (sessions, ``prompts`` seen), ``replay`` (rollouts of ``phase``, with the night's
    ``calls`` and ``tokens`` so far and ``epoch`` / ``batch``), or a night's other steps
    (``night``, ``reflect``, ``consolidate``, ``test``, ``stage``…) that carry a ``message``."""

    event: Literal["progress"] = "progress"
    step: str
    message: str | None = None
    done: int | None = None
    total: int | None = None
    unit: str | None = None
    source: str | None = None
    bytes: int | None = None
    sessions: int | None = None
    prompts: int | None = None
    night_id: int | None = None
    phase: str | None = None
    epoch: int | None = None
    epochs: int | None = None
    batch: int | None = None
    batches: int | None = None
    calls: int | None = None
    cached_calls: int | None = None
    tokens: int | None = None

    def line(self) -> str:
        """The event as one JSON line (None fields left out)."""
        return self.model_dump_json(exclude_none=True)


#: Where a long operation reports its progress (may be called from worker threads).
OnProgress = Callable[[ProgressEvent], None]


# ---------------------------------------------------------------------------- nights
class NightCost(_Model):
    """Model calls of one night. ``calls`` excludes ``cached_calls`` (answered by the cache);
    tokens are the backends' own counts (0 when a backend reports none)."""

    calls: int | None = None
    cached_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    seconds: float | None = None  # wall time of the model calls (not of the night)


class GateNoise(_Model):
    """How a night's val scores moved by chance where the target's answers vary
    (``night/gate.py``): each val occurrence was scored on ``samples`` samples; ``spread`` is
    how far the mean val score may move by chance (per task: ``tasks``), measured with
    placebo rules and another sample; an edit had to beat the current document by more."""

    samples: int
    spread: float
    tasks: dict[str, float] = Field(default_factory=dict)


class EditCounts(_Model):
    """How many of a night's edits ended in each state."""

    applied: int = 0
    rejected: int = 0
    unmatched: int = 0
    unverified: int = 0
    #: refused by the poisoning screen (:mod:`skillopt_sleep.night.screen`), never replayed
    flagged: int = 0


class Delivery(_Model):
    """What the trained document costs the user once adopted, in estimated tokens (4
    characters a token). ``mode``: ``memory`` (the whole file reaches the model in every turn)
    or ``skill`` (only its description is listed every turn; the body when the agent loads
    it). ``block_tokens`` is the managed block, held under ``budget``."""

    mode: Literal["memory", "skill"]
    #: the agent that loads the document (None: no agent loads it by itself)
    agent: str | None = None
    rules: int
    block_tokens: int
    budget: int
    per_turn_tokens: int
    when_loaded_tokens: int | None = None


class AgentCopy(_Model):
    """What a night did for another agent whose sessions its tasks came from (config
    ``deliver``): that agent's own document with the night's rules, certified through that
    agent's backend on the held-out views of the tasks the user asked that agent, each its
    val view where it has one, else its test view (``certified_on``: ``val``, ``test`` or
    ``val+test``), before it is staged as a proposal of its own.

    ``status``: ``staged`` (``proposal_id`` set), ``same`` (an earlier staged proposal already
    holds it), ``not_staged`` (``reason`` says why: no gain, a task got worse, no backend, the
    user refused it, …). Scores are the mean over ``tasks`` held-out tasks, before (the agent's
    document as it is) and after (with the rules)."""

    agent: str
    target: str = ""
    backend: str = ""
    status: Literal["staged", "same", "not_staged"]
    proposal_id: str | None = None
    reason: str = ""
    certified_on: str | None = None
    tasks: int = 0
    before: float | None = None
    after: float | None = None
    delivery: Delivery | None = None


class BlockResult(_Model):
    """One block of a night that trained several (the default night over a shared memory
    file: one block per project, the project-less requests in the block every project reads):
    the ``section`` it trained (None: that global block), its tasks and occurrences, how it
    ended (a night status) and the proposal it staged (None when it staged none);
    ``inputs``: the block's fingerprint (:attr:`NightSummary.inputs`), so a later night on the
    same inputs knows the block's rejected edits as its own (None: the block was not trained)."""

    section: str | None = None
    status: NightStatus
    proposal_id: str | None = None
    scorable: int = 0
    train: int = 0
    val: int = 0
    test: int = 0
    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None
    reason: str | None = None
    #: why the block has no test score (:attr:`NightSummary.test_note`)
    test_note: str | None = None
    #: the fingerprint of this block's inputs (what a later night compares to tell a
    #: rejection made on the very same inputs; None: not recorded)
    inputs: str | None = None


#: at most this many withheld occurrences are named one by one (a report, a night's output)
WITHHELD_SHOWN = 10


class WithheldOccurrence(_Model):
    """An occurrence a night did not replay as held out (``mining/split.py``, rules 5 and 7):
    its task, its key (``<session id>#<seq>``) and why (``withheld from test: the same wording
    and context as train occurrence …``)."""

    task_id: str
    occurrence: str
    why: str


class NightSummary(_Model):
    """What a night saw and decided, stored with its ``nights`` row and its proposal.

    ``tasks`` / ``scorable`` count tasks, ``train`` / ``val`` / ``test`` the occurrences the
    night replayed in each role; ``inputs`` is the sha256 of what makes two nights the same night (the
    document, the scorable tasks, the backends, the training settings); the text fields are
    one or two sentences for the user, absent (None) when there is nothing to say.
    """

    tasks: int = 0  # mined
    scorable: int = 0
    #: what "held out" means for the night's val and test (occurrences in time)
    held_out: str | None = None
    #: scorable tasks asked once: they train, and are not yet validated on a recurrence
    not_validated: int | None = None
    #: scorable tasks asked again only in the same words with the same context: the
    #: later asks would replay as cache hits of the train replay, so they are not held out
    #: (not yet validated on a distinct recurrence)
    not_distinct: int | None = None
    #: similar past tasks replayed as extra train tasks (``dream_recall``; None: none)
    recalled: int | None = None
    #: what mining left out, by reason (e.g. ``headless_session``: a ``claude -p`` /
    #: Agent-SDK / ``codex exec`` / ``copilot -p`` run, not the user's own request)
    dropped: dict[str, int] = Field(default_factory=dict)
    train: int = 0
    val: int = 0
    test: int = 0
    rules_before: int = 0
    rules_after: int | None = None
    base_hash: str = ""  # sha256 of the live document the night started from ("" = absent)
    inputs: str = ""
    edits: EditCounts | None = None
    reason: str | None = None  # why the night ended as it did
    warning: str | None = None
    #: why the test split has no score: ``no test score: …`` (no test occurrence), or ``not
    #: scored: …`` (a budget cap met before it was scored)
    test_note: str | None = None
    #: the occurrences withheld from val or test, each with its task and why (None: none)
    withheld: list[WithheldOccurrence] | None = None
    unverified: str | None = None  # why the gate could not certify (no val split)
    #: how the val scores moved by chance (None: the target's answers did not vary)
    noise: GateNoise | None = None
    #: why the gate could not decide: too few val occurrences where the answers vary
    undecided: str | None = None
    stopped: str | None = None  # the budget that stopped the night early
    #: readings by meaning (follow-ups, requests to group) mining left for the next night,
    #: over ``read_calls`` or the night's call cap: that night makes them, even with nothing
    #: new (None: none)
    unread: int | None = None
    #: edits of proposals the user rejected or rolled back, never proposed or staged again
    user_refused: int | None = None
    #: what curation did before staging (night/curate.py): a new rule merged into the same
    #: text the agent already reads in the file, or flagged for contradicting a rule there
    curation: list[str] = Field(default_factory=list)
    #: the project whose block of a shared memory file the night trained (None: every project)
    section: str | None = None
    #: :func:`~skillopt_sleep.delivery.document.block_hash` of that block in the live file the
    #: night started from (adopt applies the block onto a file changed only in other blocks)
    block_hash: str | None = None
    #: a night that trained several blocks (one per project): each block's outcome
    blocks: list[BlockResult] = Field(default_factory=list)
    #: what delivering the trained document costs (estimated tokens; see :class:`Delivery`)
    delivery: Delivery | None = None
    #: the other agents the night's rules were certified for (config ``deliver``)
    copies: list[AgentCopy] = Field(default_factory=list)
    #: on an agent's copy: that agent, and the proposal whose rules it carries (None: the
    #: rules the night's document already had)
    copy_for: str | None = None
    copy_of: str | None = None
    #: the desktop notification of the staged proposal: ``sent with notify-send``, or why
    #: not (``not sent: notify-send is not on PATH``, ``off (notify.desktop = false)``)
    notified: str | None = None

    def dump(self) -> dict[str, Any]:
        """The stored JSON form: absent texts are left out."""
        return self.model_dump(mode="json", exclude_none=True)

    def no_test_line(self, scores: Any) -> str | None:
        """The one line a night or proposal without a test score says instead of "test — →
        —" (``scores``: its val / test scores); None when it has one or nothing says why."""
        if getattr(scores, "test_before", None) is not None or not self.test_note:
            return None
        if self.test_note.startswith("no test score"):
            return self.test_note
        return "no test score: " + self.test_note.removeprefix("not scored: ")

    def staged_proposals(self, first: str | None) -> list[str]:
        """Every proposal the night staged for its document: one per block of a night that
        trained several (:attr:`blocks`), else ``first`` (the night's proposal), if any."""
        staged = [b.proposal_id for b in self.blocks if b.proposal_id]
        return staged or ([first] if first else [])


class NightResult(_Model):
    """One finished night, as :func:`skillopt_sleep.night.run.run_night` returns it."""

    night_id: int
    status: NightStatus
    proposal_id: str | None = None
    target_path: str = ""
    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None
    cost: NightCost = Field(default_factory=NightCost)
    summary: NightSummary = Field(default_factory=NightSummary)
    error: str = ""
    #: the night's wall time from start to end (``cost.seconds`` is its model calls' only)
    seconds: float | None = None


class Dispatch(_Model):
    """Where a night asked for now runs: ``here`` (this process) or ``daemon`` (the running
    daemon, which runs it with its own config and environment), and why."""

    where: Literal["here", "daemon"]
    reason: str
    daemon_running: bool = False  # a daemon runs (though the night may run here)


class NightOutcome(_Model):
    """A night asked for by a face: how it was dispatched and, once known, its result.

    ``result`` is None for a night started without waiting (its ``night_id`` is known)."""

    via: Literal["here", "daemon"]
    reason: str = ""
    night_id: int | None = None
    result: NightResult | None = None


class DemoResult(_Model):
    """The demo's night in its sandbox: its status and scores, its ``report`` (``""``: no
    proposal), the ``sandbox`` folder when it is kept (``""``: removed), the sandbox's
    skillopt-sleep ``home`` and its ``user_home`` (the HOME its agents' folders are in)."""

    status: NightStatus
    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None
    report: str = ""
    sandbox: str = ""
    proposal_id: str | None = None
    home: str
    user_home: str


# ---------------------------------------------------------------------------- proposals
REPORT_SCHEMA_VERSION = 1


class Scores(_Model):
    """Mean scores in [0, 1] of the val and test splits, before and after (None: not scored)."""

    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None


class TaskDelta(_Model):
    """One held-out task's score before and after (in [0, 1]; None: not replayed).
    ``context``: how its replays got the occurrence's context (``none needed`` /
    ``rebuilt`` / ``not rebuilt: <why>``: then scored only on what does not need it)."""

    task_id: str
    intent: str = ""
    before: float | None = None
    after: float | None = None
    context: str = ""
    #: what the agent did with its tools in the replay of the proposed document (commands
    #: run, files written as a diff, what was stopped; "" when it only answered)
    acts: str = ""


class EditRecord(_Model):
    """One edit the night tried, with the gate's verdict (``status``) and its reason."""

    op: str
    text: str = ""
    old: str = ""
    status: str = Field(description="applied | rejected | unmatched | unverified | flagged")
    reason: str = ""
    rationale: str = ""
    origin: str = ""
    epoch: int | None = None
    batch: int | None = None
    val_before: float | None = None
    val_after: float | None = None
    #: the task family the rule is scoped to ("" unscoped)
    scope: str = ""
    #: the replayed views (``<task>@<occurrence>``) the rule was learned from
    evidence: list[str] = Field(default_factory=list)


class RuleEvidence(_Model):
    """One task a rule was learned from: its request, the user's own words correcting it,
    and the sessions it was asked in."""

    task_id: str
    intent: str = ""
    words: list[str] = Field(default_factory=list)
    sessions: list[str] = Field(default_factory=list)


class ProposalRule(_Model):
    """One change of a proposal's rules, reviewed on its own (``adopt ID --rules 1,3``,
    ``reject ID --rule 2``). ``n``: its number (1, 2, …); ``change``: ``adds`` or
    ``removes``; ``scope``: the task family it holds for ("" every task); ``evidence``:
    what it was learned from; ``val_before`` / ``val_after`` and ``verdict``: what the gate
    measured when it was tried; ``tokens``: what it costs in every turn (estimated).
    ``status`` (as it stands now): ``proposed``, ``refused`` (the user refused it; ``reason``
    says why) or ``adopted`` / ``not adopted`` once its proposal was."""

    n: int
    change: Literal["adds", "removes"] = "adds"
    rule: str
    scope: str = ""
    evidence: list[RuleEvidence] = Field(default_factory=list)
    val_before: float | None = None
    val_after: float | None = None
    verdict: str = ""
    tokens: int = 0
    status: str = "proposed"
    reason: str = ""


class FlaggedRule(_Model):
    """A rule (or a skill's description) the staged document adds that the poisoning screen
    flags (:mod:`skillopt_sleep.night.screen`): adopt refuses the proposal unless told
    ``--allow-flagged``."""

    text: str
    reason: str
    where: str = "rule"  # rule | description


class ProposalReport(_Model):
    """``report.json`` of a staged proposal (``<state>/proposals/<id>/report.json``).

    ``schema_version`` is :data:`REPORT_SCHEMA_VERSION` for reports this version writes; a
    report without one is version 1. A newer version than this code knows is refused by
    :func:`load_report_json` with a one-line reason.
    """

    schema_version: int = REPORT_SCHEMA_VERSION
    id: str
    night_id: int
    created_at: str
    target: str
    base_hash: str
    new_hash: str
    #: whose document it writes and which kind (``memory``, ``managed_skill``, ``path``), as
    #: the proposal's row records them ("" in a report written before they were recorded)
    agent: str = ""
    kind: str = ""
    scores: Scores = Field(default_factory=Scores)
    val_tasks: list[TaskDelta] = Field(default_factory=list)
    test_tasks: list[TaskDelta] = Field(default_factory=list)
    edits: list[EditRecord] = Field(default_factory=list)
    cost: NightCost = Field(default_factory=NightCost)
    summary: NightSummary = Field(default_factory=NightSummary)
    scored_as: str = ""
    #: what the document adds that the poisoning screen flags (empty for a clean proposal)
    flagged: list[FlaggedRule] = Field(default_factory=list)
    #: the proposal's rules one by one, for review (empty in a report written before them)
    rules: list[ProposalRule] = Field(default_factory=list)

    def to_json(self) -> str:
        """The ``report.json`` text (indented, non-ASCII kept)."""
        return self.model_dump_json(indent=2)


def load_report_json(text: str, where: str) -> ProposalReport:
    """Parse a ``report.json``. Raises ValueError (one line naming ``where``) when it is not a
    report this version can read."""
    import json

    from pydantic import ValidationError

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where}: not a report (a JSON object is expected)")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version > REPORT_SCHEMA_VERSION:
        raise ValueError(
            f"{where}: report schema version {version!r} is newer than this skillopt-sleep "
            f"reads ({REPORT_SCHEMA_VERSION}); upgrade skillopt-sleep"
        )
    try:
        return ProposalReport.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: bad report ({loc}: {first['msg']})") from None


class AdoptResult(_Model):
    """An adoption: ``target_path`` now holds the proposal's document.

    ``backup_path`` is the copy of the file as it was ("" when it did not exist before);
    hashes are sha256 of the text before and after ("" = absent)."""

    proposal_id: str
    target_path: str
    adopted_at: str
    backup_path: str = ""
    before_hash: str = ""
    after_hash: str = ""
    existed_before: bool = True
    #: what the poisoning screen flagged that ``adopt --allow-flagged`` wrote anyway
    allowed_flagged: list[str] = Field(default_factory=list)
    #: the proposal's rules not written: not chosen (``--rules``) or refused one by one
    left_out: list[str] = Field(default_factory=list)


class RuleRejected(_Model):
    """One rule of a proposal refused on its own (``reject ID --rule N``): remembered for its
    document's block (nights never propose it again), its siblings still adoptable.
    ``status``: the proposal's status after it (``rejected`` once every rule is refused);
    ``copies``: the other agents' copies it was refused in too."""

    proposal_id: str
    n: int
    rule: str
    reason: str = ""
    status: str
    remaining: int
    copies: list[str] = Field(default_factory=list)


class RejectResult(_Model):
    """A rejection. ``withdrawn``: the staged copies of the same rules for other agents
    (``p3-codex``), rejected with it (the user said no to the rules)."""

    proposal_id: str
    status: str
    reason: str = ""
    withdrawn: list[str] = Field(default_factory=list)
    #: when one rule was refused on its own (``reject ID --rule N``): which, and what is left
    rule: RuleRejected | None = None


class RefusalLifted(_Model):
    """A refusal taken back (``reject --undo``): ``status`` is what the proposal is now
    (``staged``, or ``superseded`` when a newer proposal for its file is staged), ``was``
    what it was (``rejected`` or ``rolled_back``); ``copies``: the copies for other agents
    withdrawn with its rejection, by id, with their status now."""

    proposal_id: str
    status: str
    was: str
    copies: dict[str, str] = Field(default_factory=dict)


class AdoptedCopy(_Model):
    """A proposal carrying the same night's rules for another agent, adopted in its own file."""

    proposal_id: str
    target_path: str


class RollbackResult(_Model):
    """A rollback: the target restored to its state before the adoption.

    ``restored_previous``: True when the old file was restored, False when the file adopt
    created was removed. ``kept_copy``: where the user's own later edits were kept (with
    ``--force``), else "". A rollback undoes one adoption, in one file: the proposals carrying
    the same rules for other agents (``p3`` and ``p3-codex``) keep their status unless rolled
    back with it (``copies_rolled_back``, ``rollback --all-agents``); ``still_adopted`` and
    ``still_staged`` say which stay as they were."""

    proposal_id: str
    target_path: str
    rolled_back_at: str
    restored_previous: bool
    kept_copy: str = ""
    removed_dirs: list[str] = Field(default_factory=list)  # folders adopt had created
    #: the file adopt had created was already gone (nothing to remove: the rollback is recorded)
    already_gone: bool = False
    #: the same rules for other agents rolled back with it (``--all-agents``), each in its file
    copies_rolled_back: list[RollbackResult] = Field(default_factory=list)
    #: the same rules for other agents still adopted, each in its own file
    still_adopted: list[AdoptedCopy] = Field(default_factory=list)
    #: the same rules for other agents still staged (adopt or reject each by its id)
    still_staged: list[str] = Field(default_factory=list)

    def outcome(self) -> list[str]:
        """What happened, one line each: every file restored (or removed), then what stays
        adopted or staged for other agents (the CLI, the dashboard and the MCP say the same)."""

        def line(r: RollbackResult) -> str:
            done = (
                "restored"
                if r.restored_previous
                else "was already gone (adopt had created it)"
                if r.already_gone
                else "removed (adopt had created it)"
            )
            return f"rolled back {r.proposal_id}: {r.target_path} {done}"

        lines = [line(r) for r in (self, *self.copies_rolled_back)]
        if self.still_adopted:
            lines.append(
                "still adopted for other agents: "
                + ", ".join(f"{c.proposal_id} ({c.target_path})" for c in self.still_adopted)
            )
        if self.still_staged:
            lines.append(f"still staged for other agents: {', '.join(self.still_staged)}")
        return lines


# ---------------------------------------------------------------------------- status
def night_label(night_id: int) -> str:
    """How a night's id is shown: ``3``; a dry run (a negative id: it takes no night number)
    ``d1``, ``d2``, …"""
    return f"d{-night_id}" if night_id < 0 else str(night_id)


def parse_night(text: str) -> int | None:
    """A night's id from how it is shown or given (``3``, ``d1``, ``-1``); None if neither."""
    t = text.strip().lower()
    if t.startswith("d") and t[1:].isdigit() and int(t[1:]) > 0:
        return -int(t[1:])
    try:
        value = int(t)
    except ValueError:
        return None
    return value or None


class NightView(_Model):
    """One night as ``status`` and the MCP tools show it (a ``nights`` row, typed). ``id``:
    a dry run's is negative (:func:`night_label` shows it ``d1``)."""

    id: int
    status: NightStatus
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
    summary: NightSummary = Field(default_factory=NightSummary)


class PendingProposal(_Model):
    id: str
    target: str
    created_at: str | None = None
    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None
    #: whether its report was looked at (``show``, the MCP ``get_proposal`` tool or proposal
    #: resource, the dashboard) since it was staged
    seen: bool = False


#: the skip reasons (``lines_skipped`` keys, or their prefix before ``:``) of a log line that
#: could not be read: a broken line, not a record a parser leaves out by design (an ignored
#: record type, injected context, an empty message …)
UNREADABLE_LINES = frozenset(
    {
        "bad_json",
        "line_too_long",
        "not_an_object",
        "too_deep",
        "lone_surrogate",
        "malformed",
        "bad_record",
        "bad_zstd",
        "db_error",
        "bad_step",
    }
)


def unreadable_lines(lines_skipped: dict[str, int]) -> dict[str, int]:
    """The ``lines_skipped`` counts of lines that could not be read (:data:`UNREADABLE_LINES`)."""
    return {k: n for k, n in lines_skipped.items() if k.split(":", 1)[0] in UNREADABLE_LINES}


class HarvestView(_Model):
    """The latest harvest pass of one source: files and bytes read, sessions new / updated,
    and what was skipped or filtered, by reason."""

    at: str | None = None
    files_seen: int = 0
    files_read: int = 0
    bytes_read: int = 0
    sessions_new: int = 0
    sessions_updated: int = 0
    sessions_filtered: dict[str, int] = Field(default_factory=dict)
    lines_skipped: dict[str, int] = Field(default_factory=dict)
    files_skipped: dict[str, int] = Field(default_factory=dict)


class WatchedRoot(_Model):
    """One folder the daemon watches: ``state`` is ``watching`` or ``waiting`` (for the
    folder to appear, watching its nearest existing parent ``watching``)."""

    source: str
    root: str
    state: str
    watching: str | None = None
    error: str | None = None
    files: int = 0
    sessions: int = 0


class DaemonNight(_Model):
    running: bool = False
    pid: int | None = None
    trigger: str | None = None
    started_at: str | None = None


class NextNight(_Model):
    """When the daemon's next night is: ``at`` (now when ``pending``: a slot is due), its
    schedule ``slot``, and what the due night is ``waiting`` for (``""``: nothing)."""

    at: str
    slot: str = ""
    pending: bool = False
    waiting: str = ""


class DaemonError(_Model):
    """The daemon's last error (a night it could not run), and when."""

    at: str
    message: str


class DaemonStatus(_Model):
    """The background daemon's status. ``running`` False: no daemon (``error`` says why it
    could not be asked, if it runs but does not answer ``responding`` is False)."""

    running: bool = False
    responding: bool | None = None
    error: str | None = None
    pid: int | None = None
    started_at: str | None = None
    uptime_seconds: float | None = None
    state_dir: str | None = None
    log: str | None = None
    watched: list[WatchedRoot] = Field(default_factory=list)
    last_ingest: dict[str, Any] = Field(default_factory=dict)
    ingest_pending: int = 0
    night: DaemonNight = Field(default_factory=DaemonNight)
    last_daemon_night: dict[str, Any] | None = None
    config: str | None = None
    config_changed: bool = False
    config_error: str | None = None
    schedule: str | None = None
    next_night: NextNight | None = None
    last_scheduled: dict[str, Any] | None = None
    last_error: DaemonError | None = None
    #: the dashboard's address when the daemon serves it (config ``ui.serve``)
    ui: str | None = None


class WildCheck(_Model):
    """An adopted document in the user's real sessions since adopt (see
    :mod:`skillopt_sleep.delivery.wild`): ``sessions`` that asked one of its tasks again, how many the
    document ``reached`` (only those are evidence), how many of those the agent's first answer
    ``passed`` (whole, and the task's checks; a task with a rubric alone: its judge's score),
    and ``corrected`` (the user corrected it); the same for the
    sessions ``before`` adopt. ``flag``: why the document is not reaching the agent, and the
    fix, once ``sessions`` reach the threshold with none reached."""

    proposal_id: str
    target_path: str
    adopted_at: str
    mode: str = Field(description="memory | skill | none (no agent loads the file by itself)")
    sessions: int = 0
    reached: int = 0
    passed: int = 0
    corrected: int = 0
    pass_rate: float | None = None
    #: matching sessions of other agents since adopt (this document is not theirs)
    other_agents: int = 0
    before_sessions: int = 0
    before_passed: int = 0
    before_corrected: int = 0
    before_pass_rate: float | None = None
    flag: str | None = None
    #: reached sessions of tasks judged by their rubric alone that no night has judged yet
    #: (not in ``reached``: they are evidence once judged)
    unjudged: int = 0
    #: of ``reached``, the sessions whose transcript showed the adopted rules among the memory
    #: the agent loaded (observed; the others are inferred from the file being in place)
    observed: int = 0
    #: the adopted rules one by one: helped / no effect / hurt, with the evidence counts
    rules: list[RuleVerdict] = Field(default_factory=list)


class RuleVerdict(_Model):
    """One adopted rule in the wild (:mod:`skillopt_sleep.delivery.wild`): its own tasks'
    first answers passed before adopt and in reached sessions since (``own_*``); the user's
    other requests in the same project (``other_*``: sessions whose first answer was broken or
    corrected, of all); ``verdict``: ``helped``, ``no effect``, ``hurt`` or ``too few
    sessions``, and ``why`` in words; ``rollback``: the proposal staged to remove it when it
    hurt."""

    rule: str
    scope: str = ""
    verdict: str = "too few sessions"
    why: str = ""
    own_before: int = 0
    own_before_passed: int = 0
    own_after: int = 0
    own_after_passed: int = 0
    other_before: int = 0
    other_before_bad: int = 0
    other_after: int = 0
    other_after_bad: int = 0
    rollback: str | None = None


class Counts(_Model):
    sessions: int = 0
    messages: int = 0
    tasks: int = 0
    #: harvested headless / programmatic sessions (``claude -p``, Agent SDK, ``codex exec``,
    #: ``copilot -p``), not our own replays: not mined unless ``mine_headless``
    headless: int = 0


class Status(_Model):
    """What ``status`` shows: the daemon, the store, the last nights, pending proposals, the
    latest harvest per source, the last error, and a config that does not load."""

    database: str
    counts: Counts = Field(default_factory=Counts)
    sessions_by_source: dict[str, int] = Field(default_factory=dict)
    night_running: bool = False
    last_night: NightView | None = None
    nights: list[NightView] = Field(default_factory=list)
    last_error: str | None = None
    pending_proposals: list[PendingProposal] = Field(default_factory=list)
    harvest: dict[str, HarvestView] = Field(default_factory=dict)
    daemon: DaemonStatus = Field(default_factory=DaemonStatus)
    config_error: str | None = None
    #: every adoption in place, checked against the sessions since adopt
    in_the_wild: list[WildCheck] = Field(default_factory=list)
    #: "proposal p3 is ready …": the staged proposals nobody has looked at yet (None: none)
    notice: str | None = None


# ---------------------------------------------------------------------------- reads
class ProposalSummary(_Model):
    """One proposal row: its status, target and scores. ``base_hash`` is the sha256 of the
    live file the proposal was made from ("" = absent): adopting through an agent passes it
    back, so a file changed since is never overwritten."""

    id: str
    status: str = Field(description="staged | adopted | rejected | rolled_back | superseded")
    night_id: int | None = None
    created_at: str | None = None
    target_path: str
    base_hash: str = Field(
        default="",
        description="sha256 of the live file the proposal was made from ('' = absent); "
        "pass it to adopt_proposal",
    )
    val_before: float | None = None
    val_after: float | None = None
    test_before: float | None = None
    test_after: float | None = None
    reason: str | None = None
    block: str | None = Field(
        default=None,
        description="the project folder whose block of the target it writes "
        "(None: the block every project reads, or the whole document)",
    )


class ProposalDetail(ProposalSummary):
    """A proposal with its report: the unified diff, every edit with the gate's verdict,
    per-task val / test deltas and cost."""

    new_hash: str | None = None
    folder: str = ""  # the proposal's folder (document, diff.patch, report.md, report.json)
    diff: str
    edits: list[EditRecord]
    val_tasks: list[TaskDelta]
    test_tasks: list[TaskDelta]
    cost: NightCost
    summary: NightSummary = Field(default_factory=NightSummary)
    report_uri: str
    #: the rules one by one, each with its status now (refused ones marked)
    rules: list[ProposalRule] = Field(default_factory=list)


class TaskInfo(_Model):
    """A mined task as stored by the last night (``sessions``: how many it recurs in)."""

    id: str
    project: str | None = None
    intent: str
    split: str
    sessions: int
    checks: list[dict[str, Any]]
    corrections: list[str]
    synthetic: bool
    #: each time the user asked it, oldest first: ``session_id``, ``seq``, ``when``,
    #: ``prompt``, ``corrected``, ``split`` (its role: train / val / test, "" = none) and
    #: ``note`` (why it was withheld), ``context`` (how its replay gets its own context, as
    #: the task's ``context`` says it), and where it is: ``agent`` (the session's source),
    #: ``project``, ``message_id`` (None when the session is no longer stored)
    occurrences: list[dict[str, Any]] = Field(default_factory=list)
    #: why similar prompts were kept out of this task, one line each
    apart: list[str] = Field(default_factory=list)
    #: checks that failed a control of the transcript (each with its ``controls``)
    demoted: list[dict[str, Any]] = Field(default_factory=list)
    #: how a replay gets the occurrence's context (``none needed`` / ``rebuilt`` /
    #: ``not rebuilt: <why>``)
    context: str = "none needed"


class TaskList(_Model):
    tasks: list[TaskInfo]
    total: int


class CheckVerdict(_Model):
    """One check of a task on one answer: ``kind`` ``whole`` is the answer's own integrity
    (``value`` the fault: empty, bare, cut, python …), every other kind a task's check."""

    kind: str
    value: str = ""
    passed: bool
    why: str = ""


class AnswerScore(_Model):
    """How a task judges one answer (``tasks score``): the score its checks give (0 for a
    broken answer; None for a task judged by its rubric alone, which needs the optimizer
    model), whether the answer is whole, and each check's verdict."""

    task_id: str
    intent: str
    score: float | None
    whole: bool
    verdicts: list[CheckVerdict]
    #: rubric items a night's judge scores beside the checks (not judged here)
    rubric: str = ""


class SearchHit(_Model):
    """One message matching a full-text search; ``snippet`` marks the match with ``[…]``."""

    message_id: int
    session_id: str
    agent: str
    project: str | None = None
    role: str
    kind: str | None = None
    timestamp: str | None = None
    snippet: str


class SearchResult(_Model):
    query: str
    hits: list[SearchHit]


class SkillInfo(_Model):
    """A managed document as it is now on disk: its learned rules and whole text."""

    target: str
    exists: bool
    sha256: str = Field(description="'' when the file does not exist")
    managed_block: bool
    rules: list[str]
    text: str


class SessionMessage(_Model):
    """One harvested (redacted) message of a session, in order."""

    id: int
    seq: int
    role: str
    kind: str | None = None
    timestamp: str | None = None
    text: str = ""
    tool_names: list[str] = Field(default_factory=list)


class SessionView(_Model):
    """A harvested session with its messages (what a search hit links to)."""

    id: str
    agent: str
    project: str | None = None
    started_at: str | None = None
    updated_at: str | None = None
    model: str | None = None
    title: str | None = None
    messages: list[SessionMessage] = Field(default_factory=list)


class NightLog(_Model):
    """``logs``: the end of the daemon's night log, or of one night's own log."""

    #: the night whose own log this is (None: the daemon's night log)
    night_id: int | None = None
    path: str
    #: the log's last bytes ('' when there is no log yet)
    text: str = ""
    #: with no daemon log: the last night's id, whose own log ``logs --night`` shows
    last_night_id: int | None = None


class DoctorCheck(_Model):
    """One ``doctor`` finding: ``status`` ok | warn | fail | skip (not applicable here)."""

    name: str
    status: Literal["ok", "warn", "fail", "skip"]
    detail: str = ""


# ---------------------------------------------------------------------------- privacy
class ForgetResult(_Model):
    """What ``skillopt-sleep forget`` deleted (or, with ``dry_run``, would delete)."""

    dry_run: bool = False
    sessions: int = 0
    messages: int = 0
    tasks: int = 0
    rollouts: int = 0
    cached: int = 0
    #: outbox rows whose kept text was emptied (it held forgotten text)
    outbox: int = 0
    #: derived texts (edits' rules and rationales, nights' summaries and errors, proposals'
    #: reasons) in which forgotten text was replaced by ``[forgotten]``
    derived: int = 0
    #: proposal reports whose task texts were replaced by ``[forgotten]``
    reports: list[str] = Field(default_factory=list)
