"""The SQLite store: one file, WAL mode, migrated on open.

``Store(db)`` takes a :class:`sqlite_utils.Database` (or a path) so tests can pass
``tmp_path / "x.db"``; :func:`open_store` opens the user's default database.
All timestamps are ISO 8601 UTC strings.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from skillopt_sleep import paths
from skillopt_sleep.errors import StoreError
from skillopt_sleep.models import HarvestedSession, Task
from skillopt_sleep.store.migrations import migrations


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Store:
    """Thin, typed access to the tables. Methods raise :class:`StoreError` on corruption."""

    def __init__(self, db: Database | str | Path):
        if not isinstance(db, Database):
            path = Path(db)
            # the store holds message text from the user's sessions: private to the user
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            new = not path.exists()
            try:
                db = Database(sqlite3.connect(str(path), timeout=30, check_same_thread=False))
                if new:
                    db.execute("PRAGMA user_version")  # creates the file
                    with contextlib.suppress(OSError):
                        os.chmod(path, 0o600)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open database {path}: {exc}") from None
        self.db = db
        try:
            self.db.execute("PRAGMA busy_timeout = 30000")
            if self.db.execute("PRAGMA journal_mode").fetchone()[0] != "memory":
                self.db.enable_wal()
            self.db.execute("PRAGMA foreign_keys = ON")
            migrations.apply(self.db)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"database is unusable: {exc}") from None

    def close(self) -> None:
        self.db.conn.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[Database]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``). In WAL mode a deferred
        transaction that reads first and writes later fails at once with "database is
        locked" when another process committed in between (the busy timeout does not help);
        this one waits for the write lock up to the busy timeout instead. Nested: a
        savepoint."""
        if self.db.conn.in_transaction:
            with self.db.atomic():
                yield self.db
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.conn.rollback()
            raise
        else:
            self.db.conn.commit()

    # ------------------------------------------------------------------ source files
    def get_file(self, path: str) -> dict[str, Any] | None:
        rows = list(self.db["source_files"].rows_where("path = ?", [path]))
        return rows[0] if rows else None

    def put_file(self, row: dict[str, Any]) -> None:
        row = dict(row, updated_at=now_iso())
        self.db["source_files"].upsert(row, pk="path", alter=False)

    def files(self, source: str | None = None) -> list[dict[str, Any]]:
        if source:
            return list(self.db["source_files"].rows_where("source = ?", [source]))
        return list(self.db["source_files"].rows)

    # ------------------------------------------------------------------ sessions / messages
    def save_session(self, session: HarvestedSession, file_path: str) -> tuple[bool, int]:
        """Upsert a session and append its new messages (dedupe by ``(source, uid)``; parts of
        a split assistant message with an existing uid are merged into it).

        Returns ``(is_new_session, n_messages_added_or_merged)``. Not transactional by itself:
        callers wrap a file's whole pass in ``with store.write():``.
        """
        sid = f"{session.source}:{session.key}"
        existing = list(self.db["sessions"].rows_where("id = ?", [sid]))
        is_new = not existing
        old = existing[0] if existing else {}
        row = {
            "id": sid,
            "source": session.source,
            "key": session.key,
            "project": session.project or old.get("project"),
            "file_path": old.get("file_path") or file_path,
            "started_at": old.get("started_at") or session.started_at,
            "updated_at": now_iso(),
            "model": session.model or old.get("model"),
            "agent_version": session.agent_version or old.get("agent_version"),
            "headless": int(session.headless or bool(old.get("headless"))),
            "self_generated": int(session.self_generated or bool(old.get("self_generated"))),
            "title": session.title or old.get("title"),
            "n_messages": old.get("n_messages") or 0,
        }
        self.db["sessions"].upsert(row, pk="id")
        seq = row["n_messages"]
        changed = 0
        for msg in session.messages:
            found = self.db.execute(
                "select id, text, tool_names from messages where source = ? and uid = ?",
                [session.source, msg.uid],
            ).fetchone()
            if found:
                mid, text, tools = found
                tools_l = json.loads(tools or "[]")
                new_text = text
                if msg.text and text and msg.text.startswith(text):
                    new_text = msg.text  # the same message, grown (e.g. a streamed answer)
                elif msg.text and msg.text not in (text or ""):
                    new_text = f"{text}\n{msg.text}" if text else msg.text
                new_tools = tools_l + [t for t in msg.tool_names if t not in tools_l]
                if new_text != text or new_tools != tools_l:
                    self.db["messages"].update(
                        mid, {"text": new_text, "tool_names": json.dumps(new_tools)}
                    )
                    changed += 1
                continue
            self.db["messages"].insert(
                {
                    "session_id": sid,
                    "source": session.source,
                    "uid": msg.uid,
                    "seq": seq,
                    "role": msg.role,
                    "kind": msg.kind,
                    "text": msg.text,
                    "tool_names": json.dumps(msg.tool_names),
                    "timestamp": msg.timestamp,
                    "is_sidechain": int(msg.is_sidechain),
                    "is_error": int(msg.is_error),
                }
            )
            seq += 1
            changed += 1
        if seq != row["n_messages"]:
            self.db["sessions"].update(sid, {"n_messages": seq})
        return is_new, changed

    def sessions(self, project: str | None = None, include_self: bool = False) -> list[dict]:
        where, args = [], []
        if project:
            where.append("(project = ? or project like ?)")
            args += [project, project.rstrip("/") + "/%"]
        if not include_self:
            where.append("self_generated = 0")
        sql = " and ".join(where) or None
        return list(self.db["sessions"].rows_where(sql, args, order_by="started_at"))

    def messages(self, session_id: str) -> list[dict]:
        rows = list(self.db["messages"].rows_where("session_id = ?", [session_id], order_by="seq"))
        for r in rows:
            r["tool_names"] = json.loads(r["tool_names"] or "[]")
        return rows

    def search_messages(self, query: str, limit: int = 20) -> list[dict]:
        return list(self.db["messages"].search(query, limit=limit))

    # ------------------------------------------------------------------ harvest accounting
    def record_harvest(self, row: dict[str, Any]) -> None:
        row = dict(row)
        for key in ("sessions_filtered", "lines_skipped", "files_skipped"):
            if not isinstance(row.get(key), str):
                row[key] = json.dumps(row.get(key) or {})
        self.db["harvest_runs"].insert(row)

    # ------------------------------------------------------------------ tasks
    def save_tasks(self, tasks: Iterable[Task]) -> None:
        now = now_iso()
        for t in tasks:
            old = list(self.db["tasks"].rows_where("id = ?", [t.id]))
            self.db["tasks"].upsert(
                {
                    "id": t.id,
                    "project": t.project,
                    "intent": t.intent,
                    "sessions": json.dumps(t.sessions),
                    "checks": json.dumps([c.model_dump() for c in t.checks]),
                    "rubric": t.rubric,
                    "corrections": json.dumps(t.corrections),
                    "split": t.split,
                    "synthetic": int(t.synthetic),
                    "tools": json.dumps(t.tools),
                    "first_seen": old[0]["first_seen"] if old else now,
                    "last_seen": now,
                    "updated_at": now,
                },
                pk="id",
            )

    def tasks(self, project: str | None = None) -> list[Task]:
        if project:
            rows = self.db["tasks"].rows_where("project = ?", [project], order_by="id")
        else:
            rows = self.db["tasks"].rows_where(order_by="id")
        return [
            Task(
                id=r["id"],
                project=r["project"],
                intent=r["intent"],
                sessions=json.loads(r["sessions"] or "[]"),
                checks=json.loads(r["checks"] or "[]"),
                rubric=r["rubric"] or "",
                corrections=json.loads(r["corrections"] or "[]"),
                split=r["split"],
                synthetic=bool(r["synthetic"]),
                tools=json.loads(r["tools"] or "[]"),
            )
            for r in rows
        ]

    # ------------------------------------------------------------------ generic helpers
    def insert(self, table: str, row: dict[str, Any]) -> int:
        return self.db[table].insert(row).last_pk

    def update(self, table: str, pk: Any, values: dict[str, Any]) -> None:
        self.db[table].update(pk, values)

    def get(self, table: str, pk: Any) -> dict[str, Any] | None:
        pkcol = self.db[table].pks[0]
        rows = list(self.db[table].rows_where(f"[{pkcol}] = ?", [pk]))
        return rows[0] if rows else None

    def rows(
        self,
        table: str,
        where: str | None = None,
        args: list | None = None,
        order_by: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        return list(self.db[table].rows_where(where, args or [], order_by=order_by, limit=limit))


def open_store(path: Path | None = None) -> Store:
    """Open (creating and migrating) the user's store at ``paths.db_path()``."""
    return Store(path or paths.db_path())
