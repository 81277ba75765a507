"""Forgetting stored data for good (``skillopt-sleep forget``): sessions with their messages and
full-text rows, the tasks mined from them with their rollouts (an occurrence's replays are
stored under ``<task id>@<hash>``), and the response caches; and the forgotten text quoted in
what is derived from it (:meth:`ForgetRepo.derived` / :meth:`ForgetRepo.rewrite`: edits' rule
text and rationale, nights' summaries and errors, proposals' reasons, the outbox's kept
prompts).

Deleted rows' pages are zeroed (``PRAGMA secure_delete`` is on for every store), the full-text
index is rebuilt from its remaining rows (FTS keeps a deleted row's tokens in old segments
until they are merged), the WAL is checkpointed and truncated and the file vacuumed, so no page
of the database or its WAL keeps what was forgotten (:meth:`ForgetRepo.purge`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from skillopt_sleep.store._base import Repository


def _chunks(items: list[str], n: int = 500) -> list[list[str]]:
    return [items[i : i + n] for i in range(0, len(items), n)]


class ForgetRepo(Repository):
    """Selecting and deleting what ``forget`` removes. Callers group the deletions in
    ``with store.write():`` and call :meth:`purge` after it (outside any transaction)."""

    def session_ids(
        self, *, project: str | None = None, session: str | None = None, before: str | None = None
    ) -> list[str]:
        """Stored session ids of ``project`` (that folder and below), of ``session`` (a stored
        id ``source:key`` or a bare key of any source), or last active before ``before`` (an
        ISO date or time: a session's latest message, else its start, else its update)."""
        where: list[str] = []
        args: list[Any] = []
        if project is not None:
            base = project.rstrip("/\\") or project
            where.append(
                "(project = ? or project like ? escape '\\' or project like ? escape '\\')"
            )
            esc = base.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            args += [base, esc + "/%", esc + "\\\\%"]
        if session is not None:
            where.append("(id = ? or key = ?)")
            args += [session, session]
        if before is not None:
            where.append(
                "coalesce((select max(m.timestamp) from messages m where m.session_id = "
                "sessions.id), started_at, updated_at) < ?"
            )
            args.append(before)
        sql = "select id from sessions" + (" where " + " and ".join(where) if where else "")
        with self.db.lock:
            return [r[0] for r in self.db.execute(sql, args).fetchall()]

    def task_ids(
        self, session_ids: list[str], *, project: str | None = None, before: str | None = None
    ) -> list[str]:
        """Tasks mined from any of ``session_ids``, of ``project`` (and below), or last seen
        before ``before``."""
        wanted = set(session_ids)
        out: list[str] = []
        with self.db.lock:
            rows = self.db.execute("select id, project, sessions, last_seen from tasks").fetchall()
        base = project.rstrip("/\\") if project is not None else None
        for tid, tproject, sessions, last_seen in rows:
            try:
                members = json.loads(sessions or "[]")
            except ValueError:
                members = []
            hit = isinstance(members, list) and bool(wanted.intersection(map(str, members)))
            if base is not None and isinstance(tproject, str):
                hit = hit or tproject == base or tproject.startswith((base + "/", base + "\\"))
            if before is not None and isinstance(last_seen, str) and last_seen < before:
                hit = True
            if hit:
                out.append(tid)
        return out

    def delete(
        self, session_ids: list[str], task_ids: list[str], *, before: str | None = None
    ) -> dict[str, int]:
        """Delete the sessions (their messages, full-text rows via the index's triggers, reach
                records) and the tasks (their rollouts, and the text the outbox kept of calls that sent
        their intent, and the collateral gate's everyday probes of the nights that replayed
        them); with any task deleted, the response and judge
                caches are emptied (their keys are hashes of task text). With ``before``, rollouts
                older than it go too. Returns counts by kind."""
        db = self.db
        counts = {
            "sessions": 0,
            "messages": 0,
            "tasks": 0,
            "rollouts": 0,
            "cached": 0,
            "outbox": 0,
        }
        nights: set[int] = set()
        for chunk in _chunks(session_ids):
            marks = ",".join("?" * len(chunk))
            counts["messages"] += db.execute(
                f"delete from messages where session_id in ({marks})", chunk
            ).rowcount
            db.execute(f"delete from wild_sessions where session_id in ({marks})", chunk)
            counts["sessions"] += db.execute(
                f"delete from sessions where id in ({marks})", chunk
            ).rowcount
        if session_ids:  # mining's clustering, readings and links hold their prompts' words
            db.execute("delete from mining_state")
            db.execute("delete from readings")
            db.execute("delete from task_links")
        for chunk in _chunks(task_ids):
            marks = ",".join("?" * len(chunk))
            intents = [
                r[0]
                for r in db.execute(
                    f"select intent from tasks where id in ({marks})", chunk
                ).fetchall()
                if r[0]
            ]
            for intent in intents:  # what the outbox kept of calls that sent it
                counts["outbox"] += db.execute(
                    "update outbox set prompt = '' where instr(prompt, ?) > 0", [intent]
                ).rowcount
            # the nights that replayed them: their everyday probes (the collateral gate's, no
            # task of the user's) were answered under rules learned from these tasks
            nights.update(
                r[0]
                for r in db.execute(
                    f"select distinct night_id from rollouts where task in ({marks}) or "
                    "(instr(task_id, '@') > 0 and "
                    f"substr(task_id, 1, instr(task_id, '@') - 1) in ({marks}))",
                    chunk * 2,
                ).fetchall()
            )
            # a rollout's task_id is the replayed view, ``<task>@<occurrence>``: its task is
            # ``task`` (NULL when the task was not stored), else the view id's head
            counts["rollouts"] += db.execute(
                f"delete from rollouts where task in ({marks}) or task_id in ({marks}) or "
                "(instr(task_id, '@') > 0 and "
                f"substr(task_id, 1, instr(task_id, '@') - 1) in ({marks}))",
                chunk * 3,
            ).rowcount
            for tid in chunk:  # an occurrence's replays: <task id>@<hash>
                counts["rollouts"] += db.execute(
                    "delete from rollouts where substr(task_id, 1, ?) = ?",
                    [len(tid) + 1, tid + "@"],
                ).rowcount
            counts["tasks"] += db.execute(
                f"delete from tasks where id in ({marks})", chunk
            ).rowcount
        for night in sorted(nights):
            counts["rollouts"] += db.execute(
                "delete from rollouts where night_id = ? and task_id like 'probe:%'", [night]
            ).rowcount
        if before is not None:
            counts["rollouts"] += db.execute(
                "delete from rollouts where created_at < ?", [before]
            ).rowcount
        if task_ids or counts["rollouts"]:
            counts["cached"] += db.execute("delete from rollout_cache").rowcount
            db.execute("delete from judge_cache")
        return counts

    def texts(self, session_ids: list[str], task_ids: list[str]) -> tuple[list[str], list[str]]:
        """What the forgotten rows say, read before they are deleted: (the phrases a derived
        text may quote whole: the tasks' intents, their occurrences' prompts, their
        corrections, the sessions' titles and user prompts; every text of the sessions'
        messages and the tasks' rollouts, whose words may be quoted one by one)."""
        db = self.db
        phrases: list[str] = []
        texts: list[str] = []
        with db.lock:
            for chunk in _chunks(task_ids):
                marks = ",".join("?" * len(chunk))
                for intent, occurrences, corrections in db.execute(
                    f"select intent, occurrences, corrections from tasks where id in ({marks})",
                    chunk,
                ).fetchall():
                    phrases.append(intent or "")
                    for raw, key in ((occurrences, "prompt"), (corrections, None)):
                        try:
                            items = json.loads(raw or "[]")
                        except ValueError:
                            items = []
                        for item in items if isinstance(items, list) else []:
                            value = item.get(key) if key and isinstance(item, dict) else item
                            if isinstance(value, str):
                                phrases.append(value)
                texts += [
                    r[0]
                    for r in db.execute(
                        f"select answer from rollouts where task_id in ({marks}) or "
                        f"substr(task_id, 1, instr(task_id || '@', '@') - 1) in ({marks})",
                        chunk + chunk,
                    ).fetchall()
                    if r[0]
                ]
            for chunk in _chunks(session_ids):
                marks = ",".join("?" * len(chunk))
                phrases += [
                    r[0]
                    for r in db.execute(
                        f"select title from sessions where id in ({marks})", chunk
                    ).fetchall()
                    if r[0]
                ]
                for role, text in db.execute(
                    f"select role, text from messages where session_id in ({marks})", chunk
                ).fetchall():
                    if text:
                        texts.append(text)
                        if role == "user":
                            phrases.append(text)
        return [p for p in phrases if p], texts + phrases

    #: (table, primary key, column, whether the column holds JSON) that may quote what a
    #: night read from sessions
    DERIVED = (
        ("edits", "id", "text", False),
        ("edits", "id", "old", False),
        ("edits", "id", "rationale", False),
        ("nights", "id", "summary", True),
        ("nights", "id", "error", False),
        ("proposals", "id", "reason", False),
        ("outbox", "id", "prompt", False),
    )

    def derived(self) -> Iterator[tuple[str, Any, str, bool, str]]:
        """Every non-empty derived text: (table, primary key value, column, is JSON, text)."""
        for table, pk, column, is_json in self.DERIVED:
            if not self.db.table(table).exists() or column not in self.db.table(table).columns_dict:
                continue
            with self.db.lock:
                rows = self.db.execute(
                    f"select {pk}, {column} from {table} where coalesce({column}, '') != ''"
                ).fetchall()
            for key, text in rows:
                yield table, key, column, is_json, str(text)

    def rewrite(self, table: str, key: Any, column: str, text: str) -> None:
        """Set one derived text (``table`` / ``column`` one of :attr:`DERIVED`)."""
        wanted = [(t, pk) for t, pk, c, _ in self.DERIVED if (t, c) == (table, column)]
        if not wanted:
            raise ValueError(f"not a derived text: {table}.{column}")
        self.db.execute(f"update {table} set {column} = ? where {wanted[0][1]} = ?", [text, key])

    def kept_words(self, words: set[str]) -> set[str]:
        """Those of ``words`` some remaining message still holds (full-text index: the same
        word stem counts)."""
        kept: set[str] = set()
        with self.db.lock:
            for w in words:
                row = self.db.execute(
                    "select 1 from messages_fts where messages_fts match ? limit 1",
                    ['"' + w.replace('"', '""') + '"'],
                ).fetchone()
                if row:
                    kept.add(w)
        return kept

    def purge(self) -> None:
        """Leave no page holding forgotten text: rebuild the full-text index from the rows
        that remain, checkpoint and truncate the WAL, vacuum. Outside a transaction."""
        db = self.db
        with db.lock:
            db.execute("insert into messages_fts(messages_fts) values('rebuild')")
            db.execute("insert into messages_fts(messages_fts) values('optimize')")
            db.conn.commit()
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
