"""Numbered schema migrations, applied on open, one transaction per step (sqlite-utils
``Migrations``). Never edit a released step: add a new one.

Whether one is pending is one query (:meth:`Steps.up_to_date`): sqlite-utils is imported
only when one is (or when a test applies them)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from skillopt_sleep.redact import redact, redact_json

if TYPE_CHECKING:
    from sqlite_utils import Database, Migrations

    from skillopt_sleep.store._base import StoreDatabase

Step = Callable[["Database"], None]


class Steps:
    """The numbered steps of one migration set, in order, and sqlite-utils' ``Migrations``
    of them (made on first use: :meth:`pending` and :meth:`apply` are its)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps: list[tuple[str, Step]] = []
        self._migrations: Migrations | None = None

    def __call__(self, *, name: str) -> Callable[[Step], Step]:
        def register(fn: Step) -> Step:
            assert name not in self.names(), name
            self.steps.append((name, fn))
            return fn

        return register

    def names(self) -> list[str]:
        return [name for name, _ in self.steps]

    def migrations(self) -> Migrations:
        """sqlite-utils' ``Migrations`` of these steps."""
        if self._migrations is None:
            from sqlite_utils import Migrations

            made = Migrations(self.name)
            for name, fn in self.steps:
                made(name=name)(fn)
            self._migrations = made
        return self._migrations

    def pending(self, db: Database | StoreDatabase) -> list[Any]:
        return self.migrations().pending(db)  # type: ignore[arg-type]

    def apply(self, db: Database | StoreDatabase, **kwargs: Any) -> None:
        self.migrations().apply(db, **kwargs)  # type: ignore[arg-type]

    def pending_names(self, db: StoreDatabase) -> list[str]:
        """The steps not applied to ``db`` yet (what :meth:`pending` names), by one query."""
        try:
            rows = db.execute(
                "select name from _sqlite_migrations where migration_set = ?", [self.name]
            ).fetchall()
        except sqlite3.OperationalError:
            if db.execute(
                "select 1 from sqlite_master where name = '_sqlite_migrations'"
            ).fetchone():
                raise
            rows = []  # no step was ever applied
        applied = {r[0] for r in rows}
        return [name for name in self.names() if name not in applied]

    def up_to_date(self, db: StoreDatabase) -> bool:
        """Whether :meth:`apply` would do nothing: every step applied, and the steps' table
        as sqlite-utils makes it (primary key ``id``)."""
        if self.pending_names(db):
            return False
        keys = [r[1] for r in db.execute("PRAGMA table_info(_sqlite_migrations)") if r[5]]
        return keys == ["id"]


migrations = Steps("skillopt_sleep")


@migrations(name="m001_initial")
def m001_initial(db: Database) -> None:
    db.table("source_files").create(
        {
            "path": str,
            "source": str,
            "inode": int,
            "size": int,
            "mtime": float,
            "offset": int,  # bytes ingested (always at a line boundary)
            "state": str,  # JSON: the harvester's per-file parse state
            "head_hash": str,  # sha256 of the first <=4 KiB, to detect replaced files
            "lines_ok": int,
            "lines_skipped": int,
            "status": str,  # ok | skipped | error
            "last_error": str,
            "updated_at": str,
        },
        pk="path",
    )
    db.table("sessions").create(
        {
            "id": str,  # "<source>:<key>"
            "source": str,
            "key": str,
            "project": str,
            "file_path": str,
            "started_at": str,
            "updated_at": str,
            "model": str,
            "agent_version": str,
            "headless": int,
            "self_generated": int,
            "title": str,
            "n_messages": int,
        },
        pk="id",
    )
    db.table("sessions").create_index(["project"])
    db.table("messages").create(
        {
            "id": int,
            "session_id": str,
            "source": str,
            "uid": str,
            "seq": int,
            "role": str,
            "kind": str,
            "text": str,
            "tool_names": str,  # JSON list
            "timestamp": str,
            "is_sidechain": int,
            "is_error": int,
        },
        pk="id",
        foreign_keys=[("session_id", "sessions", "id")],
    )
    db.table("messages").create_index(["source", "uid"], unique=True)
    db.table("messages").create_index(["session_id", "seq"])
    db.table("harvest_runs").create(
        {
            "id": int,
            "started_at": str,
            "finished_at": str,
            "source": str,
            "files_seen": int,
            "files_read": int,
            "bytes_read": int,
            "sessions_new": int,
            "sessions_updated": int,
            "sessions_filtered": str,  # JSON {reason: count}
            "lines_skipped": str,  # JSON {reason: count}
            "files_skipped": str,  # JSON {reason: count}
        },
        pk="id",
    )
    db.table("tasks").create(
        {
            "id": str,
            "project": str,
            "intent": str,
            "sessions": str,  # JSON list of session ids
            "checks": str,  # JSON list of Check
            "rubric": str,
            "corrections": str,  # JSON list
            "split": str,
            "synthetic": int,
            "tools": str,
            "first_seen": str,
            "last_seen": str,
            "updated_at": str,
        },
        pk="id",
    )
    db.table("nights").create(
        {
            "id": int,
            "started_at": str,
            "finished_at": str,
            "status": str,  # running | succeeded | no_change | no_tasks | failed | interrupted
            "project": str,
            "dry_run": int,
            "trigger": str,  # cli | daemon | mcp | demo
            "pid": int,
            "error": str,
            "target_path": str,
            "calls": int,
            "cached_calls": int,
            "input_tokens": int,
            "output_tokens": int,
            "seconds": float,
            "val_before": float,
            "val_after": float,
            "test_before": float,
            "test_after": float,
            "proposal_id": str,
            "summary": str,  # JSON
        },
        pk="id",
    )
    db.table("rollout_cache").create(
        {
            "key": str,  # sha256(task intent, doc hash, backend, model, tools)
            "text": str,
            "tool_calls": str,
            "input_tokens": int,
            "output_tokens": int,
            "seconds": float,
            "created_at": str,
        },
        pk="key",
    )
    db.table("judge_cache").create(
        {"key": str, "score": float, "created_at": str},
        pk="key",
    )
    db.table("rollouts").create(
        {
            "id": int,
            "night_id": int,
            "task_id": str,
            "split": str,
            "phase": str,  # e.g. "train e1b0", "val candidate 3", "test before"
            "doc_hash": str,
            "backend": str,
            "model": str,
            "answer": str,
            "tool_calls": str,
            "hard": float,
            "soft": float,
            "score": float,
            "checks": str,  # JSON per-check pass/fail
            "cached": int,
            "input_tokens": int,
            "output_tokens": int,
            "seconds": float,
            "created_at": str,
        },
        pk="id",
    )
    db.table("rollouts").create_index(["night_id"])
    db.table("edits").create(
        {
            "id": int,
            "night_id": int,
            "epoch": int,
            "batch": int,
            "op": str,  # add | delete | replace
            "text": str,
            "old": str,
            "rationale": str,
            "origin": str,  # reflect | consolidate
            "status": str,  # applied | rejected | unmatched | unverified
            "reason": str,
            "val_before": float,
            "val_after": float,
            "created_at": str,
        },
        pk="id",
    )
    db.table("edits").create_index(["night_id"])
    db.table("proposals").create(
        {
            "id": str,
            "night_id": int,
            "created_at": str,
            "status": str,  # staged | adopted | rejected | rolled_back | superseded
            "target_path": str,
            "base_hash": str,  # sha256 of the live file when the night started ("" = absent)
            "new_hash": str,
            "dir": str,
            "val_before": float,
            "val_after": float,
            "test_before": float,
            "test_after": float,
            "summary": str,
            "reason": str,
        },
        pk="id",
    )
    db.table("adoptions").create(
        {
            "id": int,
            "proposal_id": str,
            "target_path": str,
            "adopted_at": str,
            "backup_path": str,  # "" when the file did not exist before
            "existed_before": int,
            "before_hash": str,
            "after_hash": str,
            "rolled_back_at": str,
        },
        pk="id",
    )
    db.table("adoptions").create_index(["target_path"])


@migrations(name="m002_messages_fts")
def m002_messages_fts(db: Database) -> None:
    db.table("messages").enable_fts(["text"], create_triggers=True, tokenize="porter")


@migrations(name="m003_wild_sessions")
def m003_wild_sessions(db: Database) -> None:
    """Whether an adopted document reached a session harvested after adopt, judged when the
    session was harvested (the adopted file's state then, not at a later status)."""
    db.table("wild_sessions").create(
        {"session_id": str, "adoption_id": int, "reached": int, "checked_at": str},
        pk=("session_id", "adoption_id"),
    )


#: (table, primary key, text columns, JSON columns) re-redacted by m004
_REDACTED_COLUMNS: list[tuple[str, str, tuple[str, ...], tuple[str, ...]]] = [
    ("messages", "id", ("text",), ("tool_names",)),
    ("sessions", "id", ("title", "project", "model", "agent_version"), ()),
    ("source_files", "path", ("last_error",), ("state",)),
    ("tasks", "id", ("intent", "rubric"), ("checks", "corrections")),
    ("rollouts", "id", ("answer", "tool_calls"), ()),
    ("rollout_cache", "key", ("text", "tool_calls"), ()),
    ("edits", "id", ("text", "old", "rationale"), ()),
    ("nights", "id", ("error",), ()),
]


@migrations(name="m004_reredact")
def m004_reredact(db: Database) -> None:
    """Redact once more everything stored before redaction held by construction (secrets
    after ``\\n`` written as text, joined streamed parts, titles kept in the parse state, the
    shapes not recognised then). The FTS index follows the messages through its triggers and
    is rebuilt; ``secure_delete`` zeroes the freed pages, so the old text leaves the file."""
    db.execute("PRAGMA secure_delete = ON")
    for table, pk, texts, jsons in _REDACTED_COLUMNS:
        if not db.table(table).exists():
            continue
        cols = [c for c in (*texts, *jsons) if c in db.table(table).columns_dict]
        if not cols:
            continue
        select = f"select [{pk}], {', '.join(f'[{c}]' for c in cols)} from [{table}]"
        for row in db.execute(select).fetchall():
            changed: dict[str, str] = {}
            for col, value in zip(cols, row[1:], strict=True):
                if not isinstance(value, str) or not value:
                    continue
                new = _redact_json_text(value) if col in jsons else redact(value)
                if new != value:
                    changed[col] = new
            if changed:
                sets = ", ".join(f"[{c}] = ?" for c in changed)
                db.execute(
                    f"update [{table}] set {sets} where [{pk}] = ?", [*changed.values(), row[0]]
                )
    if db.table("messages_fts").exists():
        db.execute("insert into messages_fts(messages_fts) values('rebuild')")
        db.execute("insert into messages_fts(messages_fts) values('optimize')")


@migrations(name="m005_task_occurrences")
def m005_task_occurrences(db: Database) -> None:
    """A task's occurrences (each time the user asked it, with its role in the night's
    splits) and why similar prompts were kept apart from it: JSON lists."""
    if db.table("tasks").exists():
        for col in ("occurrences", "apart"):
            if col not in db.table("tasks").columns_dict:
                db.table("tasks").add_column(col, str)


@migrations(name="m006_judges_context")
def m006_judges_context(db: Database) -> None:
    """Judges validated by controls and replays with context: a task's ``demoted`` checks
    (failed a control; JSON list of Check) and ``context`` capsule (JSON ContextCapsule, ""
    when not known); a tool message's ``context`` (JSON CapsuleItem: the file the agent read
    or the output it saw, "" when the source keeps none)."""
    for table, column in (("tasks", "demoted"), ("tasks", "context"), ("messages", "context")):
        if column not in db.table(table).columns_dict:
            db.table(table).add_column(column, str)


def _redact_json_text(value: str) -> str:
    try:
        return json.dumps(redact_json(json.loads(value)))
    except ValueError:
        return redact(value)


@migrations(name="m007_outbox")
def m007_outbox(db: Database) -> None:
    """``outbox``: every outbound model call (privacy: what was sent where)."""
    db.table("outbox").create(
        {
            "id": int,
            "at": str,  # ISO 8601 UTC, when the call was sent
            "role": str,  # target | optimizer
            "purpose": str,  # target | reflect | judge | consolidate …
            "backend": str,
            "model": str,
            "endpoint": str,  # the base URL's host (HTTP backends), else ""
            "chars": int,  # characters sent (system, prompt and placed document)
            "sha256": str,  # of what was sent
            "response_chars": int,
            "status": str,  # ok | error:<ErrorType>
            "prompt": str,  # what was sent, redacted; emptied after privacy.outbox_days
        },
        pk="id",
    )
    db.table("outbox").create_index(["at"])


# FOREIGN_KEYS and VIEWS are part of the released step m008: never edit them; a later step
# that changes a view or a key declares its own.

#: (child table, column, parent table, parent column): the links m008 declares
FOREIGN_KEYS: list[tuple[str, str, str, str]] = [
    ("nights", "proposal_id", "proposals", "id"),
    ("proposals", "night_id", "nights", "id"),
    ("adoptions", "proposal_id", "proposals", "id"),
    ("edits", "night_id", "nights", "id"),
    ("rollouts", "night_id", "nights", "id"),
    ("rollouts", "task", "tasks", "id"),
    ("wild_sessions", "adoption_id", "adoptions", "id"),
    ("wild_sessions", "session_id", "sessions", "id"),
]

#: the views m008 creates for browsing the store (``datasette``, ``sqlite3``): name -> SQL
VIEWS: dict[str, str] = {
    # one row per night: its document, scores, cost and outcome
    "per_night_scores": """
select n.id as night_id, n.started_at, n.finished_at, n.status, n.trigger, n.dry_run,
       n.target_path as document, n.val_before, n.val_after, n.test_before, n.test_after,
       n.calls, n.cached_calls, n.input_tokens, n.output_tokens,
       coalesce(n.input_tokens, 0) + coalesce(n.output_tokens, 0) as tokens,
       n.seconds, n.proposal_id, p.status as proposal_status, n.error
from nights n left join proposals p on p.id = n.proposal_id
order by n.id""",
    # one row per replayed task (``<task>@<occurrence>``) and night in the gate's splits:
    # its score under the night's document before training and under the staged one (none
    # when the night staged nothing), and the verdict
    "task_history": """
with scored as (
  select r.night_id, r.task_id as replay, coalesce(r.task, r.task_id) as task,
         r.occurrence, r.split,
         avg(case when r.phase in ('val baseline', 'test before') then r.score end)
           as score_before,
         avg(case when r.phase not in ('val baseline', 'test before')
                   and r.doc_hash = p.new_hash then r.score end) as score_after,
         p.id as proposal_id
  from rollouts r
  left join nights n on n.id = r.night_id
  left join proposals p on p.id = n.proposal_id
  where r.phase like 'val %' or r.phase like 'test %'
  group by r.night_id, r.task_id
)
select s.task, t.intent, s.occurrence, s.replay, s.night_id, n.started_at, s.split,
       s.score_before, s.score_after, s.proposal_id,
       case when s.proposal_id is null then 'nothing staged'
            when s.score_before is null or s.score_after is null then null
            when s.score_after > s.score_before then 'better'
            when s.score_after < s.score_before then 'worse'
            else 'same' end as verdict
from scored s left join tasks t on t.id = s.task left join nights n on n.id = s.night_id
order by s.task, s.night_id, s.split, s.replay""",
    # what is adopted where now (and what was, with when it was rolled back)
    "adopted_where": """
select a.target_path, a.proposal_id, p.night_id, a.adopted_at, a.rolled_back_at,
       case when a.rolled_back_at is null then 1 else 0 end as live,
       p.val_before, p.val_after, p.test_before, p.test_after, a.backup_path, a.id as adoption_id
from adoptions a left join proposals p on p.id = a.proposal_id
order by a.target_path, a.id""",
}


@migrations(name="m008_foreign_keys_views")
def m008_foreign_keys_views(db: Database) -> None:
    """A browsable store: foreign keys between nights, rollouts, edits, proposals, adoptions,
    tasks and the reach records, and views for the common questions (:data:`VIEWS`).

    A rollout's ``task_id`` is the replayed view (``<task>@<occurrence>``): the new columns
    ``task`` (the mined task, a foreign key) and ``occurrence`` (the occurrence key, "" for a
    task replayed as itself) split it. References an older store left dangling (a task
    re-mined away, a proposal folder's row gone) are set to NULL, each kept with its old value
    in ``dangling_refs`` (nothing is dropped); an empty string, which meant "none", becomes
    NULL."""
    if "task" not in db.table("rollouts").columns_dict:
        db.table("rollouts").add_column("task", str)
        db.table("rollouts").add_column("occurrence", str)
    db.execute(
        "update rollouts set task = case when instr(task_id, '@') > 0 then "
        "substr(task_id, 1, instr(task_id, '@') - 1) else task_id end, "
        "occurrence = case when instr(task_id, '@') > 0 then "
        "substr(task_id, instr(task_id, '@') + 1) else '' end where task is null"
    )
    # a rollout whose task is gone keeps its task_id (the whole view id): no link, no loss
    db.execute("update rollouts set task = null where task not in (select id from tasks)")
    db.table("dangling_refs").create(
        {
            "id": int,
            "table_name": str,
            "row_id": str,  # the row's primary key (JSON list for a compound key)
            "column_name": str,
            "value": str,
            "noted_at": str,
        },
        pk="id",
        if_not_exists=True,
    )
    for child, col, parent, pcol in FOREIGN_KEYS:
        if child == "rollouts" and col == "task":
            continue
        db.execute(f"update [{child}] set [{col}] = null where [{col}] = ''")
        pks = db.table(child).pks
        key = f"[{pks[0]}]" if len(pks) == 1 else "json_array(" + ", ".join(pks) + ")"
        dangling = f"[{col}] is not null and [{col}] not in (select [{pcol}] from [{parent}])"
        db.execute(
            "insert into dangling_refs (table_name, row_id, column_name, value, noted_at) "
            f"select ?, cast({key} as text), ?, cast([{col}] as text), "
            "strftime('%Y-%m-%dT%H:%M:%SZ', 'now') "
            f"from [{child}] where {dangling}",
            [child, col],
        )
        db.execute(f"update [{child}] set [{col}] = null where {dangling}")
    for child in dict.fromkeys(c for c, *_ in FOREIGN_KEYS):
        fks = [(col, parent, pcol) for c, col, parent, pcol in FOREIGN_KEYS if c == child]
        db.table(child).transform(add_foreign_keys=fks)
    for table, col in (
        ("rollouts", "task"),
        ("proposals", "night_id"),
        ("adoptions", "proposal_id"),
    ):
        db.table(table).create_index([col], if_not_exists=True)
    for name, sql in VIEWS.items():
        db.create_view(name, sql.strip(), replace=True)


@migrations(name="m009_mining_state")
def m009_mining_state(db: Database) -> None:
    """``mining_state``: each project's clustering, so mining compares only new prompts."""
    db.table("mining_state").create({"project": str, "state": str, "updated_at": str}, pk="project")


@migrations(name="m010_proposal_agent_kind")
def m010_proposal_agent_kind(db: Database) -> None:
    """``proposals.agent`` and ``proposals.kind``: whose document a proposal writes and which
    kind (``memory``, ``managed_skill`` or ``path``), so adopt and rollback check its target
    against that agent's locations of that kind only. A row staged before stays "" in both:
    adopt and rollback derive them from its target (see :mod:`skillopt_sleep.proposals`)."""
    for column in ("agent", "kind"):
        if column not in db.table("proposals").columns_dict:
            db.table("proposals").add_column(column, str, not_null_default="")


@migrations(name="m011_proposal_report_hash")
def m011_proposal_report_hash(db: Database) -> None:
    """``proposals.report_hash``: the sha256 of the staged ``report.json`` (its text as
    written), so adopt refuses a report changed after the night as it refuses a changed
    document. A row staged before stays "": adopt then compares the report's target and
    hashes with the row, as before."""
    if "report_hash" not in db.table("proposals").columns_dict:
        db.table("proposals").add_column("report_hash", str, not_null_default="")


@migrations(name="m012_edit_section")
def m012_edit_section(db: Database) -> None:
    """``edits.section``: the block an edit was proposed for (the project of a shared memory
    file's block; "" the file's block for every project, or a file of its own), so what the
    gate rejected or the user refused on one project's block is remembered for that block
    only. An older row stays NULL: its night's ``summary.section`` stands in."""
    if "section" not in db.table("edits").columns_dict:
        db.table("edits").add_column("section", str)


@migrations(name="m013_night_seq")
def m013_night_seq(db: Database) -> None:
    """``nights.seq``: the order nights were started in (1, 2, …; a dry run's too), so two
    nights started and ended within the same second (times are kept to the second) still list
    newest first. Older rows are numbered in the order they listed in before."""
    if "seq" not in db.table("nights").columns_dict:
        db.table("nights").add_column("seq", int)
        db.execute(
            "update nights set seq = (select count(*) from nights o where "
            "o.started_at < nights.started_at or (o.started_at = nights.started_at and "
            "(coalesce(o.finished_at, '9999') < coalesce(nights.finished_at, '9999') or "
            "(coalesce(o.finished_at, '9999') = coalesce(nights.finished_at, '9999') and "
            "abs(o.id) <= abs(nights.id)))))"
        )


@migrations(name="m014_readings")
def m014_readings(db: Database) -> None:
    """``readings``: what the optimizer model read in a user's follow-up (correction,
    approval or a new request, and the checks compiled from a correction), keyed by a hash
    of what it was shown, so mining without a model (``tasks``, ``mine``) and a repeat night
    reuse them and make no call (``mining/meaning.py``)."""
    db.table("readings").create(
        {"key": str, "reading": str, "model": str, "created_at": str}, pk="key"
    )


@migrations(name="m015_wild_judged")
def m015_wild_judged(db: Database) -> None:
    """``wild_sessions.judged``: the rubric judge's score of the session's first answer, for
    a task judged by its rubric alone (a night judges it once; NULL: not judged)."""
    if "judged" not in db.table("wild_sessions").columns_dict:
        db.table("wild_sessions").add_column("judged", float)


@migrations(name="m016_task_links")
def m016_task_links(db: Database) -> None:
    """``task_links``: the user's word on which requests are one task (``tasks join``) and
    which a reading joined wrongly (``tasks split``), by the requests' normalised text in
    their project, kept across mining runs (``mining/mine.py``)."""
    db.table("task_links").create(
        {"project": str, "a": str, "b": str, "link": str, "created_at": str},
        pk=("project", "a", "b"),
    )


@migrations(name="m017_rule_scope_refusals")
def m017_rule_scope_refusals(db: Database) -> None:
    """``adoptions.left_out`` (JSON: the proposal's rules an adoption of some of them did not
    write), ``sessions.loaded`` (JSON: the marks of the memory the transcript shows the agent
    loaded, :mod:`skillopt_sleep.marks`), ``wild_sessions.observed`` (1: the transcript showed
    whether the adopted rules reached the session; 0 or NULL: inferred), ``edits.scope`` (the task family a rule was scoped to; "" unscoped) and
    ``edits.evidence`` (JSON: the replayed views it was learned from), so a proposal's rules
    are reviewed one by one with their evidence; and ``rule_refusals``: a rule of a proposal
    the user refused on its own (``reject ID --rule N``), remembered for that document's block
    without refusing its siblings."""
    cols = db.table("edits").columns_dict
    if "scope" not in cols:
        db.table("edits").add_column("scope", str)
    if "evidence" not in cols:
        db.table("edits").add_column("evidence", str)
    if "left_out" not in db.table("adoptions").columns_dict:  # rules not adopted (JSON)
        db.table("adoptions").add_column("left_out", str)
    if "loaded" not in db.table("sessions").columns_dict:  # memory marks (skillopt_sleep.marks)
        db.table("sessions").add_column("loaded", str)
    if "observed" not in db.table("wild_sessions").columns_dict:  # reach seen in the transcript
        db.table("wild_sessions").add_column("observed", int)
    db.table("rule_refusals").create(
        {
            "id": int,
            "proposal_id": str,
            "target_path": str,
            "section": str,
            "rule": str,
            "reason": str,
            "created_at": str,
        },
        pk="id",
        if_not_exists=True,
    )


@migrations(name="m018_rollout_acts")
def m018_rollout_acts(db: Database) -> None:
    """``rollout_cache.acts`` (JSON: what an agent CLI did with its tools in a replay: the
    files it wrote, as text and diff, the commands it ran, what was stopped; NULL: it only
    answered), so a cached replay is graded on what it did, as the first one was; and
    ``rollouts.acts`` (the same as the reports show it: commands run, files written as a diff,
    what was stopped; NULL: it only answered)."""
    if "acts" not in db.table("rollout_cache").columns_dict:
        db.table("rollout_cache").add_column("acts", str)
    if "acts" not in db.table("rollouts").columns_dict:
        db.table("rollouts").add_column("acts", str)
