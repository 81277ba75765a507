"""Confinement: the roots skillopt-sleep owns, and the check of every path it writes.

Neither adopt nor rollback trusts a path the database or a proposal folder names. A proposal
records whose document it writes and which kind (its row's ``agent`` and ``kind``: an agent's
``memory`` file or ``managed_skill``, or the configured ``path``), and every target is checked
against :class:`Roots` of that agent and kind only (:func:`allowed`): the locations the agent
registry allows for them (:meth:`skillopt_sleep.agents.Agent.locations`: its user memory files,
or its managed skill; its project memory files in the configured project and in the project the
proposal's night ran for), or, for ``path``, the configured ``document.path`` (a ``path``
document is allowed because, and only while, the config names it). So a Codex memory proposal
whose row is pointed at Claude Code's ``CLAUDE.md`` or at a managed skill is refused. The
recorded agent and kind must be what the proposal's ``report.json`` says (and, for an agent's
copy, the agent it is for); a row staged before they were recorded derives them from its target
(:func:`document_of`). A target that resolves elsewhere (a symlinked folder or a link to a file
outside them) is refused before anything is written, whatever ``force`` says; the one link
followed is one to another agent's document of the same kind (one file two agents share,
``AGENTS.md -> CLAUDE.md``, or a skills folder linked to another agent's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_sleep import agents
from skillopt_sleep.config import Settings
from skillopt_sleep.errors import ProposalError, SkilloptError
from skillopt_sleep.store import Store
from skillopt_sleep.store.proposals import ProposalRow


def _real(path: Path | str) -> str:
    return os.path.realpath(path)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


#: the kinds of document a proposal records: an agent's (:data:`agents.DOCUMENT_KINDS`) or
#: ``path``, the file the config's ``document.path`` names
KINDS = (*agents.DOCUMENT_KINDS, "path")


@dataclass(frozen=True)
class Roots:
    """The live files adopt and rollback may write for one agent's document of one kind:
    ``(file, root)`` pairs, each file inside its root (the agent's home folder, a project
    folder, a configured document's folder); ``links``: the other files a link at one of them
    may resolve to (another agent's document of the same kind: one file two agents share)."""

    files: tuple[tuple[Path, Path], ...]
    agent: str = ""
    kind: str = ""
    links: tuple[str, ...] = ()

    def _whose(self) -> str:
        return f"agent {self.agent or '(none)'}, kind {self.kind or '(none)'}"

    def _allowed(self) -> str:
        files = list(dict.fromkeys(str(f) for f, _ in self.files))
        return "allowed: " + (", ".join(files) if files else "none")

    def check(self, target: Path | str, what: str = "the target") -> Path:
        """The root ``target`` is allowed under; ProposalError (one line naming the path, the
        agent and kind, and what is allowed; nothing written) when it is none of the allowed
        files, or resolves (through a symlinked folder or a link) to a file that is none of
        them inside its own root (nor one of :attr:`links`)."""
        given = Path(os.path.abspath(target))
        spelled = {str(given), os.path.join(_real(given.parent), given.name)}
        match = [
            (f, root)
            for f, root in self.files
            if {str(f), os.path.join(_real(f.parent), f.name)} & spelled
        ]
        if not match:
            raise ProposalError(
                f"refusing {what} {given}: not a location skillopt-sleep writes for "
                f"{self._whose()} ({self._allowed()}); nothing was written"
            )
        real = _real(given)
        confined = {_real(f) for f, root in self.files if _inside(_real(f), _real(root))}
        if real not in confined | set(self.links):
            raise ProposalError(
                f"refusing {what} {given}: it resolves to {real} (a symlink leaves the "
                f"locations skillopt-sleep writes for {self._whose()}; {self._allowed()}); "
                "nothing was written"
            )
        if os.path.lexists(real) and not os.path.isfile(real):
            raise ProposalError(f"refusing {what} {given}: not a regular file; nothing was written")
        return match[0][1]


def allowed(
    agent: str,
    kind: str,
    settings: Settings | None = None,
    *,
    projects: Iterable[str | Path] = (),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Roots:
    """The :class:`Roots` of ``agent``'s document of ``kind`` (see :data:`KINDS`) for
    ``settings`` (None: the user's config as it is now) in ``env`` / ``home``: what the agent
    registry allows for that agent and kind (:meth:`skillopt_sleep.agents.Agent.locations`),
    with the project-level files of the configured project and of ``projects`` (the projects
    the proposals' nights ran for, and the configured ``document.path`` when it is that
    agent's document of that kind); for ``path``, the configured ``document.path`` while the
    config names it. ProposalError for an unknown agent or kind."""
    if settings is None:
        from skillopt_sleep.config import load_settings

        try:
            settings = load_settings(None)
        except SkilloptError:  # a broken config: only the registry's user-level locations
            settings = None
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    if kind not in KINDS:
        raise ProposalError(
            f"unknown document kind {kind!r} for agent {agent or '(none)'} (known: "
            f"{', '.join(KINDS)}); nothing was written"
        )
    folders = [str(p) for p in projects if p]
    if settings is not None and settings.project is not None:
        folders.append(str(settings.project))
    files: list[tuple[Path, Path]] = []
    links: list[str] = []
    if kind == "path":
        if settings is not None and settings.document.kind == "path" and settings.document.path:
            doc = settings.document.path.expanduser().resolve()
            files.append((doc, doc.parent))
    else:
        try:
            found = agents.get_agent(agent)
        except SkilloptError as exc:
            raise ProposalError(f"{exc}; nothing was written") from None
        files = found.locations(kind, folders, env, home)
        configured = settings.document if settings is not None else None
        if configured is not None and configured.kind == "path" and configured.path:
            # the configured document.path, when it is this agent's document of this kind
            # (a project's memory file of a project no night names)
            path = Path(os.path.abspath(configured.path.expanduser()))
            if agents.document_of(path, prefer=found.name, only=True, env=env, home=home) == (
                found.name,
                kind,
            ):
                files.append((path, path.parent))
        # a link to another agent's document of the same kind (one file or skills folder two
        # agents share, AGENTS.md -> CLAUDE.md) is written through
        for other in agents.AGENTS:
            for f, root in other.locations(kind, (), env, home):
                if _inside(_real(f), _real(root)):
                    links.append(_real(f))
    return Roots(tuple(files), agent=agent, kind=kind, links=tuple(dict.fromkeys(links)))


def _report_data(row: ProposalRow) -> dict[str, Any] | None:
    """The proposal's ``report.json`` as JSON, None when missing or unreadable."""
    try:
        data = json.loads((Path(row.dir) / "report.json").read_text("utf-8"))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return data if isinstance(data, dict) else None


def document_of(
    row: ProposalRow,
    report: dict[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> tuple[str, str]:
    """The proposal's ``(agent, kind)``: as its row records them, which must be what its
    ``report.json`` (``report``; default: read from its folder) says, and, for an agent's
    copy, the agent the copy is for. A row staged before they were recorded (both "")
    derives them from its target as the night does
    (:func:`skillopt_sleep.agents.document_of`), asking only the agent its report names
    (the copy's agent, or the agent the document was delivered to) when it names one; a file
    that is no agent's document is ``path``. ProposalError (one line, nothing written) when
    the row, the report and the copy disagree, or the report of a row that records them
    cannot be read."""
    pid = row.id
    agent, kind = row.agent or "", row.kind or ""
    if report is None:
        report = _report_data(row)
    summary = (report or {}).get("summary") or {}
    copy_for = summary.get("copy_for") if isinstance(summary, dict) else None
    if agent or kind:
        if report is None:
            raise ProposalError(
                f"proposal {pid}: its report.json is missing or unreadable, so its agent "
                f"{agent or '(none)'} and kind {kind or '(none)'} cannot be checked; nothing "
                "was written"
            )
        if (report.get("agent") or "", report.get("kind") or "") != (agent, kind):
            raise ProposalError(
                f"proposal {pid}: its record says agent {agent or '(none)'}, kind "
                f"{kind or '(none)'} but its report.json says agent "
                f"{report.get('agent') or '(none)'}, kind {report.get('kind') or '(none)'} (one "
                "was changed after the night); nothing was written"
            )
    else:
        delivery = summary.get("delivery") if isinstance(summary, dict) else None
        hint = copy_for or (delivery.get("agent") if isinstance(delivery, dict) else None)
        try:
            found = agents.document_of(
                row.target_path or "",
                prefer=hint or None,
                only=bool(hint),
                env=env,
                home=home,
            )
        except SkilloptError:
            found = None
        agent, kind = found if found is not None else (str(hint or ""), "path")
    if copy_for and copy_for != agent:
        raise ProposalError(
            f"proposal {pid}: it is {copy_for}'s copy but its record says agent {agent}; "
            "nothing was written"
        )
    return agent, kind


def _night_projects(store: Store, rows: Iterable[ProposalRow]) -> list[str]:
    """The projects the nights of the proposals ``rows`` ran for."""
    projects = []
    for row in rows:
        night = store.nights.get(int(row.night_id or 0)) if row else None
        if night and night.project:
            projects.append(night.project)
    return projects


def confine(
    store: Store,
    row: ProposalRow,
    target: Path | str,
    what: str,
    settings: Settings | None = None,
) -> tuple[str, str]:
    """Check ``target`` (the path ``row``'s proposal or its adoption names) against the
    locations of the proposal's agent and kind (:func:`document_of`, :func:`allowed` with
    the project of the proposal's night); its ``(agent, kind)``. ProposalError (one line,
    nothing written) otherwise."""
    agent, kind = document_of(row)
    allowed(agent, kind, settings, projects=_night_projects(store, [row])).check(target, what)
    return agent, kind


def check_target(store: Store, target: str, settings: Settings | None = None) -> None:
    """ProposalError unless ``target`` (a path some proposal names) lies where adopt may
    write the document of the proposals naming it (:func:`confine`): what reads a managed
    document for an agent (MCP ``get_skill``) reads no other file."""
    rows = [r for r in store.proposals.all() if r.target_path == target]
    if not rows:
        raise ProposalError(
            f"refusing the document {target}: no proposal names it; nothing was read"
        )
    for row in rows:
        confine(store, row, target, "the document", settings)
