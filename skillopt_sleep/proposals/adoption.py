"""Adopting a staged proposal: the checks, then the live write (:mod:`.live`).

``adopt`` refuses when the live file changed since the proposal's base; ``force=True``
overrides (it then re-applies only the proposed managed block onto the current file). A live
file changed only in *other* managed blocks (another project's block of a shared memory file,
adopted since) is no stale base: adopt applies the proposal's own block onto it, the others
kept. A live file that is not UTF-8 text is refused before anything is written. adopt also
refuses a staged document or report that does not match the hashes its row recorded
(``new_hash``, ``base_hash``, ``target_path``), a target outside the locations of the
proposal's agent and kind (:mod:`.confinement`), and a staged document that adds a rule the
poisoning screen flags (:mod:`skillopt_sleep.night.screen`) unless ``allow_flagged``. It
records the folders it creates for a new file in ``<proposal dir>/adoption.json``; the
recovery of a killed adopt (:func:`finish_unfinished`) leaves an adoption whose target fails
the confinement checks alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.config import Settings
from skillopt_sleep.delivery.document import (
    Document,
    block_hash,
    decode_live,
    outside_blocks,
    same_rule,
    sha256_text,
)
from skillopt_sleep.errors import DocumentError, ProposalError
from skillopt_sleep.night.screen import document_flags
from skillopt_sleep.proposals.confinement import _inside, _real, _report_data, confine
from skillopt_sleep.proposals.live import (
    _hash_bytes,
    _keep_copy,
    _missing_dirs,
    _read_bytes,
    _remove_created,
    _remove_empty_dirs,
    _write,
)
from skillopt_sleep.proposals.records import (
    ADOPTABLE,
    ADOPTING,
    ADOPTION_RECORD,
    _adoption,
    _created_dirs,
    agent_group,
    get_proposal,
    load_report,
)
from skillopt_sleep.results import AdoptResult, NightSummary
from skillopt_sleep.store import Store, now_iso
from skillopt_sleep.store.proposals import ProposalRow


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
    rules: Collection[str] | None = None,
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
                adopt(
                    store,
                    pid,
                    force=force,
                    allow_flagged=allow_flagged,
                    settings=settings,
                    rules=rules,
                )
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
    rules: Collection[str] | None = None,
) -> AdoptResult:
    """Write the proposal to its target. Returns the adoption.

    ``rules``: adopt only these of its rules (texts, :func:`chosen_text`; None: all but
    those the user refused one by one).

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
    row = _adoptable(store, proposal_id, base_hash, settings)
    target = Path(row.target_path)
    new_text = _staged_text(row)
    new_text, left_out = chosen_text(store, row, new_text, rules)
    live, live_text = _live(target)
    if sha256_text(live_text) != row.base_hash:
        new_text = _onto_changed(row, target, live is None, live_text, new_text, force)
    flags = document_flags(live_text, new_text)
    if flags and not allow_flagged:
        first = flags[0]
        raise ProposalError(
            f"proposal {proposal_id} adds {len(flags)} flagged text(s), e.g. {first.where} "
            f"{first.text[:120]!r} ({first.reason}); nothing was written (review report.md; "
            "`adopt --allow-flagged` writes it anyway)"
        )
    adoption_id = _write_adopted(store, row, live, live_text, new_text, left_out)
    adopted = store.adoptions.get(adoption_id)
    assert adopted is not None
    done = _adoption(adopted)
    done.allowed_flagged = [f.text for f in flags]
    done.left_out = left_out
    return done


def chosen_text(
    store: Store, row: ProposalRow, new_text: str, rules: Collection[str] | None
) -> tuple[str, list[str]]:
    """The document to write when only some of the proposal's rules are adopted: ``rules``
    (the rule texts chosen; None: every one) less those the user refused one by one; the
    staged document itself when that is all of them. A rule change left out stays as in the
    base (an add not made, a removed rule kept). Returns the text and the rules left out."""
    changes = load_report(row).rules
    refused = store.edits.rules_refused(row.id)
    chosen_refused = [
        c for c in changes if c.rule in refused and rules is not None and c.rule in rules
    ]
    if chosen_refused:
        c = chosen_refused[0]
        raise ProposalError(
            f"rule {c.n} of {row.id} is refused"
            + (f" ({refused[c.rule]})" if refused[c.rule] else "")
            + f"; nothing was written (`skillopt-sleep reject {row.id} --rule {c.n} --undo` "
            "takes the refusal back)"
        )
    out = [
        c
        for c in changes
        if c.rule in refused or (rules is not None and not any(same_rule(c.rule, r) for r in rules))
    ]
    if not out:
        return new_text, []
    if changes and len(out) == len(changes):
        raise ProposalError(
            f"proposal {row.id}: every rule is refused or left out, so there is nothing to "
            "adopt; nothing was written"
        )
    section = NightSummary.model_validate_json(row.summary or "{}").section
    skill = Path(row.target_path).name == "SKILL.md"
    doc = Document.parse(new_text, new_skill=skill, section=section)
    dropped = {c.rule for c in out if c.change == "adds"}
    kept = [c.rule for c in out if c.change == "removes"]
    return doc.render([r for r in doc.rules if r not in dropped] + kept), [c.rule for c in out]


def _adoptable(
    store: Store, proposal_id: str, base_hash: str | None, settings: Settings | None
) -> ProposalRow:
    """The row of a proposal adopt may write: staged or rolled back, of the ``base_hash``
    the caller reviewed (if given), its target where its agent and kind may be written and
    its folder under the proposals folder; ProposalError otherwise."""
    row = get_proposal(store, proposal_id)
    if row.status not in ADOPTABLE:
        raise ProposalError(f"proposal {proposal_id} is {row.status}, not staged")
    if base_hash is not None and base_hash != row.base_hash:
        raise ProposalError(
            f"proposal {proposal_id}: base_hash does not match (expected {row.base_hash[:12] or 'absent'})"
        )
    confine(store, row, row.target_path, f"proposal {proposal_id}'s target", settings)
    folder = Path(row.dir)
    if not _inside(_real(folder), _real(paths.proposals_dir())):
        raise ProposalError(
            f"proposal {proposal_id}: its folder {folder} is not under "
            f"{paths.proposals_dir()}; nothing was written"
        )
    return row


def _staged_text(row: ProposalRow) -> str:
    """The staged document, checked against what its row recorded (:func:`_verify_staged`)."""
    proposal_id = row.id
    try:
        new_text = (Path(row.dir) / "document").read_bytes().decode("utf-8")
    except OSError as exc:
        raise ProposalError(f"proposal {proposal_id}: staged document unreadable ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ProposalError(
            f"proposal {proposal_id}: staged document is not UTF-8 ({exc.reason} "
            f"at offset {exc.start})"
        ) from None
    _verify_staged(row, new_text)
    return new_text


def _live(target: Path) -> tuple[bytes | None, str | None]:
    """The live file's bytes and text (None, None when absent); ProposalError when it is not
    UTF-8 text."""
    live = _read_bytes(target)
    try:  # decoded from the bytes just read (not read again), so the hash and text agree
        return live, (
            None
            if live is None
            else decode_live(
                live, target, fix="convert it to UTF-8, then run a new night; nothing was changed"
            )
        )
    except DocumentError as exc:
        raise ProposalError(str(exc)) from None


def _onto_changed(
    row: ProposalRow,
    target: Path,
    absent: bool,
    live_text: str | None,
    new_text: str,
    force: bool,
) -> str:
    """The document to write over a live file changed since the proposal's base: the
    proposal's block applied onto it (``force``, or a change only in other managed blocks);
    ProposalError otherwise."""
    section = NightSummary.model_validate_json(row.summary or "{}").section
    if not force and not _other_blocks_only(row, live_text, new_text):
        raise ProposalError(
            f"{target} changed since proposal {row.id} was made; run "
            "`skillopt-sleep run` for a fresh proposal, or `adopt --force` to apply only "
            "its managed block onto the current file"
        )
    skill = target.name == "SKILL.md"
    proposed = Document.parse(new_text, new_skill=skill, section=section)
    current = Document.parse(live_text, new_skill=absent or skill, section=section)
    if proposed.description is not None and current.description is not None:
        current.description = proposed.description  # a skill's trained description too
    return current.render(proposed.rules)


def _write_adopted(
    store: Store,
    row: ProposalRow,
    live: bytes | None,
    live_text: str | None,
    new_text: str,
    left_out: list[str] | None = None,
) -> int:
    """Write ``new_text`` to the proposal's target; the adoption's id. First the folders the
    write creates are recorded (:data:`ADOPTION_RECORD`, so that rollback removes exactly
    them), then the backup is kept, then the adoption is recorded, then the live file is
    written: a process killed at any point leaves either no change or a change `rollback`
    knows (a failed write is undone here)."""
    proposal_id, target, folder = row.id, Path(row.target_path), Path(row.dir)
    written = Path(os.path.realpath(target)) if target.is_symlink() else target
    created = _missing_dirs(written)
    record = folder / ADOPTION_RECORD
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
                before_hash=sha256_text(live_text),
                after_hash=sha256_text(new_text),
                backup_path=backup_path,
                rolled_back_at=None,
                left_out=json.dumps(left_out or []),
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
    return adoption_id


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
                _remove_created(target, _created_dirs(store, a))
                undone.append(pid)
        marker.unlink(missing_ok=True)
    return undone
