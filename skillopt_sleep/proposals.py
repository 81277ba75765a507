"""Adopt, reject and roll back staged proposals. The only code that writes a user's live file.

Writes are atomic (temp file in the same folder, fsync, ``os.replace``, fsync of the folder),
keep the file's mode (a new file gets the umask's default), and are preceded by a byte-exact
backup in ``<state>/backups/<n>/``. adopt records the folders it creates for a new file in
``<proposal dir>/adoption.json``; rollback removes exactly those, when empty. A live file that is
not UTF-8 text is refused before anything is written.
``adopt`` refuses when the live file changed since the proposal's base; ``rollback`` refuses
when the live file changed since the adoption. ``force=True`` overrides both (adopt then
re-applies only the proposed managed block onto the current file).
"""

from __future__ import annotations

import glob
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from skillopt_sleep import paths
from skillopt_sleep.errors import DocumentError, ProposalError
from skillopt_sleep.night.document import SKILL_NAME, Document, decode_live, sha256_text
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


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux ``/proc``)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # the only portable way to read it; restored at once
    os.umask(old)
    return old


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
    path.parent.mkdir(parents=True, exist_ok=True)
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


def report_markdown(row: dict[str, Any]) -> str:
    """The proposal's ``report.md`` as it stands now: a proposal that is no longer staged says
    so where the staged report says how to adopt it. Raises ProposalError when unreadable."""
    try:
        text = (Path(row["dir"]) / "report.md").read_text("utf-8")
    except OSError as exc:
        raise ProposalError(
            f"proposal {row['id']}: report unreadable ({exc.strerror or exc})"
        ) from None
    if row.get("status") != "staged":
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


def adopt_group(store: Store, proposal_id: str, *, force: bool = False) -> list[AdoptResult]:
    """Adopt ``proposal_id`` and every staged copy of its rules for other agents
    (:func:`agent_group`), each as :func:`adopt` does. Every member's live file is checked
    against its base first, so a stale one refuses the whole group before anything is
    written (unless ``force``). ProposalError says which member failed and what was adopted."""
    group = agent_group(store, proposal_id)
    if not force:
        for pid in group:
            row = get_proposal(store, pid)
            if row["status"] != "staged":
                raise ProposalError(f"proposal {pid} is {row['status']}, not staged")
            live = _read_bytes(Path(row["target_path"]))
            try:
                text = None if live is None else live.decode("utf-8")
            except UnicodeDecodeError:
                text = ""  # adopt says why
            if sha256_text(text) != row["base_hash"]:
                raise ProposalError(
                    f"{row['target_path']} changed since proposal {pid} was made; nothing was "
                    "adopted (run a new night, or adopt the others one by one)"
                )
    done: list[AdoptResult] = []
    for pid in group:
        try:
            done.append(adopt(store, pid, force=force))
        except ProposalError as exc:
            kept = ", ".join(a.proposal_id for a in done)
            raise ProposalError(
                f"{exc}" + (f" (already adopted: {kept}; undo with rollback)" if kept else "")
            ) from None
    return done


def adopt(
    store: Store, proposal_id: str, *, base_hash: str | None = None, force: bool = False
) -> AdoptResult:
    """Write the proposal to its target. Returns the adoption.

    ``base_hash`` (optional, from an agent reviewing the proposal) must equal the proposal's.
    Raises ProposalError for an unknown / non-staged proposal or a stale base.
    """
    row = get_proposal(store, proposal_id)
    if row["status"] != "staged":
        raise ProposalError(f"proposal {proposal_id} is {row['status']}, not staged")
    if base_hash is not None and base_hash != row["base_hash"]:
        raise ProposalError(
            f"proposal {proposal_id}: base_hash does not match (expected {row['base_hash'][:12] or 'absent'})"
        )
    target = Path(row["target_path"])
    staged = Path(row["dir"]) / "document"
    try:
        new_text = staged.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ProposalError(f"proposal {proposal_id}: staged document unreadable ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ProposalError(
            f"proposal {proposal_id}: staged document is not UTF-8 ({exc.reason} "
            f"at offset {exc.start})"
        ) from None
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
        if not force:
            raise ProposalError(
                f"{target} changed since proposal {proposal_id} was made; run "
                "`skillopt-sleep run` for a fresh proposal, or `adopt --force` to apply only "
                "its managed block onto the current file"
            )
        section = NightSummary.model_validate_json(row.get("summary") or "{}").section
        skill = target.name == "SKILL.md"
        proposed = Document.parse(new_text, new_skill=skill, section=section)
        current = Document.parse(live_text, new_skill=live is None or skill, section=section)
        if proposed.description is not None and current.description is not None:
            current.description = proposed.description  # a skill's trained description too
        new_text = current.render(proposed.rules)
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
        _write(target, new_text.encode("utf-8"))
    except BaseException:
        if adoption_id is not None:
            with store.write():
                store.adoptions.delete(adoption_id)
                store.proposals.set_status(proposal_id, "staged")
        _remove_empty_dirs(created)
        record.unlink(missing_ok=True)
        raise
    return _adoption(store.adoptions.get(adoption_id) or {})


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


def rollback(store: Store, target: str | None = None, *, force: bool = False) -> RollbackResult:
    """Restore the file as it was before the latest (not yet rolled back) adoption.

    ``target``: a path (or None for the latest adoption of any target). Raises ProposalError
    when there is nothing to roll back or the live file changed since the adoption.
    """
    targets = None
    if target:
        given = Path(target).expanduser()
        targets = [str(given.absolute()), str(given.resolve())]
    a = store.adoptions.latest_live(targets)
    if a is None:
        raise ProposalError(f"nothing to roll back{' for ' + target if target else ''}")
    path = Path(a["target_path"])
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
        try:
            data = Path(a["backup_path"]).read_bytes()
        except OSError as exc:
            raise ProposalError(f"backup {a['backup_path']} unreadable ({exc})") from None
        _write(path, data)
    removed: list[str] = []
    if not a["existed_before"]:
        if path.exists():
            try:
                (Path(os.path.realpath(path)) if path.is_symlink() else path).unlink()
            except OSError as exc:
                raise ProposalError(f"cannot remove {path}: {exc.strerror or exc}") from None
        # exactly the folders adopt created, and only those now empty
        removed = _remove_empty_dirs(_created_dirs(store, a))
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
