"""``skillopt-sleep forget``: delete stored data of a project, a session or everything older
than a date, for good — sessions, messages and their full-text rows, the tasks mined from them
with their rollouts, the response caches — and replace the forgotten tasks' texts in every
proposal report (``report.json`` and ``report.md``) by ``[forgotten]``. The database is then
purged (:meth:`skillopt_sleep.store.forget.ForgetRepo.purge`): no page of it or of its WAL keeps
what was forgotten. Session files already read are not read again (their offsets are kept); to
keep a project out from now on, add it to ``[privacy] deny_projects`` or put a
``.skillopt-sleep-ignore`` file in it.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.errors import BadArgument
from skillopt_sleep.results import ForgetResult, load_report_json
from skillopt_sleep.store import Store

FORGOTTEN = "[forgotten]"


def _iso_date(value: str) -> str:
    try:
        return datetime.fromisoformat(value).isoformat()
    except ValueError:
        raise BadArgument(
            f"--before {value!r}: not a date (expected YYYY-MM-DD or an ISO 8601 time)"
        ) from None


def forget(
    store: Store,
    *,
    project: str | None = None,
    session: str | None = None,
    before: str | None = None,
    dry_run: bool = False,
    proposals_dir: Path | None = None,
) -> ForgetResult:
    """Forget what matches all of the criteria given (at least one); see the module doc."""
    if project is None and session is None and before is None:
        raise BadArgument("forget: name --project, --session or --before (nothing was deleted)")
    if project is not None:
        project = os.path.abspath(os.path.expanduser(project))
    cutoff = _iso_date(before) if before is not None else None
    sids = store.forget.session_ids(project=project, session=session, before=cutoff)
    tids = store.forget.task_ids(sids, project=project, before=cutoff)
    if session is not None and not sids:
        raise BadArgument(f"forget: no stored session {session!r} (nothing was deleted)")
    if dry_run:
        return ForgetResult(dry_run=True, sessions=len(sids), tasks=len(tids))
    with store.write():
        counts = store.forget.delete(sids, tids, before=cutoff)
    store.forget.purge()
    reports = _scrub_reports(proposals_dir or paths.proposals_dir(), set(tids))
    return ForgetResult(**counts, reports=reports)


def _scrub_reports(folder: Path, task_ids: set[str]) -> list[str]:
    """Replace the forgotten tasks' intents in every proposal report; the reports changed."""
    from skillopt_sleep.night.stage import render_markdown

    changed: list[str] = []
    if not task_ids or not folder.is_dir():
        return changed
    for report_json in sorted(folder.glob("*/report.json")):
        try:
            report = load_report_json(report_json.read_text("utf-8"), str(report_json))
        except (OSError, ValueError):
            continue
        hit = False
        for t in [*report.val_tasks, *report.test_tasks]:
            if t.task_id in task_ids and t.intent != FORGOTTEN:
                t.intent, hit = FORGOTTEN, True
        if not hit:
            continue
        diff_path = report_json.with_name("diff.patch")
        diff = diff_path.read_text("utf-8") if diff_path.is_file() else ""
        _replace(report_json, report.to_json())
        _replace(report_json.with_name("report.md"), render_markdown(report, diff))
        changed.append(report.id)
    return changed


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.forget.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
