"""Rolling back an adoption: the file as it was before, from adopt's backup.

``rollback`` refuses when the live file changed since the adoption (``force=True``
overrides, keeping the user's current file in the backups folder), a backup outside
``<state>/backups`` or whose bytes are not the adoption's ``before_hash``; it removes only
the folders adopt created, between the target and its root, when empty.

**One adoption, one file.** ``rollback`` takes a proposal's id, an agent's copy's id
(``p3-codex``) or a path, and undoes that one adoption (never one another adoption of the same
file stands on). The proposals carrying the same rules for other agents keep their status
(each is its own adoption in its own file) and the result names those still adopted or
staged; ``all_agents`` rolls back each of them in its own file.
"""

from __future__ import annotations

import os
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.config import Settings
from skillopt_sleep.errors import ProposalError
from skillopt_sleep.proposals.adoption import finish_unfinished
from skillopt_sleep.proposals.confinement import _inside, _real, confine
from skillopt_sleep.proposals.live import (
    _hash_bytes,
    _keep_copy,
    _read_bytes,
    _remove_created,
    _write,
)
from skillopt_sleep.proposals.records import (
    _created_dirs,
    _rules_group,
    get_proposal,
    names_proposal,
)
from skillopt_sleep.results import AdoptedCopy, RollbackResult
from skillopt_sleep.store import Store, now_iso
from skillopt_sleep.store.proposals import AdoptionRow


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
    _confine_adoption(store, a, settings)
    backup = _backup(a) if a.existed_before else b""
    live = _read_bytes(path)
    kept = ""
    gone = live is None and not a.existed_before  # what rollback would do is done already
    if _hash_bytes(live) != a.after_hash and not gone:
        kept = _changed_since(path, live, force)
    removed: list[str] = []
    if a.existed_before:
        _write(path, backup)
    else:
        removed = _remove_adopted(store, a, path)
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


def _confine_adoption(store: Store, a: AdoptionRow, settings: Settings | None) -> None:
    """ProposalError unless the adoption ``a`` names a stored proposal whose target it is,
    and that target lies where the proposal's agent and kind may be written."""
    path = Path(a.target_path)
    proposal = store.proposals.get(a.proposal_id)
    if not proposal:
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


def _backup(a: AdoptionRow) -> bytes:
    """The bytes adopt saved before it wrote the adoption ``a``'s file: read from under
    ``<state>/backups`` only, and only when their hash is the adoption's ``before_hash``."""
    path = Path(a.target_path)
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
            f"backup {bpath} is not the file adopt saved (its hash differs); nothing was written"
        )
    return backup


def _changed_since(path: Path, live: bytes | None, force: bool) -> str:
    """The live file changed (or was removed) since the adoption: ProposalError unless
    ``force``; with it, what the user wrote is kept in the backups folder (its path)."""
    if not force:
        raise ProposalError(
            f"{path} was removed since it was adopted; `rollback --force` restores the "
            "version before adopt"
            if live is None
            else f"{path} changed since it was adopted; `rollback --force` restores the old "
            "version anyway (your current file is kept in the backups folder)"
        )
    if live is None:
        return ""
    return str(_keep_copy(live, path.name, "before-rollback"))  # never lose what the user wrote


def _remove_adopted(store: Store, a: AdoptionRow, path: Path) -> list[str]:
    """Remove the file the adoption ``a`` created, then exactly the folders adopt created for
    it, and only those now empty; the folders removed."""
    if path.exists():
        try:
            (Path(os.path.realpath(path)) if path.is_symlink() else path).unlink()
        except OSError as exc:
            raise ProposalError(f"cannot remove {path}: {exc.strerror or exc}") from None
    return _remove_created(path, _created_dirs(store, a))
