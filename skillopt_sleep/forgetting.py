"""``skillopt-sleep forget``: delete stored data of a project, a session or everything older
than a date, for good — sessions, messages and their full-text rows, the tasks mined from them
with their rollouts, the response caches — and replace what was forgotten by ``[forgotten]``
wherever a night quoted it: the forgotten tasks' intents in every proposal report
(``report.json`` and ``report.md``), and in those reports, the edits' rule texts and
rationales, the nights' summaries and errors and the proposals' reasons, any phrase the
forgotten rows held whole (an intent, an occurrence's prompt, a correction, a title, a user
prompt) and any word of theirs no remaining message holds (:class:`Scrubber`); the outbox
forgets the text of every call that sent any of it. A proposal's staged ``document`` and
``diff.patch`` and the live files are the user's documents and are left as they are (a rule
that quotes a forgotten word stays until the proposal is rejected or the rule removed). The database is then
purged (:meth:`skillopt_sleep.store.forget.ForgetRepo.purge`): no page of it or of its WAL keeps
what was forgotten. Session files already read are not read again (their offsets are kept); to
keep a project out from now on, add it to ``[privacy] deny_projects`` or put a
``.skillopt-sleep-ignore`` file in it.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from skillopt_sleep import paths
from skillopt_sleep.delivery.document import sha256_text
from skillopt_sleep.errors import BadArgument
from skillopt_sleep.files import atomic_write
from skillopt_sleep.results import ForgetResult, load_report_json
from skillopt_sleep.store import Store

FORGOTTEN = "[forgotten]"
#: a word a forgotten text may be quoted by: 5 or more letters, digits or ``_``, a letter among
#: them
_WORD = re.compile(r"(?<![\w])(?=\w*[^\W\d_])\w{5,}(?![\w])")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


class Scrubber:
    """Replaces forgotten text by ``[forgotten]``: ``phrases`` (8 characters or more, compared
    ignoring case and trailing punctuation) whole, then ``words`` one by one."""

    def __init__(self, phrases: list[str], words: set[str]):
        stems = {p.strip().rstrip("?!.,;: ").strip() for p in phrases}
        alts = sorted((s for s in stems if len(s) >= 8), key=len, reverse=True)
        self._phrases = [re.compile(re.escape(a), re.IGNORECASE) for a in alts]
        self._lower = [a.lower() for a in alts]
        self.words = {w.lower() for w in words}

    def __call__(self, text: str) -> str:
        low = text.lower()
        for needle, pattern in zip(self._lower, self._phrases, strict=True):
            if needle in low:
                text = pattern.sub(FORGOTTEN, text)
                low = text.lower()
        if self.words and _words(text) & self.words:
            text = _WORD.sub(lambda m: FORGOTTEN if m[0].lower() in self.words else m[0], text)
        return text

    def json_text(self, text: str) -> str:
        """``text`` as JSON with every string in it scrubbed (not JSON: scrubbed as text)."""
        try:
            value = json.loads(text)
        except ValueError:
            return self(text)
        new = self.walk(value)
        return text if new == value else json.dumps(new, ensure_ascii=False)

    def walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.walk(v) for v in value]
        if isinstance(value, dict):
            return {k: self.walk(v) for k, v in value.items()}
        return value


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
    phrases, texts = store.forget.texts(sids, tids)
    folder = proposals_dir or paths.proposals_dir()
    with store.write():
        counts = store.forget.delete(sids, tids, before=cutoff)
        derived = list(store.forget.derived())
        reports = _reports(folder)
        # only the words a derived text holds are looked up (the index answers for each)
        quoted = set().union(*(_words(t) for *_, t in derived), *(_words(r) for _, r in reports))
        forgotten = quoted & set().union(*(_words(t) for t in texts))
        scrub = Scrubber(phrases, forgotten - store.forget.kept_words(forgotten))
        counts["derived"] = 0
        for table, key, column, is_json, text in derived:
            new = scrub.json_text(text) if is_json else scrub(text)
            if new == text:
                continue
            if table == "outbox":  # a call that sent forgotten text keeps no text
                new = ""
                counts["outbox"] += 1
            else:
                counts["derived"] += 1
            store.forget.rewrite(table, key, column, new)
    store.forget.purge()
    changed = _scrub_reports(store, folder, set(tids), scrub)
    return ForgetResult(**counts, reports=changed)


def _reports(folder: Path) -> list[tuple[Path, str]]:
    """Every proposal's ``report.json`` with its text."""
    out: list[tuple[Path, str]] = []
    if folder.is_dir():
        for p in sorted(folder.glob("*/report.json")):
            try:
                out.append((p, p.read_text("utf-8")))
            except (OSError, UnicodeDecodeError):
                continue
    return out


def _scrub_reports(store: Store, folder: Path, task_ids: set[str], scrub: Scrubber) -> list[str]:
    """Replace the forgotten tasks' intents (a task's occurrence is ``<task id>@<hash>``) and
    every forgotten phrase or word in every proposal report, and record each rewritten
    report's new hash with its proposal; the reports changed."""
    from skillopt_sleep.night.stage import render_markdown

    changed: list[str] = []
    for report_json, text in _reports(folder):
        try:
            report = load_report_json(text, str(report_json))
        except ValueError:
            continue
        hit = False
        for t in [*report.val_tasks, *report.test_tasks]:
            if t.task_id.split("@")[0] in task_ids and t.intent != FORGOTTEN:
                t.intent, hit = FORGOTTEN, True
        scrubbed = scrub.walk(report.model_dump(mode="json"))
        if scrubbed != report.model_dump(mode="json"):
            report, hit = type(report).model_validate(scrubbed), True
        if not hit:
            continue
        diff_path = report_json.with_name("diff.patch")
        diff = diff_path.read_text("utf-8") if diff_path.is_file() else ""
        text = report.to_json()
        atomic_write(report_json, text)
        if store.proposals.get(report.id) is not None:  # adopt checks the report's hash
            with store.write():
                store.proposals.set_report_hash(report.id, sha256_text(text))
        atomic_write(report_json.with_name("report.md"), render_markdown(report, diff))
        changed.append(report.id)
    return changed
