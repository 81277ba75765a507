"""``sessions`` and ``messages`` (with their full-text index ``messages_fts``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from skillopt_sleep.models import HarvestedMessage, HarvestedSession
from skillopt_sleep.redact import redact, redact_json
from skillopt_sleep.store._base import Repository, Row, now_iso


@dataclass(frozen=True)
class SearchHit:
    """One message matching a full-text search."""

    message_id: int
    session_id: str
    source: str
    project: str | None
    role: str
    kind: str
    timestamp: str | None
    snippet: str  # the matched words in [brackets], "…" where text was cut


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A ``sessions`` row (see :class:`SessionsRepo`); fields in the table's column order."""

    id: str  # "<source>:<key>"
    source: str
    key: str
    project: str | None
    file_path: str | None
    started_at: str | None
    updated_at: str | None
    model: str | None
    agent_version: str | None
    headless: int
    self_generated: int
    title: str | None
    n_messages: int | None
    #: JSON list of the marks of the memory the transcript shows loaded (m017; None: not
    #: recorded, :mod:`skillopt_sleep.marks`)
    loaded: str | None = None

    @property
    def loaded_marks(self) -> set[str] | None:
        """The marks of the memory the session loaded (None: its transcript does not say)."""
        return None if self.loaded is None else set(json.loads(self.loaded))


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A ``messages`` row as :meth:`SessionsRepo.messages` reads it (``tool_names`` decoded
    to a list, ``context`` to a dict or None); fields in the table's column order."""

    id: int
    session_id: str
    source: str
    uid: str
    seq: int
    role: str
    kind: str
    text: str | None
    tool_names: list[str]
    timestamp: str | None
    is_sidechain: int
    is_error: int
    context: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Place:
    """Where a task's occurrence is (:meth:`SessionsRepo.places`)."""

    source: str
    project: str | None
    message_id: int | None  # None when that message is no longer stored


_MESSAGE_COLUMNS = (
    "session_id",
    "source",
    "uid",
    "seq",
    "role",
    "kind",
    "text",
    "tool_names",
    "timestamp",
    "is_sidechain",
    "is_error",
    "context",
)
_TEXT, _TOOLS = _MESSAGE_COLUMNS.index("text"), _MESSAGE_COLUMNS.index("tool_names")
_INSERT_MESSAGE = (
    f"insert into messages ({', '.join(_MESSAGE_COLUMNS)}) "
    f"values ({', '.join('?' * len(_MESSAGE_COLUMNS))})"
)


def _opt(text: str | None) -> str | None:
    return redact(text) if text else text


def _loaded(old: str | None, new: list[str] | None) -> str | None:
    """The marks of the memory a session loaded, stored ones and a later pass's together."""
    if new is None:
        return old
    marks = json.loads(old) if old else []
    return json.dumps(list(dict.fromkeys([*marks, *new])))


def _fts_quote(query: str) -> str:
    return " ".join('"' + tok.replace('"', '""') + '"' for tok in query.split())


class SessionsRepo(Repository):
    """Session rows: ``id`` ("<source>:<key>"), ``source``, ``key``, ``project``,
    ``file_path``, ``started_at``, ``updated_at``, ``model``, ``agent_version``, ``headless``
    (0/1), ``self_generated`` (0/1), ``title``, ``n_messages``. Message rows: ``id``,
    ``session_id``, ``source``, ``uid``, ``seq`` (0-based order in the session), ``role``,
    ``kind``, ``text``, ``tool_names``, ``timestamp``, ``is_sidechain``, ``is_error``,
    ``context`` (a tool message's :class:`~skillopt_sleep.models.CapsuleItem`, JSON)."""

    def get(self, session_id: str) -> SessionRow | None:
        """The session's row, or None."""
        row = self._one("sessions", "id = ?", [session_id])
        return SessionRow(**row) if row is not None else None

    def save(self, session: HarvestedSession, file_path: str) -> tuple[bool, int]:
        """Upsert a session and append its new messages (dedupe by ``(source, uid)``; parts of
        a split assistant message with an existing uid are merged into it).

        Every text stored is :func:`~skillopt_sleep.redact.redact`-ed here, whatever the
        harvester did: the title, project, model and version, tool names, and each message's
        final text (a merged message as a whole, after its parts are joined; when the join
        reveals a secret cut between passes, the FTS index is optimized so the stored part
        leaves it). Keys and uids (the agents' ids) are kept as they are.

        The stored messages with the session's uids are read in one query (per 500 uids), the
        new ones inserted with one ``executemany``, the merged ones updated with another.

        Returns ``(is_new_session, n_messages_added_or_merged)``. Its writes are one savepoint
        (a transaction of their own outside one); callers wrap a file's whole pass in ``with
        store.write():``.
        """
        db = self.db
        sid = f"{session.source}:{session.key}"
        old = self._one("sessions", "id = ?", [sid]) or {}
        is_new = not old
        row = {
            "id": sid,
            "source": session.source,
            "key": session.key,
            "project": _opt(session.project) or old.get("project"),
            "file_path": old.get("file_path") or file_path,
            "started_at": old.get("started_at") or session.started_at,
            "updated_at": now_iso(),
            "model": _opt(session.model) or old.get("model"),
            "agent_version": _opt(session.agent_version) or old.get("agent_version"),
            "headless": int(session.headless or bool(old.get("headless"))),
            "self_generated": int(session.self_generated or bool(old.get("self_generated"))),
            "title": _opt(session.title) or old.get("title"),
            "n_messages": old.get("n_messages") or 0,
            "loaded": _loaded(old.get("loaded"), session.loaded),
        }
        seq = int(row["n_messages"] or 0)
        changed = 0
        purge = False  # a stored text held part of a secret: drop it from the FTS index too
        known = self._known(session)
        inserts: list[list[Any]] = []
        updates: dict[int, tuple[str, list[str]]] = {}
        for msg in session.messages:
            msg_text = redact(msg.text)
            msg_tools = [redact(t) for t in msg.tool_names]
            found = known.get(msg.uid)
            if found:
                mid, text, tools_l, at = found
                new_text, secret = _merged_text(text, msg_text)
                purge = purge or secret
                new_tools = tools_l + [t for t in msg_tools if t not in tools_l]
                if new_text != text or new_tools != tools_l:
                    found[1], found[2] = new_text, new_tools
                    if mid is None:  # a repeated uid of this call: its pending insert
                        inserts[at][_TEXT], inserts[at][_TOOLS] = new_text, json.dumps(new_tools)
                    else:
                        updates[mid] = (new_text, new_tools)
                    changed += 1
                continue
            known[msg.uid] = [None, msg_text, msg_tools, len(inserts)]
            inserts.append(_message_row(sid, session.source, msg, seq, msg_text, msg_tools))
            seq += 1
            changed += 1
        row["n_messages"] = seq
        self._write_session(row, updates, inserts)
        if purge:  # FTS keeps a replaced row's tokens in old segments until they are merged
            db.execute("insert into messages_fts(messages_fts) values('optimize')")
        return is_new, changed

    def _known(self, session: HarvestedSession) -> dict[str, list[Any]]:
        """The stored messages with the session's uids, in one query per 500 (no lookup per
        message): uid -> [row id (None: inserted by this call), text, tool names, index in
        inserts]."""
        known: dict[str, list[Any]] = {}
        uids = list(dict.fromkeys(m.uid for m in session.messages))
        for at in range(0, len(uids), 500):
            part = uids[at : at + 500]
            marks = ", ".join("?" * len(part))
            for uid, mid, text, tools in self.db.execute(
                f"select uid, id, text, tool_names from messages where source = ? "
                f"and uid in ({marks})",
                [session.source, *part],
            ).fetchall():
                known[uid] = [mid, text, json.loads(tools or "[]"), None]
        return known

    def _write_session(
        self,
        row: dict[str, Any],
        updates: dict[int, tuple[str, list[str]]],
        inserts: list[list[Any]],
    ) -> None:
        """Upsert the session row, update the merged messages, insert the new ones."""
        db = self.db
        cols = list(row)
        with db.atomic():  # a savepoint inside the caller's transaction
            db.conn.execute(
                f"insert into sessions ({', '.join(cols)}) values ({', '.join('?' * len(cols))}) "
                f"on conflict(id) do update set "
                + ", ".join(f"{c} = excluded.{c}" for c in cols if c != "id"),
                list(row.values()),
            )
            if updates:
                db.conn.executemany(
                    "update messages set text = ?, tool_names = ? where id = ?",
                    [(text, json.dumps(tools), mid) for mid, (text, tools) in updates.items()],
                )
            if inserts:
                db.conn.executemany(_INSERT_MESSAGE, inserts)

    def all(self, project: str | None = None, include_self: bool = False) -> list[SessionRow]:
        """Sessions oldest first; ``project`` keeps that folder and those below it;
        self-generated sessions (our own replays) only with ``include_self``."""
        where: list[str] = []
        args: list[str] = []
        if project:
            where.append("(project = ? or project like ?)")
            args += [project, project.rstrip("/") + "/%"]
        if not include_self:
            where.append("self_generated = 0")
        sql = " and ".join(where) or None
        return [
            SessionRow(**r)
            for r in self.db.table("sessions").rows_where(sql, args, order_by="started_at")
        ]

    def ids_matching(self, head: str, tail: str = "", limit: int = 20) -> list[str]:
        """Ids of the sessions whose id or key (the id without its ``source:``) starts with
        ``head`` and whose id ends with ``tail``, at most ``limit``, sorted."""
        rows = self.db.execute(
            "select id from sessions where (substr(id, 1, ?) = ? or substr(key, 1, ?) = ?) "
            "and (? = 0 or substr(id, length(id) - ? + 1) = ?) order by id limit ?",
            [len(head), head, len(head), head, len(tail), len(tail), tail, limit],
        ).fetchall()
        return [r[0] for r in rows]

    def messages(self, session_id: str) -> list[MessageRow]:
        """The session's messages in order, ``tool_names`` decoded to a list, ``context``
        (a tool message's capsule item) to a dict or None."""
        rows = self._rows("select * from messages where session_id = ? order by seq", [session_id])
        for r in rows:
            r["tool_names"] = json.loads(r["tool_names"] or "[]")
            r["context"] = json.loads(r["context"]) if r.get("context") else None
        return [MessageRow(**r) for r in rows]

    def search_messages(self, query: str, limit: int = 20) -> list[Row]:
        """Message rows matching the FTS query ``query``, best first."""
        return list(self.db.table("messages").search(query, limit=limit))

    def search(
        self,
        query: str,
        *,
        source: str | None = None,
        project: str | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Full-text search of the user's (not self-generated) messages, best first.
        ``project`` keeps that folder and those below it. A query that is not valid FTS
        syntax (quotes, dashes, operators) is searched as its words."""
        where, args = ["messages_fts match ?", "s.self_generated = 0"], []
        if source:
            where.append("m.source = ?")
            args.append(source)
        if project is not None:
            where.append("(s.project = ? or s.project like ?)")
            args += [project.rstrip("/"), project.rstrip("/") + "/%"]
        sql = (
            "select m.id, m.session_id, m.source, s.project, m.role, m.kind, m.timestamp, "
            "snippet(messages_fts, 0, '[', ']', '…', 16) as snip "
            "from messages_fts join messages m on m.id = messages_fts.rowid "
            "join sessions s on s.id = m.session_id "
            f"where {' and '.join(where)} order by messages_fts.rank limit ?"
        )
        try:
            rows = self.db.execute(sql, [query, *args, limit]).fetchall()
        except sqlite3.OperationalError:
            rows = self.db.execute(sql, [_fts_quote(query), *args, limit]).fetchall()
        return [
            SearchHit(r[0], r[1], r[2], r[3], r[4] or "", r[5] or "", r[6], r[7] or "")
            for r in rows
        ]

    def places(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Place]:
        """Where each ``(session id, seq)`` (a task's occurrence) is: its session's
        ``source`` and ``project`` and the message's ``message_id`` (None when that message is
        no longer stored); sessions no longer stored are left out."""
        out: dict[tuple[str, int], Place] = {}
        for sid, seq in dict.fromkeys(keys):
            with self.db.lock:  # fetched under the lock: safe from a worker thread
                row = self.db.execute(
                    "select s.source, s.project, m.id from sessions s left join messages m "
                    "on m.session_id = s.id and m.seq = ? where s.id = ?",
                    [seq, sid],
                ).fetchone()
            if row is not None:
                out[(sid, seq)] = Place(source=row[0], project=row[1], message_id=row[2])
        return out

    def count_under(self, source: str, root: str) -> int:
        """Sessions of ``source`` whose file lies under ``root`` (ending in a separator)."""
        return self._count_under("sessions", "file_path", source, root)


def _merged_text(text: Any, msg_text: str) -> tuple[Any, bool]:
    """A stored message's text with a new part of it ``msg_text`` (redacted); and whether
    the join revealed a secret split between the parts (redacted again)."""
    if msg_text and text and msg_text.startswith(text):
        return msg_text, False  # the same message, grown (e.g. a streamed answer)
    if msg_text and msg_text not in (text or ""):
        # the joined text is redacted again: a secret split between the parts
        joined = f"{text}\n{msg_text}" if text else msg_text
        new_text = redact(joined)
        return new_text, new_text != joined
    return text, False


def _message_row(
    sid: str, source: str, msg: HarvestedMessage, seq: int, text: str, tools: list[str]
) -> list[Any]:
    """The values of a new message row, in :data:`_INSERT_MESSAGE`'s order."""
    return [
        sid,
        source,
        msg.uid,
        seq,
        msg.role,
        msg.kind,
        text,
        json.dumps(tools),
        msg.timestamp,
        int(msg.is_sidechain),
        int(msg.is_error),
        json.dumps(redact_json(msg.context.model_dump())) if msg.context else "",
    ]
