"""Plain data shapes shared across the package (pydantic models, no I/O).

These are the contracts between harvesters, the store, the miner, backends and the night.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant"]


class _Model(BaseModel):
    # validators built on first use: a harvest that finds nothing new builds none
    model_config = ConfigDict(defer_build=True)


class CapsuleItem(_Model):
    """One thing the agent saw before answering: a ``file`` it read (``name`` its path,
    relative to the project when inside it) or a command's ``output`` (``name`` the command
    line or the tool and its input). ``text`` is redacted and bounded; ``truncated`` says it
    was cut (a file cut short cannot be rebuilt exactly). ``action``: the result of an action
    the agent took (an edit, a to-do list), which is no context (``name`` the tool, no text)."""

    kind: Literal["file", "output", "action"]
    name: str
    text: str = ""
    truncated: bool = False


class ContextCapsule(_Model):
    """What one occurrence's agent saw before answering, to replay it with the same context.

    ``items``: the files read and command outputs, in order (bounded, redacted). ``missing``:
    why the context cannot be fully rebuilt (a tool whose input or output the log does not
    keep, a result cut short); empty when it can. An occurrence whose agent used no tool
    before answering has an empty capsule with nothing missing: it needs no context.
    """

    items: list[CapsuleItem] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing


class HarvestedMessage(_Model):
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
    #: for a ``tool`` message, what the agent saw (a file it read, a command's output), kept
    #: for the task's context capsule; None when the source does not keep tool inputs
    context: CapsuleItem | None = None


class HarvestedSession(_Model):
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
    #: the marks (:func:`skillopt_sleep.marks.memory_marks`) of the memory the transcript
    #: shows the agent loaded (Claude Code's ``instructions`` attachment, Codex's AGENTS.md
    #: message); None when the transcript does not record it
    loaded: list[str] | None = None


class Check(_Model):
    """A deterministic rule check on an answer.

    kinds: ``contains`` / ``not_contains`` (case-insensitive, matched as a whole token: ``npm``
    does not match inside ``pnpm``), ``regex`` / ``not_regex`` (Python ``re.search``,
    case-insensitive, multi-line), ``max_chars`` / ``min_chars`` / ``max_words`` (``value`` is
    an int as a string), ``tool_called`` (a tool of that name appears in the rollout's tool
    calls), and the structured style checks (``value`` unused): ``imperative`` (the first
    word of the answer's first line is a base-form verb: "Add", not "Added" / "Adds" /
    "This"), ``no_emoji``, ``snake_case`` (every name the answer's code defines is
    snake_case) and ``type_hints`` (every function the answer's Python code defines is fully
    annotated), and ``section`` (the answer has a heading or a label line naming ``value``: a
    Markdown ``## Testing``, ``**Testing**`` or ``Testing:``). See
    :func:`skillopt_sleep.mining.judges.run_check`.

    ``origin`` says where it came from (``correction``: the regex layer read the user's words;
    ``reading``: the optimizer model compiled it from them, :mod:`skillopt_sleep.mining.meaning`;
    ``feedback``, ``answer``).
    ``controls``: the transcript's own controls the check was validated by (see
    :mod:`skillopt_sleep.mining.corrections`): ``negative`` (fails the corrected answer),
    ``positive`` (passes the accepted answer), ``anti_gaming`` (an answer made only of the
    check's own words does not pass the task); each ``pass`` / ``fail`` / ``n/a`` (no such
    answer in the transcript) / ``attested`` (anti-gaming: the bare words pass, but they are
    the literal the user asked for or accepted). ``context``: the check's value is found only
    in the occurrence's context (a file or output the agent saw), so a replay without that
    context cannot be held to it.
    """

    kind: Literal[
        "contains",
        "not_contains",
        "regex",
        "not_regex",
        "max_chars",
        "min_chars",
        "max_words",
        "tool_called",
        "imperative",
        "no_emoji",
        "snake_case",
        "type_hints",
        "section",
    ]
    value: str = ""
    origin: str = "correction"
    evidence: str = ""  # the user's words the check was derived from
    controls: dict[str, str] = Field(default_factory=dict)
    context: bool = False


class Occurrence(_Model):
    """One time the user asked a task: the prompt of session ``session_id`` at ``seq``.

    ``split`` is its role in the night's splits (:mod:`skillopt_sleep.mining.split`): the
    earlier occurrences ``train``, a later one ``val``, the latest ``test`` when there are
    enough; ``""`` when it has none (the task is not scorable, or ``note`` says why it was
    withheld). ``corrected``: the user corrected the answer to this occurrence. ``context``:
    what this occurrence's agent saw before answering (its own capsule: a replay of it
    carries this one, not another occurrence's; None when it was mined before occurrences
    kept their own, then the task's ``context`` stands in).
    """

    session_id: str
    seq: int = 0
    when: str = ""
    prompt: str = ""
    corrected: bool = False
    split: Literal["train", "val", "test", ""] = ""
    note: str = ""
    context: ContextCapsule | None = None
    #: how it joined its task when its words did not: ``meaning`` (the optimizer read it as
    #: the same request, in other words or another language) or ``user`` (``tasks join``)
    joined: str = ""

    @property
    def key(self) -> str:
        """``<session id>#<seq>``: unique among a store's occurrences."""
        return f"{self.session_id}#{self.seq}"


class Task(_Model):
    """A recurring, replayable task mined from sessions.

    ``id`` is a stable hash of the project and the normalised representative intent, so the
    same task keeps its id across nights. ``occurrences`` are the times the user asked it,
    oldest first, each with its role in the splits. ``split`` is ``""`` (unassigned) while
    the task is not scorable — no rule check, and no rubric a judge scores — since a night
    cannot replay it; else ``train`` (every scorable task learns from its earlier
    occurrences; see :mod:`skillopt_sleep.mining.split`). A task the night replays (a *view*
    of one occurrence, :func:`~skillopt_sleep.mining.split.views`) has that occurrence's
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
    #: checks that failed a control: not scored, described in the rubric instead
    demoted: list[Check] = Field(default_factory=list)
    #: what the replayed occurrence's agent saw before answering (None: not known); a task's
    #: is its first occurrence's, a view's (:func:`~skillopt_sleep.mining.split.views`) its
    #: own occurrence's
    context: ContextCapsule | None = None
    #: the transcript's answers a rubric judge is held to: ``(corrected, accepted)`` of the
    #: task's corrections (accepted None: the user did not accept the next answer, or there
    #: was none); mining sets them, in memory only (not stored, not in a night's inputs)
    controls: list[tuple[str, str | None]] = Field(default_factory=list, exclude=True)
    #: how the night's rubric judge held up against ``controls`` (night/night.py): "" not
    #: checked, ``valid``, or ``invalid: <why>`` (its rubric then scores nothing); in memory
    judge: str = Field("", exclude=True)


class Usage(_Model):
    input_tokens: int = 0
    output_tokens: int = 0


class Placement(_Model):
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


def workdir_name(project: str) -> str:
    """The name of the folder a replay of an occurrence asked in ``project`` works in: the
    project folder's own name (a copy of it), ``work`` when it has none usable."""
    name = project.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return name if name not in ("", ".", "..") and "\x00" not in name else "work"


class CompletionRequest(_Model):
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
    #: the replayed occurrence's context: an exec backend writes its files into the
    #: throw-away working folder and shows its outputs with the prompt; an HTTP backend
    #: sends both with the prompt (see :func:`skillopt_sleep.backends.base.with_context`)
    context: ContextCapsule | None = None
    #: the project folder the replayed occurrence was asked in: an exec backend runs the
    #: call in a throw-away copy of that name (the scope a project block states covers it:
    #: :func:`skillopt_sleep.delivery.document.covers`); "" for none
    workdir: str = ""
    #: a dream rollout's sample index (``dream_samples``): 0 is the one sample a night
    #: without dream rollouts makes; each index is cached apart, and an HTTP backend sends it
    #: as the ``x-skillopt-sample`` header (the simulator answers by it; a real model just
    #: samples again)
    sample: int = Field(0, ge=0)


class Acts(_Model):
    """What an agent did with its tools in a replay, beside its text: ``files`` it wrote or
    changed in its working copy (relative path -> the text it left; the copy's files as they
    were before are not listed), the same as a unified ``diff``, the shell ``commands`` it
    ran, and what it tried that was ``stopped`` (a write outside its copy, a command its
    permission mode did not allow: one line each, what was tried and why it was stopped)."""

    files: dict[str, str] = Field(default_factory=dict)
    diff: str = ""
    commands: list[str] = Field(default_factory=list)
    stopped: list[str] = Field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.files or self.commands or self.stopped)

    def shown(self) -> str:
        """What the agent did, as the text a judge and a report read after the answer
        ("" when it did nothing)."""
        parts = []
        if self.commands:
            parts.append("Commands run:\n" + "\n".join(f"$ {c}" for c in self.commands))
        if self.diff:
            parts.append("Files written:\n```diff\n" + self.diff.rstrip("\n") + "\n```")
        if self.stopped:
            parts.append("Stopped:\n" + "\n".join(f"- {s}" for s in self.stopped))
        return "\n\n".join(parts)


class Completion(_Model):
    """A backend's answer. ``seconds`` is wall time of the call; ``acts``: what an agent CLI
    did with its tools in its working copy (empty for a call that only answered)."""

    text: str
    tool_calls: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    model: str = ""
    acts: Acts = Field(default_factory=Acts)
    raw: dict[str, Any] = Field(default_factory=dict, exclude=True)
