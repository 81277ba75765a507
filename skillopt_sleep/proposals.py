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

**Confinement.** Neither trusts a path the database or a proposal folder names: every target
is checked against :class:`Roots`, the locations the agent registry allows
(:mod:`skillopt_sleep.agents`) — each agent's user memory files and managed skill, the project
memory files of the configured project and of the project the proposal's night ran for, and
the configured ``document.path`` (a ``path`` document is allowed because, and only while, the
config names it). A target that resolves elsewhere (a symlinked folder or a link to a file
outside them) is refused before anything is written, whatever ``force`` says. adopt also
refuses a staged document or report that does not match the hashes its row recorded
(``new_hash``, ``base_hash``, ``target_path``); rollback refuses a backup outside
``<state>/backups`` or whose bytes are not the adoption's ``before_hash``, and removes only
folders between the target and its root. A staged document that adds a rule the poisoning
screen flags (:mod:`skillopt_sleep.night.screen`) is adopted only with ``allow_flagged``.
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
from skillopt_sleep.errors import DocumentError, ProposalError, SkilloptError
from skillopt_sleep.night.document import (
    SKILL_NAME,
    Document,
    block_hash,
    decode_live,
    outside_blocks,
    sha256_text,
)
from skillopt_sleep.night.screen import document_flags
from skillopt_sleep.results import (
    AdoptResult,
    NightSummary,
    ProposalReport,
    RejectResult,
    RollbackResult,
    load_report_json,
)
from skillopt_sleep.store import Store, now_iso

ADOPTION_RECORD = "adoption.json"  # in the proposal's folder: what adopt created (folders)
#: in the proposal's folder from the moment adopt records the adoption until the live file is
#: written: a process killed in between leaves it, and :func:`finish_unfinished` settles it
ADOPTING = "adopting.json"


# ------------------------------------------------------------------ confinement
def _real(path: Path | str) -> str:
    return os.path.realpath(path)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class Roots:
    """The live files adopt and rollback may write: ``(file, root)`` pairs, each file inside
    its root (an agent's home folder, a project folder, a configured document's folder)."""

    files: tuple[tuple[Path, Path], ...]

    def check(self, target: Path | str, what: str = "the target") -> Path:
        """The root ``target`` is allowed under; ProposalError (one line, nothing written)
        when it is none of the allowed files, or resolves (through a symlinked folder or a
        link) to a file that is none of them inside its own root."""
        given = Path(os.path.abspath(target))
        spelled = {str(given), os.path.join(_real(given.parent), given.name)}
        match = [
            (f, root)
            for f, root in self.files
            if {str(f), os.path.join(_real(f.parent), f.name)} & spelled
        ]
        if not match:
            raise ProposalError(
                f"refusing {what} {given}: not a location skillopt-sleep writes (an agent's "
                "memory file or managed skill, a memory file of the configured project, or the "
                "configured document.path); nothing was written"
            )
        real = _real(given)
        confined = {_real(f) for f, root in self.files if _inside(_real(f), _real(root))}
        if real not in confined:
            raise ProposalError(
                f"refusing {what} {given}: it resolves to {real} (a symlink leaves the "
                "locations skillopt-sleep writes); nothing was written"
            )
        if os.path.lexists(real) and not os.path.isfile(real):
            raise ProposalError(f"refusing {what} {given}: not a regular file; nothing was written")
        return match[0][1]


def roots(
    settings: Settings | None = None,
    *,
    projects: Iterable[str | Path] = (),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Roots:
    """The :class:`Roots` for ``settings`` (None: the user's config as it is now) in ``env`` /
    ``home``, with the project memory files of ``projects`` too (the projects the proposals'
    nights ran for)."""
    if settings is None:
        from skillopt_sleep.config import load_settings

        try:
            settings = load_settings(None)
        except SkilloptError:  # a broken config: only the registry's user-level locations
            settings = None
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    files: list[tuple[Path, Path]] = []
    for agent in agents.AGENTS:
        base = agent.home(env, home)
        files += [(Path(os.path.abspath(f)), base) for f in agent.user_memory_files(env, home)]
        skills = agent.skills_dir(env, home)
        if skills is not None:
            files.append((Path(os.path.abspath(skills / SKILL_NAME / "SKILL.md")), base))
    folders = [str(p) for p in projects if p]
    if settings is not None and settings.project is not None:
        folders.append(str(settings.project))
    for folder in dict.fromkeys(folders):
        project = Path(os.path.abspath(Path(folder).expanduser()))
        if project == Path(project.anchor) or project == Path(os.path.abspath(home)):
            continue  # a whole drive or the home folder is no project
        names = {rel for a in agents.AGENTS for rel in a.project_memory} | {
            "CLAUDE.md",
            "AGENTS.md",
        }
        for variant in dict.fromkeys([project, Path(_real(project))]):
            files += [(variant / rel, variant) for rel in sorted(names)]
    if settings is not None and settings.document.kind == "path" and settings.document.path:
        doc = settings.document.path.expanduser().resolve()
        files.append((doc, doc.parent))
    return Roots(tuple(files))


def _roots_for(
    store: Store,
    rows: Iterable[dict[str, Any]],
    given: Roots | None,
    settings: Settings | None = None,
) -> Roots:
    """``given``, or the roots of ``settings`` (None: the user's config as it is now) with
    the projects the nights of the proposals ``rows`` ran for."""
    if given is not None:
        return given
    projects = []
    for row in rows:
        night = store.nights.get(int(row.get("night_id") or 0)) if row else None
        if night and night.get("project"):
            projects.append(night["project"])
    return roots(settings, projects=projects)


def check_target(store: Store, target: str, settings: Settings | None = None) -> None:
    """ProposalError unless ``target`` (a path some proposal names) lies where adopt may
    write (:class:`Roots` of ``settings`` and the nights of the proposals naming it): what
    reads a managed document for an agent (MCP ``get_skill``) reads no other file."""
    rows = [r for r in store.proposals.all() if r.get("target_path") == target]
    _roots_for(store, rows, None, settings).check(target, "the document")


def _verify_staged(row: dict[str, Any], text: str) -> None:
    """ProposalError unless the staged document ``text`` and the proposal's report.json are
    what the row recorded (its ``new_hash``, ``base_hash`` and ``target_path``)."""
    pid = row["id"]
    if sha256_text(text) != (row.get("new_hash") or ""):
        raise ProposalError(
            f"proposal {pid}: the staged document does not match its recorded hash (it was "
            "changed after the night staged it); nothing was written"
        )
    try:
        report = json.loads((Path(row["dir"]) / "report.json").read_text("utf-8"))
    except (OSError, ValueError):
        report = None
    if not isinstance(report, dict) or (
        report.get("new_hash"),
        report.get("base_hash"),
        report.get("target"),
    ) != (row.get("new_hash"), row.get("base_hash"), row.get("target_path")):
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
    creating it would give it (``0o666 & ~umask``), not the temp file's private 0600.
    A symlink is written through (its target is replaced), so a link such as
    ``AGENTS.md -> CLAUDE.md`` stays a link.
    """
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    paths.make_user_dirs(path.parent)
    if path.exists():
        mode = path.stat().st_mode & 0o7777
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


def get_proposal(store: Store, proposal_id: str) -> dict[str, Any]:
    row = store.proposals.get(proposal_id)
    if not row:
        known = [r["id"] for r in store.proposals.all(limit=5)]
        hint = f"; recent: {', '.join(known)}" if known else "; there are no proposals yet"
        raise ProposalError(f"no proposal {proposal_id!r}{hint}")
    return row


def list_proposals(store: Store, status: str | None = None) -> list[dict[str, Any]]:
    """Proposal rows, newest first; ``summary`` decoded from its JSON column."""
    rows = store.proposals.all(status)
    for row in rows:
        try:
            row["summary"] = json.loads(row.get("summary") or "{}")
        except json.JSONDecodeError:
            pass
    return rows


def load_report(row: dict[str, Any]) -> ProposalReport:
    """The proposal's ``report.json``, typed. Raises ProposalError (one line) when it is
    missing, unreadable or not a report this version reads."""
    where = f"proposal {row['id']}: report.json"
    try:
        text = (Path(row["dir"]) / "report.json").read_text("utf-8")
    except OSError as exc:
        raise ProposalError(f"proposal {row['id']}: report unreadable ({exc})") from None
    try:
        return load_report_json(text, where)
    except ValueError as exc:
        raise ProposalError(str(exc)) from None


#: the statuses a proposal can be adopted from: staged, or rolled back (the user undid it and
#: now asks for it again; a night never stages a rolled-back document again by itself)
ADOPTABLE = ("staged", "rolled_back")


def report_markdown(row: dict[str, Any]) -> str:
    """The proposal's ``report.md`` as it stands now: a proposal that is no longer staged says
    so where the staged report says how to adopt it. Raises ProposalError when unreadable."""
    try:
        text = (Path(row["dir"]) / "report.md").read_text("utf-8")
    except OSError as exc:
        raise ProposalError(
            f"proposal {row['id']}: report unreadable ({exc.strerror or exc})"
        ) from None
    if row.get("status") not in ADOPTABLE:
        why = f" ({row['reason']})" if row.get("reason") else ""
        text = re.sub(
            r"(?m)^Adopt with `skillopt-sleep adopt [^\n]*$",
            f"This proposal is {row.get('status')}{why}: it can no longer be adopted.",
            text,
            count=1,
        )
    return text


def agent_group(store: Store, proposal_id: str) -> list[str]:
    """The staged proposals that carry the same night's rules for different agents (the
    proposal the night trained and its agents' copies, :mod:`skillopt_sleep.night.copies`,
    including copies a later night made of it), ``proposal_id``'s own first. ProposalError
    for an unknown proposal."""
    row = get_proposal(store, proposal_id)
    head = NightSummary.model_validate_json(row.get("summary") or "{}").copy_of or proposal_id
    staged = [r for r in store.proposals.all("staged") if r["id"] != proposal_id]
    members = [
        r["id"]
        for r in staged
        if r["id"] == head
        or NightSummary.model_validate_json(r.get("summary") or "{}").copy_of == head
    ]
    return [proposal_id, *members]


def _withdraw_copies(store: Store, proposal_id: str, why: str) -> list[str]:
    """Reject the staged copies of ``proposal_id``'s rules for other agents (not the proposal
    itself, and nothing when it is itself a copy); their ids."""
    row = get_proposal(store, proposal_id)
    if NightSummary.model_validate_json(row.get("summary") or "{}").copy_for:
        return []
    copies = agent_group(store, proposal_id)[1:]
    for pid in copies:
        store.proposals.set_status(pid, "rejected", why)
    return copies


def _other_blocks_only(row: dict[str, Any], live: str | None, new: str | None = None) -> bool:
    """Whether the live text ``live`` differs from the proposal's base only in *other*
    managed blocks (another project's proposal adopted since): its own block (the hash its
    night recorded) and the user's own text (as in the staged document ``new``, read from the
    proposal's folder when None) are as the night saw them, so its block applies as is."""
    try:
        summary = NightSummary.model_validate_json(row.get("summary") or "{}")
    except ValueError:
        return False
    if summary.block_hash is None or block_hash(live, summary.section) != summary.block_hash:
        return False
    if new is None:
        try:
            new = (Path(row["dir"]) / "document").read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return False
    return outside_blocks(live) == outside_blocks(new)


def adopt_group(
    store: Store,
    proposal_id: str,
    *,
    force: bool = False,
    allow_flagged: bool = False,
    where: Roots | None = None,
    settings: Settings | None = None,
) -> list[AdoptResult]:
    """Adopt ``proposal_id`` and every staged copy of its rules for other agents
    (:func:`agent_group`), each as :func:`adopt` does. Every member's target is checked
    against the allowed locations, and (unless ``force``) its live file against its base,
    first, so one bad member refuses the whole group before anything is written.
    ProposalError says which member failed and what was adopted."""
    finish_unfinished(store)
    group = agent_group(store, proposal_id)
    rows = [get_proposal(store, pid) for pid in group]
    where = _roots_for(store, rows, where, settings)
    for row in rows:
        where.check(row["target_path"], f"proposal {row['id']}'s target")
    if not force:
        for pid in group:
            row = get_proposal(store, pid)
            if row["status"] not in ADOPTABLE:
                raise ProposalError(f"proposal {pid} is {row['status']}, not staged")
            live = _read_bytes(Path(row["target_path"]))
            try:
                text = None if live is None else live.decode("utf-8")
            except UnicodeDecodeError:
                text = ""  # adopt says why
            if sha256_text(text) != row["base_hash"] and not _other_blocks_only(row, text):
                raise ProposalError(
                    f"{row['target_path']} changed since proposal {pid} was made; nothing was "
                    "adopted (run a new night, or adopt the others one by one)"
                )
    done: list[AdoptResult] = []
    for pid in group:
        try:
            done.append(adopt(store, pid, force=force, allow_flagged=allow_flagged, where=where))
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
    where: Roots | None = None,
    settings: Settings | None = None,
) -> AdoptResult:
    """Write the proposal to its target. Returns the adoption.

    ``base_hash`` (optional, from an agent reviewing the proposal) must equal the proposal's.
    ``allow_flagged``: write a document that adds rules the poisoning screen flags (listed in
    the result's ``allowed_flagged``). ``where``: the allowed locations (default
    :func:`roots` of ``settings``, None: the user's config, and the proposal's night). Raises ProposalError for an
    unknown proposal or one neither staged nor rolled back (:data:`ADOPTABLE`), a
    stale base, a target outside the allowed locations, a
    staged document or record that does not match its hashes, or a flagged rule.
    """
    finish_unfinished(store)
    row = get_proposal(store, proposal_id)
    if row["status"] not in ADOPTABLE:
        raise ProposalError(f"proposal {proposal_id} is {row['status']}, not staged")
    if base_hash is not None and base_hash != row["base_hash"]:
        raise ProposalError(
            f"proposal {proposal_id}: base_hash does not match (expected {row['base_hash'][:12] or 'absent'})"
        )
    where = _roots_for(store, [row], where, settings)
    where.check(row["target_path"], f"proposal {proposal_id}'s target")
    target = Path(row["target_path"])
    folder = Path(row["dir"])
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
    if live_hash != row["base_hash"]:
        section = NightSummary.model_validate_json(row.get("summary") or "{}").section
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
    record = Path(row["dir"]) / ADOPTION_RECORD
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
            store.proposals.set_status(proposal_id, "adopted")
            # written before the commit: a kill between the commit and the live write
            # leaves it, and the next adopt or rollback undoes the record
            marker = {"adoption_id": adoption_id, "previous_status": row["status"]}
            _write(folder / ADOPTING, json.dumps({"proposal_id": proposal_id, **marker}).encode())
        _write(target, new_text.encode("utf-8"))
        (folder / ADOPTING).unlink(missing_ok=True)
    except BaseException:
        if adoption_id is not None:
            with store.write():
                store.adoptions.delete(adoption_id)
                store.proposals.set_status(proposal_id, row["status"])
        _remove_empty_dirs(created)
        record.unlink(missing_ok=True)
        (folder / ADOPTING).unlink(missing_ok=True)
        raise
    done = _adoption(store.adoptions.get(adoption_id) or {})
    done.allowed_flagged = [f.text for f in flags]
    return done


def finish_unfinished(store: Store) -> list[str]:
    """Settle adoptions an adopt killed mid-way left (:data:`ADOPTING` in a proposal's
    folder): recorded but the live file still as it was before (its hash is the adoption's
    ``before_hash``) → the record is undone and the proposal is as it was (staged or rolled
    back); the live file written (or changed since) → the adoption stands. Killed before the
    record was committed → nothing to undo. Returns the proposals whose adoption was undone."""
    undone: list[str] = []
    for marker in sorted(paths.proposals_dir().glob(f"*/{ADOPTING}")):
        try:
            data = json.loads(marker.read_text("utf-8"))
            pid, aid = str(data["proposal_id"]), int(data["adoption_id"])
        except (OSError, ValueError, KeyError, TypeError):
            marker.unlink(missing_ok=True)
            continue
        a = store.adoptions.get(aid)
        proposal = store.proposals.get(pid) or {}
        if (
            a is not None
            and a["proposal_id"] == pid
            and a["rolled_back_at"] is None
            and proposal.get("status") == "adopted"
            and Path(proposal.get("dir") or "") == marker.parent
        ):
            target = Path(a["target_path"])
            live = _hash_bytes(_read_bytes(target))
            if live != a["after_hash"] and live == a["before_hash"]:
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


def _adoption(row: dict[str, Any]) -> AdoptResult:
    return AdoptResult(
        proposal_id=row["proposal_id"],
        target_path=row["target_path"],
        adopted_at=row["adopted_at"],
        backup_path=row.get("backup_path") or "",
        before_hash=row.get("before_hash") or "",
        after_hash=row.get("after_hash") or "",
        existed_before=bool(row.get("existed_before")),
    )


def _created_dirs(store: Store, adoption: dict[str, Any]) -> list[str]:
    """The folders ``adoption`` created (deepest first), from the record adopt left in the
    proposal's folder. Without one (an adoption made by an older version) only the managed
    skill folder right above the file counts, as it did then."""
    folder = (store.proposals.get(adoption["proposal_id"]) or {}).get("dir")
    if folder:
        try:
            data = json.loads((Path(folder) / ADOPTION_RECORD).read_text("utf-8"))
            if data.get("target_path") == adoption["target_path"]:
                return [str(d) for d in data.get("created_dirs") or []]
        except (OSError, ValueError, AttributeError):
            pass
    parent = Path(adoption["target_path"]).parent
    return [str(parent)] if parent.name == SKILL_NAME else []


def reject(store: Store, proposal_id: str, reason: str = "") -> RejectResult:
    """Discard a staged proposal (the live file is not touched). Raises ProposalError for an
    unknown or no longer staged proposal."""
    finish_unfinished(store)
    row = get_proposal(store, proposal_id)
    if row["status"] != "staged":
        raise ProposalError(f"proposal {proposal_id} is {row['status']}, not staged")
    store.proposals.set_status(proposal_id, "rejected", reason or "rejected by user")
    withdrawn = _withdraw_copies(
        store, proposal_id, f"rejected with {proposal_id}" + (f": {reason}" if reason else "")
    )
    row = get_proposal(store, proposal_id)
    return RejectResult(
        proposal_id=row["id"],
        status=row["status"],
        reason=row["reason"] or "",
        withdrawn=withdrawn,
    )


def rollback(
    store: Store,
    target: str | None = None,
    *,
    force: bool = False,
    where: Roots | None = None,
    settings: Settings | None = None,
) -> RollbackResult:
    """Restore the file as it was before the latest (not yet rolled back) adoption.

    ``target``: a path (or None for the latest adoption of any target). ``where``: the
    allowed locations (default :func:`roots` of the current config and the proposal's night).
    Raises ProposalError when there is nothing to roll back, the live file changed since the
    adoption, the target is outside the allowed locations, or the backup is not the one
    adopt made.
    """
    finish_unfinished(store)
    targets = None
    if target:
        given = Path(target).expanduser()
        targets = [str(given.absolute()), str(given.resolve())]
    a = store.adoptions.latest_live(targets)
    if a is None:
        raise ProposalError(f"nothing to roll back{' for ' + target if target else ''}")
    path = Path(a["target_path"])
    proposal = store.proposals.get(a["proposal_id"]) or {}
    _roots_for(store, [proposal], where, settings).check(path, "the adoption's target")
    if proposal.get("target_path") != a["target_path"]:
        raise ProposalError(
            f"the adoption of {path} does not match its proposal {a['proposal_id']}'s target; "
            "nothing was written"
        )
    backup = b""
    if a["existed_before"]:
        bpath = a["backup_path"] or ""
        if not bpath or not _inside(_real(bpath), _real(paths.backups_dir())):
            raise ProposalError(
                f"backup {bpath!r} is not under {paths.backups_dir()}; nothing was written"
            )
        try:
            backup = Path(bpath).read_bytes()
        except OSError as exc:
            raise ProposalError(f"backup {bpath} unreadable ({exc})") from None
        if _hash_bytes(backup) != a["before_hash"]:
            raise ProposalError(
                f"backup {bpath} is not the file adopt saved (its hash differs); nothing was "
                "written"
            )
    live = _read_bytes(path)
    kept = ""
    if _hash_bytes(live) != a["after_hash"]:
        if not force:
            raise ProposalError(
                f"{path} changed since it was adopted; `rollback --force` restores the old "
                "version anyway (your current file is kept in the backups folder)"
            )
        if live is not None:  # never lose what the user wrote after adopting
            kept = str(_keep_copy(live, path.name, "before-rollback"))
    if a["existed_before"]:
        _write(path, backup)
    removed: list[str] = []
    if not a["existed_before"]:
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
    store.adoptions.set_rolled_back(a["id"], now_iso())
    store.proposals.set_status(a["proposal_id"], "rolled_back", "rolled back by the user")
    withdrawn = _withdraw_copies(
        store, a["proposal_id"], f"withdrawn: the user rolled back {a['proposal_id']}"
    )
    done = store.adoptions.get(a["id"]) or {}
    return RollbackResult(
        proposal_id=a["proposal_id"],
        target_path=a["target_path"],
        rolled_back_at=done.get("rolled_back_at") or now_iso(),
        restored_previous=bool(a["existed_before"]),
        kept_copy=kept,
        removed_dirs=removed,
        withdrawn=withdrawn,
    )
