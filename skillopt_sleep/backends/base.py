"""The backend interface: one method, :meth:`Backend.complete`.

Every backend (HTTP APIs here, agent exec CLIs in their own modules) takes a
:class:`~skillopt_sleep.config.BackendConfig` and raises only the
:class:`~skillopt_sleep.errors.BackendError` tree: ``BackendUnreachable``,
``BackendAuthError``, ``BackendModelError``, ``BackendTimeout``, ``BackendResponseError``.
Transient failures (connection reset, 429, 5xx, timeouts) are retried ``max_retries`` times
with exponential backoff; auth and unknown-model errors are never retried.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skillopt_sleep import agents
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.models import Completion, CompletionRequest, ContextCapsule, Usage

#: the tool an HTTP backend offers to load a listed skill (Claude Code's name and input)
SKILL_TOOL = "Skill"
SKILL_LISTING = "The following skills are available for use with the Skill tool:"
SKILL_TOOL_DESCRIPTION = "Load a listed skill: returns its instructions."
#: the input schema of :data:`SKILL_TOOL` (JSON Schema, as both APIs take it)
SKILL_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"skill": {"type": "string", "description": "the skill's name"}},
    "required": ["skill"],
}
#: most model calls one HTTP completion makes when a skill is offered: the model may call
#: tools before it answers; an answer still calling tools after this many is taken as it is
MAX_TOOL_ROUNDS = 4


@dataclass(frozen=True)
class SkillOffer:
    """A skill an HTTP call lists by its description: ``name``, and the ``result`` the
    :data:`SKILL_TOOL` call returns (the body, as Claude Code returns a loaded skill)."""

    name: str
    result: str


#: the tags around a replay's context in the prompt (the simulator reads them)
CONTEXT_OPEN = "<session-context>"
CONTEXT_CLOSE = "</session-context>"


def context_block(capsule: ContextCapsule | None, *, in_workdir: bool = False) -> str:
    """The replayed occurrence's context as the prompt's preamble: what the agent saw before
    answering (each file it read, each command's output), between :data:`CONTEXT_OPEN` and
    :data:`CONTEXT_CLOSE`; "" when there is none. ``in_workdir``: the files are also in the
    working folder (an exec replay), which the preamble says."""
    if capsule is None or not capsule.items:
        return ""
    lines = [
        CONTEXT_OPEN,
        "Before this request you saw the following"
        + (" (the files are in the working folder)" if in_workdir else "")
        + ":",
    ]
    for item in capsule.items:
        cut = " (cut short)" if item.truncated else ""
        if item.kind == "file":
            lines.append(f"--- file {item.name}{cut} ---")
        else:
            lines.append(f"--- output of `{item.name}`{cut} ---")
        lines.append(item.text.rstrip("\n"))
    lines.append(CONTEXT_CLOSE)
    return "\n".join(lines) + "\n\n"


def workspace_files(capsule: ContextCapsule | None) -> dict[str, str]:
    """``{relative path: text}`` of the capsule's files, to write into a throw-away working
    folder (absolute paths and ``..`` parts are made relative: nothing lands outside it;
    a file cut short is written as it was seen)."""
    out: dict[str, str] = {}
    if capsule is None:
        return out
    for item in capsule.items:
        if item.kind != "file":
            continue
        parts = [p for p in item.name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
        if parts:
            out["/".join(parts)] = item.text
    return out


#: how a managed block scoped to one project begins (``delivery.document.begin_marker``)
PROJECT_BLOCK = "<!-- skillopt-sleep:begin project="


def states_folder(request: CompletionRequest) -> bool:
    """Whether an HTTP replay of ``request`` states its working folder (as its agent does):
    a memory document placed with a block scoped to a project, replayed for an occurrence
    asked in one. Other replays say nothing of a folder, as before (no scope to hold)."""
    p = request.placement
    return bool(
        request.workdir and p is not None and p.mode == "memory" and PROJECT_BLOCK in p.text
    )


def framed(request: CompletionRequest) -> tuple[str, str, SkillOffer | None]:
    """``(system, prompt, skill)`` for an HTTP model call: a placed memory document framed as
    its agent frames it (:func:`skillopt_sleep.agents.frame_memory`: Claude Code's system
    reminder in the first user message, Codex's AGENTS.md instructions block, Copilot's
    custom_instruction); a placed skill only listed by its description (Claude Code's
    listing), its body returned only when the model calls :data:`SKILL_TOOL` (the backend
    offers it; see ``skill``). Without a placement: ``request.system`` and ``request.prompt``
    unchanged. A request's ``context`` precedes the prompt (:func:`context_block`)."""
    if request.context is not None and request.context.items:
        request = request.model_copy(
            update={"prompt": context_block(request.context) + request.prompt, "context": None}
        )
    p = request.placement
    if p is None:
        return request.system, request.prompt, None
    if p.mode == "skill":
        found = re.search(r"^description:\s*(.*)$", p.text, re.M)
        name = p.path.rsplit("/", 2)[-2] if "/" in p.path else p.path
        listing = f"{SKILL_LISTING}\n\n- {name}: {_unquoted(found.group(1)) if found else ''}"
        body = re.sub(r"\A---\n.*?\n---\n", "", p.text, flags=re.S)
        folder = p.path.rsplit("/", 1)[0]
        offer = SkillOffer(
            name,
            f"Launching skill: {name}\n\nBase directory for this skill: {folder}\n\n{body}",
        )
        return "\n\n".join(x for x in (request.system, listing) if x), request.prompt, offer
    system, prefix = agents.frame_memory(p.agent, p.path, p.scope, p.text)
    # where the agent works, stated as it states it, when the document scopes rules to a
    # project: the occurrence's project, so that block's scope holds as in the live request
    folder = agents.folder_statement(p.agent, request.workdir) if states_folder(request) else ""
    return (
        "\n\n".join(x for x in (request.system, folder, system) if x),
        prefix + request.prompt,
        None,
    )


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a model's answer: its ``id`` (to answer it), ``name`` and ``input``."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


def tool_result(skill: SkillOffer, call: ToolCall) -> tuple[str, bool]:
    """``(text, is_error)`` the offered tool returns for ``call``: the skill's body for a
    :data:`SKILL_TOOL` call naming it, else an error (an unknown skill or tool), as Claude
    Code answers one."""
    if call.name != SKILL_TOOL:
        return f"<tool_use_error>No such tool available: {call.name}</tool_use_error>", True
    if call.input.get("skill") != skill.name:
        return f"<tool_use_error>Unknown skill: {call.input.get('skill')}</tool_use_error>", True
    return skill.result, False


def skill_loop(
    skill: SkillOffer | None,
    post: Callable[[], dict[str, Any]],
    calls: Callable[[dict[str, Any]], list[ToolCall]],
    answer: Callable[[dict[str, Any], list[tuple[ToolCall, str, bool]]], None],
) -> list[dict[str, Any]]:
    """An agent's tool loop for an HTTP call that lists ``skill``: ``post()`` the request;
    while the answer has tool ``calls`` (and fewer than :data:`MAX_TOOL_ROUNDS` answers were
    made), ``answer`` them (the backend appends the assistant turn and the
    :func:`tool_result` of each call to its messages) and post again. Every answer, in order.
    Without a skill: one post, its answer."""
    answers = [post()]
    while skill is not None and len(answers) < MAX_TOOL_ROUNDS:
        pending = calls(answers[-1])
        if not pending:
            break
        answer(answers[-1], [(c, *tool_result(skill, c)) for c in pending])
        answers.append(post())
    return answers


def merged(parts: list[Completion], seconds: float) -> Completion:
    """The completion of a tool loop: the last answer's text and model, the tool calls of
    every answer in order, the usage summed, ``seconds`` of the whole loop."""
    last = parts[-1]
    return last.model_copy(
        update={
            "tool_calls": [t for p in parts for t in p.tool_calls],
            "usage": Usage(
                input_tokens=sum(p.usage.input_tokens for p in parts),
                output_tokens=sum(p.usage.output_tokens for p in parts),
            ),
            "seconds": seconds,
        }
    )


def _unquoted(value: str) -> str:
    """A one-line YAML scalar's text: a double-quoted one (as a trained description with a
    ``: `` in it is written) decoded, a single-quoted one unquoted, a plain one stripped."""
    value = value.strip()
    if len(value) > 1 and value[0] == value[-1] == '"':
        try:
            return str(json.loads(value))
        except ValueError:
            return value[1:-1]
    if len(value) > 1 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


class Backend(ABC):
    #: registry name, e.g. ``"openai_compatible"``
    name: str = ""
    #: the tools by which this backend's agent loads a placed skill, as its completions name
    #: them: a call of one means the skill was loaded (the replay lists only the trained skill
    #: of the user's; a skill the CLI ships itself would count too; Codex, which reads the
    #: file with a shell command, reports a read of the placed file as ``Skill``). None: the
    #: completion cannot tell
    skill_tools: tuple[str, ...] | None = None
    #: part of a skill replay's cache key (:meth:`~skillopt_sleep.night.replay.Meter.key`):
    #: changed when the way this backend replays a skill changes, so answers cached before
    #: (which could not load the skill, or did not say) are not reused
    skill_replays: str = "skill-tool-offered"
    #: the backend's agent works in a folder (an agent CLI): a request's ``workdir`` names
    #: it, so it is part of the replay's cache key
    works_in_folder: bool = False

    def __init__(self, config: BackendConfig):
        self.config = config

    @property
    def model(self) -> str:
        return self.config.model

    @abstractmethod
    def complete(self, request: CompletionRequest) -> Completion:
        """Run one call. ``request.model`` empty means ``config.model``."""

    def skill_loaded(self, completion: Completion) -> bool | None:
        """Whether the call that answered ``completion`` loaded the placed skill (see
        :attr:`skill_tools`); None when this backend cannot know."""
        if self.skill_tools is None:
            return None
        names = {t.lower() for t in self.skill_tools}
        return any(t.lower() in names for t in completion.tool_calls)

    def check(self) -> None:  # noqa: B027 (optional: most backends need no check)
        """A cheap readiness check that is not a model call (no tokens spent): the key is
        set, the server answers, the CLI exists. The night runs it first, so a dead or
        unauthorised backend fails loudly even when every rollout would come from the cache.
        Raises the BackendError tree; the default does nothing."""

    def close(self) -> None:  # noqa: B027  # pragma: no cover - optional
        """Release connections/processes."""
