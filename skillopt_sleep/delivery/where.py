"""Delivery: how the trained document reaches the agent once adopted, so a night can replay
every candidate through the very same path (certified = deployed).

:func:`where_loaded` says how an agent finds a target file by itself (docs/agents.md has the
measurements, per CLI version): a *memory* file it loads in every turn (user-level, in its
home folder, or project-level, in the working folder), or a *skill* it lists by description
and loads when it decides to. The night turns that into a :class:`~skillopt_sleep.models.
Placement` for each replay: the exec backends write the candidate into an overlay of the
agent's home folder (or the working folder) and the HTTP backends frame it as the agent does.
A target no agent loads by itself has no placement: it is given as system text, and the night
warns that its score says nothing about daily use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skillopt_sleep import agents
from skillopt_sleep.models import Placement

#: project-level skills folders the CLIs list (docs/agents.md)
PROJECT_SKILL_DIRS = (".claude/skills", ".codex/skills", ".github/skills", ".agents/skills")


@dataclass(frozen=True)
class Where:
    """Where an agent finds a document by itself: see :class:`~skillopt_sleep.models.Placement`
    (everything but the text)."""

    agent: str
    scope: Literal["user", "project"]
    path: str
    mode: Literal["memory", "skill"]

    def place(self, text: str) -> Placement:
        return Placement(
            agent=self.agent, scope=self.scope, path=self.path, mode=self.mode, text=text
        )

    def describe(self) -> str:
        where = f"{self.agent}'s {'user folder' if self.scope == 'user' else 'project'}"
        how = "loaded in every turn" if self.mode == "memory" else "a skill, loaded on demand"
        return f"{self.path} in {where} ({how})"


def _under(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


def where_loaded(
    target: Path,
    *,
    agent: str,
    project: Path | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Where | None:
    """How ``agent`` (or, for a file in another agent's home, that agent) finds ``target``
    by itself; None when no agent loads it without being told to."""
    target = Path(target)
    skill = target.name == "SKILL.md"
    ordered = [agents.get_agent(agent)] + [a for a in agents.AGENTS if a.name != agent]
    for a in ordered:
        if not skill:  # a memory file, where the agent's config puts it (OpenClaw's workspace)
            for entry, path in zip(a.user_memory, a.user_memory_files(env, home), strict=True):
                if os.path.abspath(target) == os.path.abspath(path):
                    return Where(a.name, "user", entry, "memory")
        rel = _under(target, a.home(env, home))
        if rel is None:
            continue
        skills = a.skills_dir(env, home)
        if skill and skills is not None and _under(target, skills) is not None:
            return Where(a.name, "user", rel, "skill")
    if project is not None:
        rel = _under(target, Path(project))
        if rel is not None:
            a = agents.get_agent(agent)
            if skill and any(rel.startswith(d + "/") for d in PROJECT_SKILL_DIRS):
                return Where(a.name, "project", rel, "skill")
            if not skill and rel in a.project_memory:
                return Where(a.name, "project", rel, "memory")
    return None
