"""The backend interface: one method, :meth:`Backend.complete`.

Every backend (HTTP APIs here, agent exec CLIs in their own modules) takes a
:class:`~skillopt_sleep.config.BackendConfig` and raises only the
:class:`~skillopt_sleep.errors.BackendError` tree: ``BackendUnreachable``,
``BackendAuthError``, ``BackendModelError``, ``BackendTimeout``, ``BackendResponseError``.
Transient failures (connection reset, 429, 5xx, timeouts) are retried ``max_retries`` times
with exponential backoff; auth and unknown-model errors are never retried.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

from skillopt_sleep import agents
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.models import Completion, CompletionRequest

#: the tool an HTTP backend offers to load a listed skill (Claude Code's name and input)
SKILL_TOOL = "Skill"
SKILL_LISTING = "The following skills are available for use with the Skill tool:"


@dataclass(frozen=True)
class SkillOffer:
    """A skill an HTTP call lists by its description: ``name``, and the ``result`` the
    :data:`SKILL_TOOL` call returns (the body, as Claude Code returns a loaded skill)."""

    name: str
    result: str


def framed(request: CompletionRequest) -> tuple[str, str, SkillOffer | None]:
    """``(system, prompt, skill)`` for an HTTP model call: a placed memory document framed as
    its agent frames it (:func:`skillopt_sleep.agents.frame_memory`: Claude Code's system
    reminder in the first user message, Codex's AGENTS.md instructions block, Copilot's
    custom_instruction); a placed skill only listed by its description (Claude Code's
    listing), its body returned only when the model calls :data:`SKILL_TOOL` (the backend
    offers it; see ``skill``). Without a placement: ``request.system`` and ``request.prompt``
    unchanged."""
    p = request.placement
    if p is None:
        return request.system, request.prompt, None
    if p.mode == "skill":
        found = re.search(r"^description:\s*(.*)$", p.text, re.M)
        name = p.path.rsplit("/", 2)[-2] if "/" in p.path else p.path
        listing = f"{SKILL_LISTING}\n\n- {name}: {found.group(1).strip() if found else ''}"
        body = re.sub(r"\A---\n.*?\n---\n", "", p.text, flags=re.S)
        folder = p.path.rsplit("/", 1)[0]
        offer = SkillOffer(
            name,
            f"Launching skill: {name}\n\nBase directory for this skill: {folder}\n\n{body}",
        )
        return "\n\n".join(x for x in (request.system, listing) if x), request.prompt, offer
    system, prefix = agents.frame_memory(p.agent, p.path, p.scope, p.text)
    return "\n\n".join(x for x in (request.system, system) if x), prefix + request.prompt, None


class Backend(ABC):
    #: registry name, e.g. ``"openai_compatible"``
    name: str = ""

    def __init__(self, config: BackendConfig):
        self.config = config

    @property
    def model(self) -> str:
        return self.config.model

    @abstractmethod
    def complete(self, request: CompletionRequest) -> Completion:
        """Run one call. ``request.model`` empty means ``config.model``."""

    def check(self) -> None:  # noqa: B027 (optional: most backends need no check)
        """A cheap readiness check that is not a model call (no tokens spent): the key is
        set, the server answers, the CLI exists. The night runs it first, so a dead or
        unauthorised backend fails loudly even when every rollout would come from the cache.
        Raises the BackendError tree; the default does nothing."""

    def close(self) -> None:  # noqa: B027  # pragma: no cover - optional
        """Release connections/processes."""
