"""OpenCode sessions (corpus SCHEMAS.md §6): the data folder ``$XDG_DATA_HOME/opencode`` or
``~/.local/share/opencode`` (OpenCode uses the XDG layout on every OS). Override with
``[sources.opencode] roots = [...]``.

Two storage generations:

* **SQLite** ``opencode.db`` (current builds; WAL) with tables ``session`` (``id``,
  ``directory``, ``title``, ``parent_id``, ``time_created`` …), ``message`` and ``part``
  (``id``, ``session_id``/``message_id``, ``time_created``, ``time_updated``, ``data`` JSON).
  Opened **read-only** (``file:…?mode=ro`` URI), never written. Incremental by a high-water
  mark: ``state["hw"]`` is the largest ``message.time_updated`` fully harvested; each pass
  reads only messages updated after it, and takes them in ``time_created`` order (OpenCode
  1.18 updates a prompt's row after the answer to it is written). opencode 1.18.33 (checked
  by running it, docs/sources.md) writes these tables; its ``session_message`` / ``event``
  tables (an event log of the same messages) are not read.
* the older **JSON tree** ``storage/session/<projectID>/<ses>.json``,
  ``storage/message/<ses>/<msg>.json``, ``storage/part/<msg>/<prt>.json``. One session is one
  unit: its signature (names, sizes and mtimes of its message and part files) decides whether
  it is read again.

An assistant message still being written (no ``time.completed``, no ``error``, and its
latest activity less than :data:`SETTLE_SECONDS` ago) is left for a later pass, so no
half-streamed text is stored; the pass is then marked ``pending`` and the unit is read again
next time even if nothing changed. Activity is taken from the content — the message's
``time.created`` and its parts' ``time``/``state.time`` ``start``/``end`` (and the database's
``time_updated``) — never from file mtimes, which a copy or a backup restore resets.
Per message: ``text`` parts make the prompt / answer (``synthetic`` text parts are injected
context: dropped, counted), ``tool`` parts add the tool name to the answer and a ``tool``
excerpt (``is_error`` on status ``error`` or a non-zero ``metadata.exit``); ``reasoning``,
``step-start``/``step-finish``, ``file``, ``patch``, ``snapshot``, … are counted as
``ignored_part:<type>``. Project = the session's ``directory``. A session with a
``parentID``/``parent_id`` is a sub-agent: its messages are ``is_sidechain``.

``headless`` (checked against 1.18.33, running ``opencode run`` and the TUI against the
simulator and diffing what each stored): ``opencode run`` creates its session with a
``permission`` ruleset denying ``question``, ``plan_enter`` and ``plan_exit`` for every
pattern (no one is there to answer a question or approve a plan); the TUI creates its
sessions with none (``permission`` NULL). A session whose ``permission`` denies all three is
``headless`` (:func:`headless_permission`). ``opencode run --mini`` (a TTY mode) adds no such
rules, and ``opencode run --continue`` into a session the TUI made keeps the TUI's: neither
is marked.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from skillopt_sleep.models import HarvestedMessage, HarvestedSession
from skillopt_sleep.redact import clean
from skillopt_sleep.sources.base import SELF_MARKER, ParseResult, Source, ending, walk_files
from skillopt_sleep.sources.common import (
    BadRecord,
    add_tool_name,
    answer_message,
    as_dict,
    loads,
    ms_to_iso,
    prompt_message,
    read_regular,
    stat_signature,
    tool_message,
)

#: an unfinished assistant message untouched this long (seconds) is taken as final
SETTLE_SECONDS = 300
DB_NAME = "opencode.db"


#: largest JSON file or database row read (bytes); larger ones are skipped
MAX_RECORD = 8 * 1024 * 1024


def _load(path: Path) -> Any:
    """One JSON file of the tree: ``None`` when it is not a regular file, over
    :data:`MAX_RECORD` bytes or not usable JSON (never read whole beyond the cap)."""
    try:
        return loads(read_regular(path, MAX_RECORD))
    except (OSError, ValueError):
        return None


def _ms(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _last_activity_ms(info: dict, parts: list[dict], updated_ms: Any = None) -> float:
    """The latest timestamp (epoch ms) the message's own content shows, 0 when none."""
    times = [_ms(updated_ms)]
    for rec in (info, *parts):
        for t in (
            rec.get("time"),
            (rec.get("state") or {}).get("time") if isinstance(rec.get("state"), dict) else None,
        ):
            if isinstance(t, dict):
                times += [_ms(t.get(k)) for k in ("created", "start", "end", "completed")]
    return max(times)


def _settled(info: dict, parts: list[dict], updated_ms: Any, now: float) -> bool:
    """False for an assistant message still being written (see the module docstring)."""
    if info.get("role") != "assistant":
        return True
    t = as_dict(info.get("time"))
    if t.get("completed") or info.get("error"):
        return True
    last = _last_activity_ms(info, parts, updated_ms)
    return last == 0 or now * 1000 - last > SETTLE_SECONDS * 1000


def _unquote(text: str) -> str:
    """A prompt ``opencode run "a b"`` stored as ``"a b"`` (1.18.33 quotes each argument that
    holds a space): the one pair of quotes around the whole prompt removed, so the same
    request typed in the TUI or piped (stored as typed) reads the same. A prompt with quotes
    inside is kept as it is."""
    if len(text) >= 2 and text[0] == text[-1] == '"' and '"' not in text[1:-1]:
        return text[1:-1].strip()
    return text


#: what ``opencode run`` denies in every session it creates (opencode 1.18.33)
_RUN_DENIES = frozenset({"question", "plan_enter", "plan_exit"})


def headless_permission(value: Any) -> bool:
    """Whether a session's ``permission`` ruleset (a JSON list, or its text in the database)
    is the one ``opencode run`` gives the sessions it creates: ``question``, ``plan_enter``
    and ``plan_exit`` denied for ``*``."""
    if isinstance(value, (str, bytes)):
        try:
            value = loads(value)
        except BadRecord:
            return False
    if not isinstance(value, list):
        return False
    denied = {
        r.get("permission")
        for r in value
        if isinstance(r, dict) and r.get("action") == "deny" and r.get("pattern") == "*"
    }
    return denied >= _RUN_DENIES


class _Builder:
    """Turns OpenCode message infos + parts into harvested messages of one store pass."""

    def __init__(self, source: str, skipped: Counter):
        self.source, self.skipped = source, skipped
        self.sessions: dict[str, HarvestedSession] = {}
        self.side: dict[str, bool] = {}
        self.first_prompt: dict[str, bool] = {}

    def session(self, sid: str, row: dict | None = None) -> HarvestedSession:
        sess = self.sessions.get(sid)
        if sess is None:
            sess = self.sessions[sid] = HarvestedSession(source=self.source, key=sid)
            self.side[sid] = False
        if row:
            if isinstance(row.get("directory"), str) and row["directory"]:
                sess.project = row["directory"]
            if isinstance(row.get("title"), str) and row["title"]:
                sess.title = clean(row["title"])[:200]
            if isinstance(row.get("version"), str):
                sess.agent_version = row["version"]
            t = as_dict(row.get("time"))
            sess.started_at = sess.started_at or ms_to_iso(
                t.get("created") or row.get("time_created")
            )
            self.side[sid] = bool(row.get("parentID") or row.get("parent_id"))
            sess.headless = sess.headless or headless_permission(row.get("permission"))
        return sess

    def message(self, sid: str, info: dict, parts: list[dict]) -> None:
        sess = self.session(sid)
        mid = info.get("id")
        if not isinstance(mid, str) or not mid:
            self.skipped["no_id"] += 1
            return
        role = info.get("role")
        ts = ms_to_iso(as_dict(info.get("time")).get("created"))
        model = info.get("modelID")
        if model is None and isinstance(info.get("model"), dict):
            model = info["model"].get("modelID")
        if role == "assistant" and isinstance(model, str) and model:
            sess.model = model
        side = self.side.get(sid, False)
        texts: list[str] = []
        tools: list[str] = []
        tool_msgs: list[HarvestedMessage] = []
        for p in parts:
            ptype = p.get("type")
            if ptype == "text" and isinstance(p.get("text"), str):
                if p.get("synthetic") or p.get("ignored"):
                    self.skipped["injected"] += 1
                else:
                    texts.append(p["text"])
            elif ptype == "tool":
                add_tool_name(tools, p.get("tool"))
                part_id = p.get("id")
                pid = part_id if isinstance(part_id, str) else f"{mid}:{len(tools)}"
                tool_msgs.append(_tool_part(pid, ts, side, as_dict(p.get("state"))))
            else:
                self.skipped[f"ignored_part:{ptype}"] += 1
        text = "\n".join(x.strip() for x in texts if x.strip())
        if role == "user":
            msg = self.prompt(sid, mid, ts, side, _unquote(text))
        elif role == "assistant":
            msg = answer_message(mid, ts, text, tools, side=side) if text or tools else None
            if msg is None:
                self.skipped["empty"] += 1
        else:
            self.skipped[f"unknown_role:{role}"] += 1
            msg = None
        if msg is not None:
            sess.messages += [msg, *tool_msgs]

    def prompt(
        self, sid: str, mid: str, ts: str | None, side: bool, text: str
    ) -> HarvestedMessage | None:
        """The user's prompt (None, counted, when empty); the session's first decides
        ``self_generated``."""
        if not text:
            self.skipped["empty"] += 1
            return None
        if not side and not self.first_prompt.get(sid):
            self.first_prompt[sid] = True
            self.session(sid).self_generated = SELF_MARKER in text
        return prompt_message(mid, ts, text, side=side)


def _tool_part(pid: str, ts: str | None, side: bool, state: dict[str, Any]) -> HarvestedMessage:
    """A ``tool`` part's result: its output (or error) as an excerpt; an error status or a
    non-zero exit code makes it an error."""
    out = state.get("output") if isinstance(state.get("output"), str) else state.get("error")
    exit_code = as_dict(state.get("metadata")).get("exit")
    error = state.get("status") == "error" or (isinstance(exit_code, int) and exit_code != 0)
    return tool_message(pid, ts, str(out or ""), is_error=error, side=side)


class OpenCodeSource(Source):
    """Harvester for OpenCode's SQLite database and JSON storage tree (see module doc)."""

    name = "opencode"
    mode = "snapshot"
    format_version = "OpenCode storage v2 JSON tree (synthetic) and opencode.db (opencode 1.18.33)"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        from skillopt_sleep.agents import agent_of_source

        return [agent_of_source(self.name).data_dir(env, home)]

    def discover(self, root: Path) -> Iterator[Path]:
        """``opencode.db`` and every ``storage/session/<project>/<ses>.json``."""
        db = root / DB_NAME
        if db.exists():
            yield db
        top = root / "storage" / "session" if (root / "storage").is_dir() else root / "session"
        if not top.is_dir() and root.name == "session":
            top = root
        yield from walk_files(top, ending(".json"))

    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        """Not line based: everything goes through :meth:`read_snapshot`."""
        for _ in lines:
            pass
        return self.read_snapshot(path, state)

    # ------------------------------------------------------------------ snapshots
    def signature(self, path: Path) -> str:
        if path.name == DB_NAME or path.suffix == ".db":
            return stat_signature((path, Path(f"{path}-wal")))
        return stat_signature((path, *self._tree_files(path)))

    def read_snapshot(self, path: Path, state: dict) -> ParseResult:
        if path.name == DB_NAME or path.suffix == ".db":
            return self._read_db(path, dict(state or {}))
        return self._read_tree(path, dict(state or {}))

    def count_sessions(self, path: Path) -> int:
        """Sessions in one unit (discovery): a database's ``session`` rows, else 1."""
        if path.suffix != ".db":
            return 1
        try:
            con = _connect(path)
            try:
                return int(con.execute("select count(*) from session").fetchone()[0])
            finally:
                con.close()
        except sqlite3.Error:
            return 0

    # JSON tree ----------------------------------------------------------
    @staticmethod
    def _storage(path: Path) -> Path:
        return path.parent.parent.parent  # storage/session/<project>/<ses>.json

    def _tree_files(self, path: Path) -> list[Path]:
        info = _load(path)
        sid = info.get("id") if isinstance(info, dict) else None
        if not isinstance(sid, str):
            return []
        storage = self._storage(path)
        files: list[Path] = []
        mdir = storage / "message" / sid
        try:
            msgs = sorted(mdir.glob("*.json"))
        except OSError:
            msgs = []
        for m in msgs:
            files.append(m)
            data = _load(m)
            mid = data.get("id") if isinstance(data, dict) else None
            if isinstance(mid, str):
                files += sorted((storage / "part" / mid).glob("*.json"))
        return files

    def _read_tree(self, path: Path, state: dict) -> ParseResult:
        result = ParseResult(skipped=Counter(), state=state)
        info = _load(path)
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            result.skipped["unknown_document"] += 1
            return result
        b = _Builder(self.name, result.skipped)
        sid = info["id"]
        b.session(sid, info)
        storage = self._storage(path)
        now = time.time()
        infos = []
        for m in sorted((storage / "message" / sid).glob("*.json")):
            data = _load(m)
            if not isinstance(data, dict):
                result.skipped["bad_json"] += 1
                continue
            infos.append(data)
        infos.sort(key=lambda x: (_ms(as_dict(x.get("time")).get("created")), str(x.get("id"))))
        n_bytes = 0
        for data in infos:
            parts, bad = [], 0
            for p in sorted((storage / "part" / str(data.get("id"))).glob("*.json")):
                pdata = _load(p)
                if isinstance(pdata, dict):
                    parts.append(pdata)
                else:
                    bad += 1
            if not _settled(data, parts, None, now):
                result.skipped["unfinished"] += 1
                result.pending = True
                continue
            if bad:
                result.skipped["bad_json"] += bad
            n_bytes += sum(len(json.dumps(p)) for p in parts)
            _message(b, sid, data, parts, result.skipped)
        result.sessions = list(b.sessions.values())
        result.bytes_read = n_bytes
        return result

    # SQLite -------------------------------------------------------------
    def _read_db(self, path: Path, state: dict) -> ParseResult:
        result = ParseResult(skipped=Counter(), state=state)
        hw = float(state.get("hw") or 0)
        b = _Builder(self.name, result.skipped)
        n_bytes = 0
        try:
            con = _connect(path)
        except sqlite3.Error as exc:
            result.skipped[f"db_error:{type(exc).__name__}"] += 1
            return result
        try:
            con.row_factory = sqlite3.Row
            # a row over MAX_RECORD bytes comes back without its data (skipped, counted)
            msgs = con.execute(
                "select id, session_id, time_created, time_updated, "
                "case when length(data) > ? then null else data end as data from message "
                "where time_updated > ? order by time_updated, id",
                (MAX_RECORD, hw),
            ).fetchall()
            sids = sorted({m["session_id"] for m in msgs}, key=str)
            for sid in sids:
                row = con.execute("select * from session where id = ?", (sid,)).fetchone()
                b.session(sid, dict(row) if row else None)
            now = time.time()
            new_hw, blocked = hw, False
            done: list[tuple[float, str, str, dict, list[dict]]] = []
            for m in msgs:
                try:
                    info = loads(m["data"]) if isinstance(m["data"], (str, bytes)) else None
                except BadRecord as exc:
                    result.skipped[exc.reason] += 1
                    continue
                if not isinstance(info, dict):
                    result.skipped["bad_json"] += 1
                    continue
                info.setdefault("id", m["id"])
                parts, bad, p_bytes = [], 0, 0
                for p in con.execute(
                    "select id, case when length(data) > ? then null else data end as data "
                    "from part where message_id = ? order by id",
                    (MAX_RECORD, m["id"]),
                ):
                    if not isinstance(p["data"], (str, bytes)):
                        result.skipped["bad_part"] += 1
                        continue
                    p_bytes += len(p["data"])
                    try:
                        pdata = loads(p["data"])
                    except BadRecord as exc:
                        result.skipped[exc.reason] += 1
                        continue
                    if isinstance(pdata, dict):
                        pdata.setdefault("id", p["id"])
                        parts.append(pdata)
                if not _settled(info, parts, m["time_updated"], now):
                    result.skipped["unfinished"] += 1
                    result.pending = True
                    blocked = True  # the high-water mark stops before it
                    continue
                if bad:
                    result.skipped["bad_json"] += bad
                n_bytes += p_bytes + len(m["data"] or "")
                done.append((_ms(m["time_created"]), str(m["id"]), m["session_id"], info, parts))
                if not blocked:
                    new_hw = max(new_hw, _ms(m["time_updated"]))
            # in the order they were written: a prompt's row is updated (its summary) after
            # the answer to it, so update order is not conversation order
            for _created, _mid, sid, info, parts in sorted(done, key=lambda d: d[:2]):
                _message(b, sid, info, parts, result.skipped)
            state["hw"] = new_hw
        except sqlite3.Error as exc:
            result.skipped[f"db_error:{type(exc).__name__}"] += 1
        finally:
            con.close()
        result.sessions = list(b.sessions.values())
        result.bytes_read = n_bytes
        result.state = state
        return result


def _message(b: _Builder, sid: Any, info: dict, parts: list[dict], skipped: Counter) -> None:
    """One message into ``b``; a row of unexpected shape is skipped and counted
    (``bad_record:<error>``), never blocking the messages after it."""
    try:
        b.message(str(sid), info, parts)
    except Exception as exc:
        skipped[f"bad_record:{type(exc).__name__}"] += 1


def _connect(path: Path) -> sqlite3.Connection:
    """Open a SQLite database read-only (``mode=ro``): this tool never writes agent files."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
