"""Adopt, reject and roll back staged proposals. The only code that writes a user's live file.

Writes are atomic (temp file in the same folder, fsync, ``os.replace``, fsync of the folder),
keep the file's mode, and are preceded by a byte-exact backup in ``<state>/backups/<n>/``.
``adopt`` refuses when the live file changed since the proposal's base; ``rollback`` refuses
when the live file changed since the adoption. ``force=True`` overrides both (adopt then
re-applies only the proposed managed block onto the current file).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from skillopt_sleep import paths
from skillopt_sleep.errors import ProposalError
from skillopt_sleep.night.document import Document, read_live, sha256_text
from skillopt_sleep.store import Store, now_iso


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically; creates parent folders; keeps the mode.

    A symlink is written through (its target is replaced), so a link such as
    ``AGENTS.md -> CLAUDE.md`` stays a link.
    """
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
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


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes, None when absent; ProposalError when it cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ProposalError(f"cannot read {path}: {exc.strerror or exc}") from None


def _write(path: Path, data: bytes) -> None:
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise ProposalError(f"cannot write {path}: {exc.strerror or exc}; nothing was changed") from None


def _keep_copy(data: bytes, name: str, why: str) -> Path:
    """Save bytes about to be overwritten under ``<state>/backups/<why>-<time>/``."""
    import time

    folder = paths.backups_dir() / f"{why}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    _write(target, data)
    return target


def _hash_bytes(data: bytes | None) -> str:
    return "" if data is None else sha256_text(data.decode("utf-8", "surrogateescape"))


def get_proposal(store: Store, proposal_id: str) -> dict[str, Any]:
    row = store.get("proposals", proposal_id)
    if not row:
        known = [r["id"] for r in store.rows("proposals", order_by="created_at desc", limit=5)]
        hint = f"; recent: {', '.join(known)}" if known else "; there are no proposals yet"
        raise ProposalError(f"no proposal {proposal_id!r}{hint}")
    return row


def list_proposals(store: Store, status: str | None = None) -> list[dict[str, Any]]:
    """Proposal rows, newest first; ``summary`` decoded from its JSON column."""
    if status:
        rows = store.rows("proposals", "status = ?", [status], order_by="created_at desc, id desc")
    else:
        rows = store.rows("proposals", order_by="created_at desc, id desc")
    for row in rows:
        try:
            row["summary"] = json.loads(row.get("summary") or "{}")
        except json.JSONDecodeError:
            pass
    return rows


def load_report(row: dict[str, Any]) -> dict[str, Any]:
    try:
        return json.loads((Path(row["dir"]) / "report.json").read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ProposalError(f"proposal {row['id']}: report unreadable ({exc})") from None


def adopt(store: Store, proposal_id: str, *, base_hash: str | None = None,
          force: bool = False) -> dict[str, Any]:
    """Write the proposal to its target. Returns the adoption row.

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
    live = _read_bytes(target)
    live_hash = _hash_bytes(live)
    if live_hash != row["base_hash"]:
        if not force:
            raise ProposalError(
                f"{target} changed since proposal {proposal_id} was made; run "
                "`skillopt-sleep run` for a fresh proposal, or `adopt --force` to apply only "
                "its managed block onto the current file"
            )
        rules = Document.parse(new_text).rules
        new_text = Document.parse(read_live(target), new_skill=live is None).render(rules)
    # backup first, then the live write, then the record: a failed write leaves no adoption
    backup_path = str(_keep_copy(live, target.name, f"adopt-{proposal_id}")) if live is not None else ""
    _write(target, new_text.encode("utf-8"))
    adoption_id = store.insert("adoptions", {
        "proposal_id": proposal_id, "target_path": str(target), "adopted_at": now_iso(),
        "existed_before": int(live is not None), "before_hash": live_hash,
        "after_hash": sha256_text(new_text), "backup_path": backup_path, "rolled_back_at": None,
    })
    store.update("proposals", proposal_id, {"status": "adopted"})
    return store.get("adoptions", adoption_id)


def reject(store: Store, proposal_id: str, reason: str = "") -> dict[str, Any]:
    row = get_proposal(store, proposal_id)
    if row["status"] != "staged":
        raise ProposalError(f"proposal {proposal_id} is {row['status']}, not staged")
    store.update("proposals", proposal_id, {"status": "rejected", "reason": reason or "rejected by user"})
    return get_proposal(store, proposal_id)


def rollback(store: Store, target: str | None = None, *, force: bool = False) -> dict[str, Any]:
    """Restore the file as it was before the latest (not yet rolled back) adoption.

    ``target``: a path (or None for the latest adoption of any target). Raises ProposalError
    when there is nothing to roll back or the live file changed since the adoption.
    """
    where, args = "rolled_back_at is null", []
    if target:
        given = Path(target).expanduser()
        where += " and target_path in (?, ?)"
        args += [str(given.absolute()), str(given.resolve())]
    rows = store.rows("adoptions", where, args, order_by="id desc", limit=1)
    if not rows:
        raise ProposalError(f"nothing to roll back{' for ' + target if target else ''}")
    a = rows[0]
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
    elif path.exists():
        try:
            (Path(os.path.realpath(path)) if path.is_symlink() else path).unlink()
        except OSError as exc:
            raise ProposalError(f"cannot remove {path}: {exc.strerror or exc}") from None
        try:
            path.parent.rmdir()  # the managed skill folder we created, if now empty
        except OSError:
            pass
    store.update("adoptions", a["id"], {"rolled_back_at": now_iso()})
    store.update("proposals", a["proposal_id"], {"status": "rolled_back"})
    return dict(store.get("adoptions", a["id"]), kept_copy=kept)
