"""Adopt, reject and roll back staged proposals. The only code that writes a user's live file.

Writes are atomic (temp file in the same folder, fsync, ``os.replace``, fsync of the folder),
keep the file's mode (a new file gets the umask's default), and are preceded by a byte-exact
backup in ``<state>/backups/<n>/``. adopt records the folders it creates for a new file in
``<proposal dir>/adoption.json``; rollback removes exactly those, when empty. A live file that is
not UTF-8 text is refused before anything is written.
``adopt`` refuses when the live file changed since the proposal's base; ``rollback`` refuses
when the live file changed since the adoption. ``force=True`` overrides both (adopt then
re-applies only the proposed managed block onto the current file). A live file changed only
in *other* managed blocks (another project's block of a shared memory file, adopted since)
is no stale base: adopt applies the proposal's own block onto it, the others kept.

**Confinement.** Neither trusts a path the database or a proposal folder names. A proposal
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
``AGENTS.md -> CLAUDE.md``, or a skills folder linked to another agent's). adopt also refuses a
staged document or report that does not match the hashes its row recorded (``new_hash``,
``base_hash``, ``target_path``); rollback refuses a backup outside ``<state>/backups`` or whose
bytes are not the adoption's ``before_hash``, and removes only folders between the target and
its root; the recovery of a killed adopt (:func:`finish_unfinished`) leaves an adoption whose
target fails these checks alone. A staged document that adds a rule the poisoning screen flags
(:mod:`skillopt_sleep.night.screen`) is adopted only with ``allow_flagged``.

**One adoption, one file.** ``rollback`` takes a proposal's id, an agent's copy's id
(``p3-codex``) or a path, and undoes that one adoption (never one another adoption of the same
file stands on). The proposals carrying the same rules for other agents keep their status
(each is its own adoption in its own file) and the result names those still adopted or
staged; ``all_agents`` rolls back each of them in its own file. ``reject`` withdraws the
copies still staged (a no to the rules); :func:`lift_refusal` takes a rejection or a rollback
back.
"""

from __future__ import annotations

import glob
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_sleep import agents, paths
from skillopt_sleep.config import Settings
from skillopt_sleep.delivery.document import (
    SKILL_NAME,
    Document,
    block_hash,
    decode_live,
    outside_blocks,
    sha256_text,
)
from skillopt_sleep.errors import DocumentError, ProposalError, SkilloptError
from skillopt_sleep.night.screen import document_flags
from skillopt_sleep.results import (
    AdoptedCopy,
    AdoptResult,
    NightSummary,
    ProposalReport,
    RefusalLifted,
    RejectResult,
    RollbackResult,
    load_report_json,
)
from skillopt_sleep.store import Store, now_iso
from skillopt_sleep.store.proposals import AdoptionRow, ProposalRow, block_of

ADOPTION_RECORD = "adoption.json"  # in the proposal's folder: what adopt created (folders)
#: in the proposal's folder from the moment adopt records the adoption until the live file is
#: written: a process killed in between leaves it, and :func:`finish_unfinished` settles it
ADOPTING = "adopting.json"


# ------------------------------------------------------------------ confinement
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


def _verify_staged(row: ProposalRow, text: str) -> None:
    """ProposalError unless the staged document ``text`` and the proposal's report.json are
    what the row recorded: the document's ``new_hash``, the report's ``report_hash`` (rows
    staged before m011 have none), and the report's target and hashes equal the row's."""
    pid = row.id
    if sha256_text(text) != (row.new_hash or ""):
        raise ProposalError(
            f"proposal {pid}: the staged document does not match its recorded hash (it was "
            "changed after the night staged it); nothing was written"
        )
    recorded = row.report_hash or ""
    if recorded:  # staged since m011: the report's whole text, not only three of its fields
        try:
            report_text = (Path(row.dir) / "report.json").read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            report_text = None
        if report_text is None or sha256_text(report_text) != recorded:
            raise ProposalError(
                f"proposal {pid}: its report.json does not match its recorded hash (it was "
                "changed or removed after the night staged it); nothing was written"
            )
    report = _report_data(row)
    if report is None or (
        report.get("new_hash"),
        report.get("base_hash"),
        report.get("target"),
    ) != (row.new_hash, row.base_hash, row.target_path):
        raise ProposalError(
            f"proposal {pid}: its record and its report.json disagree on the target or the "
            "hashes (one was changed after the night); nothing was written"
        )


def _umask() -> int:
    """The user's umask (:func:`skillopt_sleep.paths.user_umask`): a user's file is created as
    any program would create it, not with this process's private 077."""
    return paths.user_umask()


def atomic_write(path: Path, data: bytes, *, new_mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically; creates parent folders; keeps the mode.

    Temp files a killed write of this same file left beside it (``.NAME.XXXXXXXX.tmp``) are
    removed first. An existing file keeps its mode; a new one gets ``new_mode``, by default what any program
    creating it would give it (``0o666 & ~umask``), not the temp file's private 0600 — except
    in this tool's own folders (:func:`skillopt_sleep.paths.is_own`: records, backups,
    install originals), where a new file is 0600 and a new folder 0700.
    A symlink is written through (its target is replaced), so a link such as
    ``AGENTS.md -> CLAUDE.md`` stays a link.
    """
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    own = paths.is_own(path)  # this tool's own folders: the user's alone whatever the umask
    paths.make_user_dirs(path.parent, private=own)
    if path.exists():
        mode = path.stat().st_mode & 0o7777
    elif own:
        mode = 0o600
    else:
        mode = new_mode if new_mode is not None else 0o666 & ~_umask()
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        if re.fullmatch(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp", stale.name):
            stale.unlink(missing_ok=True)  # left by a write killed before its rename
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - e.g. Windows
        pass


def _missing_dirs(path: Path) -> list[Path]:
    """The folders writing ``path`` would create, deepest first."""
    out: list[Path] = []
    parent = path.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        out.append(parent)
        parent = parent.parent
    return out


def _remove_empty_dirs(dirs: list[str] | list[Path]) -> list[str]:
    """rmdir each folder (deepest first) that is empty now; the ones removed."""
    removed = []
    for d in dirs:
        try:
            os.rmdir(d)
        except OSError:  # not empty (the user put something there), gone, or not ours to remove
            continue
        removed.append(str(d))
    return removed


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes, None when absent; ProposalError when it cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ProposalError(f"cannot read {path}: {exc.strerror or exc}") from None


def _write(path: Path, data: bytes, *, new_mode: int | None = None) -> None:
    try:
        atomic_write(path, data, new_mode=new_mode)
    except OSError as exc:
        raise ProposalError(
            f"cannot write {path}: {exc.strerror or exc}; nothing was changed"
        ) from None


def _keep_copy(data: bytes, name: str, why: str) -> Path:
    """Save bytes about to be overwritten under ``<state>/backups/<why>-<time>/``."""
    import time

    folder = paths.backups_dir() / f"{why}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    _write(target, data, new_mode=0o600)  # a copy of the user's file stays private to them
    return target


def _hash_bytes(data: bytes | None) -> str:
    return "" if data is None else sha256_text(data.decode("utf-8", "surrogateescape"))


def get_proposal(store: Store, proposal_id: str) -> ProposalRow:
    row = store.proposals.get(proposal_id)
    if not row:
        known = [r.id for r in store.proposals.all(limit=5)]
        hint = f"; recent: {', '.join(known)}" if known else "; there are no proposals yet"
        raise ProposalError(f"no proposal {proposal_id!r}{hint}")
    return row


def list_proposals(store: Store, status: str | None = None) -> list[dict[str, Any]]:
    """Proposal rows (as dicts), newest first; ``summary`` decoded from its JSON column."""
    rows = [r.as_dict() for r in store.proposals.all(status)]
    for row in rows:
        try:
            row["summary"] = json.loads(row.get("summary") or "{}")
        except json.JSONDecodeError:
            pass
    return rows


def load_report(row: ProposalRow) -> ProposalReport:
    """The proposal's ``report.json``, typed. Raises ProposalError (one line) when it is
    missing, unreadable or not a report this version reads."""
    where = f"proposal {row.id}: report.json"
    try:
        text = (Path(row.dir) / "report.json").read_text("utf-8")
    except OSError as exc:
        raise ProposalError(f"proposal {row.id}: report unreadable ({exc})") from None
    try:
        return load_report_json(text, where)
    except ValueError as exc:
        raise ProposalError(str(exc)) from None


#: the statuses a proposal can be adopted from: staged, or rolled back (the user undid it and
#: now asks for it again; a night never stages a rolled-back document again by itself)
ADOPTABLE = ("staged", "rolled_back")


def report_markdown(row: ProposalRow) -> str:
    """The proposal's ``report.md`` as it stands now: a proposal that is no longer staged says
    so where the staged report says how to adopt it. Raises ProposalError when unreadable."""
    try:
        text = (Path(row.dir) / "report.md").read_text("utf-8")
    except OSError as exc:
        raise ProposalError(
            f"proposal {row.id}: report unreadable ({exc.strerror or exc})"
        ) from None
    if row.status not in ADOPTABLE:
        why = f" ({row.reason})" if row.reason else ""
        text = re.sub(
            r"(?m)^Adopt with `skillopt-sleep adopt [^\n]*$",
            f"This proposal is {row.status}{why}: it can no longer be adopted.",
            text,
            count=1,
        )
    return text


def agent_group(
    store: Store, proposal_id: str, statuses: tuple[str, ...] = ("staged",)
) -> list[str]:
    """The proposals with one of ``statuses`` (default: staged) that carry the same night's
    rules for different agents (the proposal the night trained and its agents' copies,
    :mod:`skillopt_sleep.night.copies`, including copies a later night made of it),
    ``proposal_id``'s own first. ProposalError for an unknown proposal."""
    row = get_proposal(store, proposal_id)
    summary = NightSummary.model_validate_json(row.summary or "{}")
    head = summary.copy_of or proposal_id
    # a copy an earlier night staged and this night found unchanged ("same document as the
    # staged proposal p6-codex") is listed in this proposal's copies: it is one of the group
    listed = {c.proposal_id for c in summary.copies if c.proposal_id}
    staged = [r for status in statuses for r in store.proposals.all(status) if r.id != proposal_id]
    members = [
        r.id
        for r in staged
        if r.id == head
        or r.id in listed
        or NightSummary.model_validate_json(r.summary or "{}").copy_of == head
    ]
    return [proposal_id, *members]


def _withdraw_copies(store: Store, proposal_id: str, why: str) -> list[str]:
    """Reject the staged copies of ``proposal_id``'s rules for other agents (not the proposal
    itself, and nothing when it is itself a copy); their ids."""
    row = get_proposal(store, proposal_id)
    if NightSummary.model_validate_json(row.summary or "{}").copy_for:
        return []
    copies = agent_group(store, proposal_id)[1:]
    for pid in copies:
        store.proposals.set_status(pid, "rejected", why)
    return copies


def _other_blocks_only(row: ProposalRow, live: str | None, new: str | None = None) -> bool:
    """Whether the live text ``live`` differs from the proposal's base only in *other*
    managed blocks (another project's proposal adopted since): its own block (the hash its
    night recorded) and the user's own text (as in the staged document ``new``, read from the
    proposal's folder when None) are as the night saw them, so its block applies as is."""
    try:
        summary = NightSummary.model_validate_json(row.summary or "{}")
    except ValueError:
        return False
    if summary.block_hash is None or block_hash(live, summary.section) != summary.block_hash:
        return False
    if new is None:
        try:
            new = (Path(row.dir) / "document").read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return False
    return outside_blocks(live) == outside_blocks(new)


def adopt_group(
    store: Store,
    proposal_id: str,
    *,
    force: bool = False,
    allow_flagged: bool = False,
    settings: Settings | None = None,
) -> list[AdoptResult]:
    """Adopt ``proposal_id`` and every staged or rolled-back copy of its rules for other
    agents (:func:`agent_group`), each as :func:`adopt` does. Every member's target is checked
    against the allowed locations, and (unless ``force``) its live file against its base,
    first, so one bad member refuses the whole group before anything is written.
    ProposalError says which member failed and what was adopted."""
    finish_unfinished(store)
    group = agent_group(store, proposal_id, ADOPTABLE)
    rows = [get_proposal(store, pid) for pid in group]
    for row in rows:
        confine(store, row, row.target_path, f"proposal {row.id}'s target", settings)
    if not force:
        for pid in group:
            row = get_proposal(store, pid)
            if row.status not in ADOPTABLE:
                raise ProposalError(f"proposal {pid} is {row.status}, not staged")
            live = _read_bytes(Path(row.target_path))
            try:
                text = None if live is None else live.decode("utf-8")
            except UnicodeDecodeError:
                text = ""  # adopt says why
            if sha256_text(text) != row.base_hash and not _other_blocks_only(row, text):
                raise ProposalError(
                    f"{row.target_path} changed since proposal {pid} was made; nothing was "
                    "adopted (run a new night, or adopt the others one by one)"
                )
    done: list[AdoptResult] = []
    for pid in group:
        try:
            done.append(
                adopt(store, pid, force=force, allow_flagged=allow_flagged, settings=settings)
            )
        except ProposalError as exc:
            kept = ", ".join(a.proposal_id for a in done)
            raise ProposalError(
                f"{exc}" + (f" (already adopted: {kept}; undo with rollback)" if kept else "")
            ) from None
    return done


def adopt(
    store: Store,
    proposal_id: str,
    *,
    base_hash: str | None = None,
    force: bool = False,
    allow_flagged: bool = False,
    settings: Settings | None = None,
) -> AdoptResult:
    """Write the proposal to its target. Returns the adoption.

    ``base_hash`` (optional, from an agent reviewing the proposal) must equal the proposal's.
    ``allow_flagged``: write a document that adds rules the poisoning screen flags (listed in
    the result's ``allowed_flagged``). ``settings``: the config whose project and
    ``document.path`` count (None: the user's config as it is now). Raises ProposalError for
    an unknown proposal or one neither staged nor rolled back (:data:`ADOPTABLE`), a stale
    base, a target outside the locations of the proposal's agent and kind (:func:`confine`),
    a recorded agent or kind its report does not confirm, a staged document or record that
    does not match its hashes, or a flagged rule.
    """
    finish_unfinished(store)
    row = get_proposal(store, proposal_id)
    if row.status not in ADOPTABLE:
        raise ProposalError(f"proposal {proposal_id} is {row.status}, not staged")
    if base_hash is not None and base_hash != row.base_hash:
        raise ProposalError(
            f"proposal {proposal_id}: base_hash does not match (expected {row.base_hash[:12] or 'absent'})"
        )
    confine(store, row, row.target_path, f"proposal {proposal_id}'s target", settings)
    target = Path(row.target_path)
    folder = Path(row.dir)
    if not _inside(_real(folder), _real(paths.proposals_dir())):
        raise ProposalError(
            f"proposal {proposal_id}: its folder {folder} is not under "
            f"{paths.proposals_dir()}; nothing was written"
        )
    staged = folder / "document"
    try:
        new_text = staged.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ProposalError(f"proposal {proposal_id}: staged document unreadable ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ProposalError(
            f"proposal {proposal_id}: staged document is not UTF-8 ({exc.reason} "
            f"at offset {exc.start})"
        ) from None
    _verify_staged(row, new_text)
    live = _read_bytes(target)
    try:  # decoded from the bytes just read (not read again), so the hash and text agree
        live_text = (
            None
            if live is None
            else decode_live(
                live, target, fix="convert it to UTF-8, then run a new night; nothing was changed"
            )
        )
    except DocumentError as exc:
        raise ProposalError(str(exc)) from None
    live_hash = sha256_text(live_text)
    if live_hash != row.base_hash:
        section = NightSummary.model_validate_json(row.summary or "{}").section
        if not force and not _other_blocks_only(row, live_text, new_text):
            raise ProposalError(
                f"{target} changed since proposal {proposal_id} was made; run "
                "`skillopt-sleep run` for a fresh proposal, or `adopt --force` to apply only "
                "its managed block onto the current file"
            )
        skill = target.name == "SKILL.md"
        proposed = Document.parse(new_text, new_skill=skill, section=section)
        current = Document.parse(live_text, new_skill=live is None or skill, section=section)
        if proposed.description is not None and current.description is not None:
            current.description = proposed.description  # a skill's trained description too
        new_text = current.render(proposed.rules)
    flags = document_flags(live_text, new_text)
    if flags and not allow_flagged:
        first = flags[0]
        raise ProposalError(
            f"proposal {proposal_id} adds {len(flags)} flagged text(s), e.g. {first.where} "
            f"{first.text[:120]!r} ({first.reason}); nothing was written (review report.md; "
            "`adopt --allow-flagged` writes it anyway)"
        )
    # the folders this write creates, recorded before it so that rollback removes exactly them
    written = Path(os.path.realpath(target)) if target.is_symlink() else target
    created = _missing_dirs(written)
    record = Path(row.dir) / ADOPTION_RECORD
    _write(
        record,
        json.dumps(
            {
                "proposal_id": proposal_id,
                "target_path": str(target),
                "written_path": str(written),
                "existed_before": live is not None,
                "created_dirs": [str(d) for d in created],
            },
            indent=2,
        ).encode("utf-8"),
    )
    # backup, then the adoption recorded, then the live write: a process killed at any point
    # leaves either no change or a change `rollback` knows (a failed write is undone here)
    adoption_id = None
    try:
        backup_path = (
            str(_keep_copy(live, target.name, f"adopt-{proposal_id}")) if live is not None else ""
        )
        with store.write():
            adoption_id = store.adoptions.add(
                proposal_id=proposal_id,
                target_path=str(target),
                adopted_at=now_iso(),
                existed_before=int(live is not None),
                before_hash=live_hash,
                after_hash=sha256_text(new_text),
                backup_path=backup_path,
                rolled_back_at=None,
            )
            store.proposals.set_status(proposal_id, "adopted", "")  # no stale reason
            # written before the commit: a kill between the commit and the live write
            # leaves it, and the next adopt or rollback undoes the record
            marker = {"adoption_id": adoption_id, "previous_status": row.status}
            _write(folder / ADOPTING, json.dumps({"proposal_id": proposal_id, **marker}).encode())
        _write(target, new_text.encode("utf-8"))
        (folder / ADOPTING).unlink(missing_ok=True)
    except BaseException:
        if adoption_id is not None:
            with store.write():
                store.adoptions.delete(adoption_id)
                store.proposals.set_status(proposal_id, row.status, row.reason or "")
        _remove_empty_dirs(created)
        record.unlink(missing_ok=True)
        (folder / ADOPTING).unlink(missing_ok=True)
        raise
    adopted = store.adoptions.get(adoption_id)
    assert adopted is not None
    done = _adoption(adopted)
    done.allowed_flagged = [f.text for f in flags]
    return done


def finish_unfinished(store: Store) -> list[str]:
    """Settle adoptions an adopt killed mid-way left (:data:`ADOPTING` in a proposal's
    folder): recorded but the live file still as it was before (its hash is the adoption's
    ``before_hash``) → the record is undone and the proposal is as it was (staged or rolled
    back); the live file written (or changed since) → the adoption stands. Killed before the
    record was committed → nothing to undo. An adoption whose target is not where its
    proposal's agent and kind may be written (:func:`confine`: the row was tampered with) is
    left alone, marker and all: nothing is removed, and rolling it back is refused with the
    reason. Returns the proposals whose adoption was undone."""
    undone: list[str] = []
    for marker in sorted(paths.proposals_dir().glob(f"*/{ADOPTING}")):
        try:
            data = json.loads(marker.read_text("utf-8"))
            pid, aid = str(data["proposal_id"]), int(data["adoption_id"])
        except (OSError, ValueError, KeyError, TypeError):
            marker.unlink(missing_ok=True)
            continue
        a = store.adoptions.get(aid)
        proposal = store.proposals.get(pid)
        if (
            a is not None
            and proposal is not None
            and a.proposal_id == pid
            and a.rolled_back_at is None
            and proposal.status == "adopted"
            and Path(proposal.dir or "") == marker.parent
        ):
            target = Path(a.target_path)
            try:  # a record that names a place the proposal may not write: left as it is
                confine(store, proposal, target, "the interrupted adoption's target")
            except ProposalError:
                continue
            live = _hash_bytes(_read_bytes(target))
            if live != a.after_hash and live == a.before_hash:
                previous = data.get("previous_status")
                with store.write():
                    store.adoptions.delete(aid)
                    store.proposals.set_status(pid, previous if previous in ADOPTABLE else "staged")
                _remove_empty_dirs(
                    [
                        d
                        for d in _created_dirs(store, a)
                        if _inside(os.path.abspath(target), os.path.abspath(d))
                        and os.path.abspath(d) != os.path.abspath(target)
                    ]
                )
                undone.append(pid)
        marker.unlink(missing_ok=True)
    return undone


def _adoption(row: AdoptionRow) -> AdoptResult:
    return AdoptResult(
        proposal_id=row.proposal_id,
        target_path=row.target_path,
        adopted_at=row.adopted_at,
        backup_path=row.backup_path or "",
        before_hash=row.before_hash or "",
        after_hash=row.after_hash or "",
        existed_before=bool(row.existed_before),
    )


def _created_dirs(store: Store, adoption: AdoptionRow) -> list[str]:
    """The folders ``adoption`` created (deepest first), from the record adopt left in the
    proposal's folder. Without one (an adoption made by an older version) only the managed
    skill folder right above the file counts, as it did then."""
    proposal = store.proposals.get(adoption.proposal_id)
    folder = proposal.dir if proposal is not None else None
    if folder:
        try:
            data = json.loads((Path(folder) / ADOPTION_RECORD).read_text("utf-8"))
            if data.get("target_path") == adoption.target_path:
                return [str(d) for d in data.get("created_dirs") or []]
        except (OSError, ValueError, AttributeError):
            pass
    parent = Path(adoption.target_path).parent
    return [str(parent)] if parent.name == SKILL_NAME else []


def reject(store: Store, proposal_id: str, reason: str = "") -> RejectResult:
    """Discard a staged proposal (the live file is not touched). Raises ProposalError for an
    unknown or no longer staged proposal."""
    finish_unfinished(store)
    row = get_proposal(store, proposal_id)
    if row.status != "staged":
        raise ProposalError(f"proposal {proposal_id} is {row.status}, not staged")
    store.proposals.set_status(proposal_id, "rejected", reason or "rejected by user")
    withdrawn = _withdraw_copies(
        store, proposal_id, f"rejected with {proposal_id}" + (f": {reason}" if reason else "")
    )
    row = get_proposal(store, proposal_id)
    return RejectResult(
        proposal_id=row.id,
        status=row.status,
        reason=row.reason or "",
        withdrawn=withdrawn,
    )


def lift_refusal(store: Store, proposal_id: str) -> RefusalLifted:
    """Take back a refusal: a proposal the user rejected or rolled back is staged again
    (nights may propose its document and its edits again; ``adopt`` writes it), and so are
    the copies for other agents withdrawn with its rejection. One a newer proposal for the
    same file replaced meanwhile is marked superseded instead. The live file is not touched.
    ProposalError for an unknown proposal or one the user did not refuse."""
    finish_unfinished(store)
    row = get_proposal(store, proposal_id)
    if row.status not in ("rejected", "rolled_back"):
        raise ProposalError(
            f"proposal {proposal_id} is {row.status}: there is no refusal to lift (only a "
            "rejected or rolled-back proposal has one)"
        )
    withdrawn = f"rejected with {proposal_id}"
    members = [row] + [
        r
        for r in _rules_group(store, proposal_id)
        if row.status == "rejected"
        and r.status == "rejected"
        and (r.reason or "").startswith(withdrawn)
    ]
    done: dict[str, str] = {}
    with store.write():
        for r in members:
            # a proposal staged since for the same file's same block replaces it (another
            # project's block of a shared memory file does not); one staged before it is
            # the one replaced
            rivals = [
                p
                for p in store.proposals.staged(r.target_path)
                if p.id != r.id and block_of(p) == block_of(r)
            ]
            when = (r.created_at or "", r.night_id or 0)
            newer = [p.id for p in rivals if (p.created_at or "", p.night_id or 0) > when]
            for p in rivals:
                if p.id not in newer:
                    store.proposals.set_status(p.id, "superseded", f"superseded by {r.id}")
            if newer:
                store.proposals.set_status(
                    r.id, "superseded", f"refusal lifted; superseded by {newer[0]}"
                )
            else:
                store.proposals.set_status(r.id, "staged", "refusal lifted by the user")
            done[r.id] = "superseded" if newer else "staged"
    return RefusalLifted(
        proposal_id=proposal_id,
        status=done[proposal_id],
        was=row.status,
        copies={k: v for k, v in done.items() if k != proposal_id},
    )


#: a proposal's id as the store numbers them: ``p3``, or an agent's copy ``p3-codex``
_PROPOSAL_ID = re.compile(r"p\d+(?:-[A-Za-z0-9_]+)?")


def names_proposal(store: Store, target: str | None) -> bool:
    """Whether ``target`` (rollback's argument) names a proposal by its id rather than a
    file: shaped like one (``p3``, ``p3-codex``) and a stored proposal, or no file of that
    name here."""
    return bool(target and _PROPOSAL_ID.fullmatch(target)) and (
        store.proposals.get(str(target)) is not None or not os.path.lexists(str(target))
    )


def _rules_group(store: Store, proposal_id: str) -> list[ProposalRow]:
    """The other proposals carrying the same night's rules for other agents (the proposal
    the night trained and its agents' copies, whatever their status), not ``proposal_id``."""
    row = get_proposal(store, proposal_id)
    head = NightSummary.model_validate_json(row.summary or "{}").copy_of or proposal_id
    return [
        r
        for r in store.proposals.all()
        if r.id != proposal_id
        and (r.id == head or NightSummary.model_validate_json(r.summary or "{}").copy_of == head)
    ]


def copy_statuses(store: Store, proposal_id: str) -> dict[str, str]:
    """The other proposals carrying ``proposal_id``'s rules for other agents, by id, with
    their status now (``p3`` and its copies ``p3-codex``, …)."""
    return {r.id: r.status for r in _rules_group(store, proposal_id)}


def _adoption_of(store: Store, proposal_id: str) -> AdoptionRow:
    """The proposal's adoption a rollback undoes; ProposalError when it is not adopted, or
    when a later adoption on the same file stands on top of it (that one is undone first)."""
    row = get_proposal(store, proposal_id)
    a = store.adoptions.live_of(proposal_id)
    if a is None:
        raise ProposalError(
            f"proposal {proposal_id} is {row.status}, not adopted: nothing to roll back"
        )
    latest = store.adoptions.latest_live([a.target_path])
    if latest is not None and latest.id != a.id:
        raise ProposalError(
            f"{a.target_path} was adopted again since {proposal_id} (proposal "
            f"{latest.proposal_id}): roll that back first (`skillopt-sleep rollback "
            f"{latest.proposal_id}`); nothing was written"
        )
    return a


def _adoption_for(store: Store, target: str | None) -> AdoptionRow:
    """The adoption ``target`` names: a proposal's or copy's id (:func:`names_proposal`),
    a live file's path (its latest adoption), or None (the latest adoption of any file)."""
    if target and names_proposal(store, target):
        return _adoption_of(store, target)
    targets = None
    if target:
        given = Path(target).expanduser()
        targets = [str(given.absolute()), str(given.resolve())]
    a = store.adoptions.latest_live(targets)
    if a is None:
        raise ProposalError(f"nothing to roll back{' for ' + target if target else ''}")
    return a


def _with_others(store: Store, done: RollbackResult) -> RollbackResult:
    """``done`` with the proposals carrying its rules for other agents that stay adopted or
    staged."""
    others = _rules_group(store, done.proposal_id)
    done.still_adopted = [
        AdoptedCopy(proposal_id=r.id, target_path=r.target_path)
        for r in others
        if r.status == "adopted"
    ]
    done.still_staged = [r.id for r in others if r.status == "staged"]
    return done


def _rollback_group(
    store: Store,
    target: str | None,
    *,
    force: bool,
    settings: Settings | None,
) -> RollbackResult:
    """Roll back the proposal ``target`` names (:func:`_adoption_for`) and every adopted
    proposal carrying its rules for other agents, each restoring its own file (a proposal
    already rolled back itself still names its copies). Every member's target is checked
    against the allowed locations, and (unless ``force``) its live file against its
    adoption, first, so one bad member refuses the whole group before anything is written."""
    if target and names_proposal(store, target):
        pid = str(get_proposal(store, target).id)
    else:
        pid = _adoption_for(store, target).proposal_id
    members = [pid, *(r.id for r in _rules_group(store, pid))]
    live = [_adoption_of(store, m) for m in members if store.adoptions.live_of(m) is not None]
    if not live:
        raise ProposalError(
            f"nothing to roll back: neither {pid} nor its copies for other agents are adopted"
        )
    for c in live:
        proposal = get_proposal(store, c.proposal_id)
        if proposal.target_path != c.target_path:
            raise ProposalError(
                f"refusing the adoption's target {c.target_path}: it does not match its "
                f"proposal {c.proposal_id}'s target; nothing was written"
            )
        confine(store, proposal, c.target_path, "the adoption's target", settings)
        if not force and _hash_bytes(_read_bytes(Path(c.target_path))) != c.after_hash:
            raise ProposalError(
                f"{c.target_path} changed since {c.proposal_id} was adopted; nothing was "
                "rolled back (`rollback --all-agents --force` restores every file anyway, or "
                "roll back the others one by one by their ids)"
            )
    done: list[RollbackResult] = []
    for c in live:
        try:
            one = rollback(store, c.proposal_id, force=force, settings=settings)
        except ProposalError as exc:
            kept = ", ".join(r.proposal_id for r in done)
            raise ProposalError(
                f"{exc}" + (f" (already rolled back: {kept})" if kept else "")
            ) from None
        one.still_adopted, one.still_staged = [], []
        done.append(one)
    first, *copies = done
    first.copies_rolled_back = copies
    return _with_others(store, first)


def rollback(
    store: Store,
    target: str | None = None,
    *,
    force: bool = False,
    all_agents: bool = False,
    settings: Settings | None = None,
) -> RollbackResult:
    """Restore the file as it was before the latest (not yet rolled back) adoption.

    ``target``: a proposal's id or an agent's copy's id (``p3``, ``p3-codex``: that
    proposal's adoption), a path (the latest adoption of that file) or None (the latest
    adoption of any file). A rollback undoes one adoption in one file: the proposals
    carrying the same rules for other agents keep their status (the result's
    ``still_adopted`` and ``still_staged`` name them), unless ``all_agents``: then every
    adopted one is rolled back too, each restoring its own file (the named proposal need not
    be adopted itself any more: ``rollback p3 --all-agents`` after ``rollback p3``).
    ``settings``: as for :func:`adopt`. Raises ProposalError when there is nothing to roll
    back, the live file changed since the adoption, the target is outside the locations of the
    proposal's agent and kind (:func:`confine`), or the backup is not the one adopt made.
    """
    finish_unfinished(store)
    if all_agents:
        return _rollback_group(store, target, force=force, settings=settings)
    a = _adoption_for(store, target)
    path = Path(a.target_path)
    proposal = store.proposals.get(a.proposal_id)
    if proposal is None:
        raise ProposalError(
            f"the adoption of {path} names no stored proposal ({a.proposal_id}); nothing "
            "was written"
        )
    if proposal.target_path != a.target_path:
        raise ProposalError(
            f"refusing the adoption's target {path}: it does not match its proposal "
            f"{a.proposal_id}'s target; nothing was written"
        )
    confine(store, proposal, path, "the adoption's target", settings)
    backup = b""
    if a.existed_before:
        bpath = a.backup_path or ""
        if not bpath or not _inside(_real(bpath), _real(paths.backups_dir())):
            raise ProposalError(
                f"backup {bpath!r} is not under {paths.backups_dir()}; nothing was written"
            )
        try:
            backup = Path(bpath).read_bytes()
        except OSError as exc:
            raise ProposalError(
                f"backup {bpath} unreadable ({exc.strerror or exc}): the file as it was before "
                f"adopt cannot be restored; nothing was written (put the backup back, or edit "
                f"{path} by hand: the rules are between its skillopt-sleep markers)"
            ) from None
        if _hash_bytes(backup) != a.before_hash:
            raise ProposalError(
                f"backup {bpath} is not the file adopt saved (its hash differs); nothing was "
                "written"
            )
    live = _read_bytes(path)
    kept = ""
    gone = live is None and not a.existed_before  # what rollback would do is done already
    if _hash_bytes(live) != a.after_hash and not gone:
        if not force:
            raise ProposalError(
                f"{path} was removed since it was adopted; `rollback --force` restores the "
                "version before adopt"
                if live is None
                else f"{path} changed since it was adopted; `rollback --force` restores the old "
                "version anyway (your current file is kept in the backups folder)"
            )
        if live is not None:  # never lose what the user wrote after adopting
            kept = str(_keep_copy(live, path.name, "before-rollback"))
    if a.existed_before:
        _write(path, backup)
    removed: list[str] = []
    if not a.existed_before:
        if path.exists():
            try:
                (Path(os.path.realpath(path)) if path.is_symlink() else path).unlink()
            except OSError as exc:
                raise ProposalError(f"cannot remove {path}: {exc.strerror or exc}") from None
        # exactly the folders adopt created, and only those now empty
        removed = _remove_empty_dirs(
            [
                d
                for d in _created_dirs(store, a)
                if _inside(os.path.abspath(path), os.path.abspath(d))
                and os.path.abspath(d) != os.path.abspath(path)
            ]
        )
    store.adoptions.set_rolled_back(a.id, now_iso())
    store.proposals.set_status(a.proposal_id, "rolled_back", "rolled back by the user")
    done = store.adoptions.get(a.id)
    return _with_others(
        store,
        RollbackResult(
            proposal_id=a.proposal_id,
            target_path=a.target_path,
            rolled_back_at=(done.rolled_back_at if done else None) or now_iso(),
            restored_previous=bool(a.existed_before),
            kept_copy=kept,
            removed_dirs=removed,
            already_gone=gone,
        ),
    )
