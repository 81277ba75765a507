"""Devin CLI transcripts: ``<data>/devin/cli/transcripts/<session-id>.json`` (corpus SCHEMAS.md §4).

``<data>`` is ``$XDG_DATA_HOME`` or ``~/.local/share`` (Linux and macOS; macOS also
``~/Library/Application Support``), ``%APPDATA%`` on Windows. Override with
``[sources.devin] roots = [...]`` (the ``cli`` folder or a ``transcripts`` folder).

Each transcript is one JSON document, read whole and re-read when its size, mtime and hash
change (uids are stable, so a re-read only adds what is new). Two shapes are understood:

* **ATIF** (``schema_version`` ``"ATIF-v1.x"``): ``steps[]`` with ``source`` ``user`` /
  ``agent`` / ``system``, ``message`` (a string or content parts), ``tool_calls[]``
  (``function_name``), ``observation.results[]`` and ``timestamp``. ``system`` steps and
  user steps whose ``metadata.is_user_input`` is false are injected context (dropped, counted).
  Agent retries (the same ``metadata.request_id`` / ``extra.request_id``) are stored once.
* the **sessions.db projection** ``{session: {id, working_directory, title, model, …},
  nodes: [{role, content, tool_calls, metadata.is_user_input}]}``.

Session key = ``session_id`` (else the file stem). Project = a working directory in the
document (``session.working_directory``, ``extra``/``agent.extra`` ``cwd``/``working_directory``),
else the ``working_directory`` of that session in the sibling ``sessions.db`` (opened
read-only). ``self_generated``: the first prompt contains
:data:`~skillopt_sleep.sources.base.SELF_MARKER`.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from skillopt_sleep.models import HarvestedSession
from skillopt_sleep.redact import clean
from skillopt_sleep.sources.base import SELF_MARKER, ParseResult, Source
from skillopt_sleep.sources.common import (
    BadRecord,
    add_tool_name,
    answer_message,
    as_dict,
    loads,
    looks_like_path,
    ms_to_iso,
    prompt_message,
    tool_message,
)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            p.get("text", "") if isinstance(p, dict) else p if isinstance(p, str) else ""
            for p in value
        ).strip()
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return value["text"]
    return ""


def _cwd(*dicts: Any) -> str | None:
    for d in dicts:
        if isinstance(d, dict):
            for k in ("working_directory", "cwd", "workdir", "workspace"):
                if looks_like_path(d.get(k)):
                    return d[k]
    return None


def _db_cwd(path: Path, key: str) -> str | None:
    """The session's ``working_directory`` in the sibling ``sessions.db`` (read-only)."""
    for db in (path.parent.parent / "sessions.db", path.parent / "sessions.db"):
        if not db.is_file():
            continue
        try:
            con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=2)
            try:
                row = con.execute(
                    "select working_directory from sessions where id = ?", (key,)
                ).fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            continue
        if row and looks_like_path(row[0]):
            return row[0]
    return None


class DevinSource(Source):
    """Harvester for Devin CLI ATIF transcripts (see module doc)."""

    name = "devin"
    format_version = "Devin CLI ATIF-v1.7 transcripts and sessions.db projections, shapes checked upstream against CLI 3000.3.27 (synthetic)"
    mode = "whole_file"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        from skillopt_sleep.agents import agent_of_source

        # Windows %APPDATA%\devin, elsewhere $XDG_DATA_HOME/devin (~/.local/share/devin)
        roots = [agent_of_source(self.name).data_dir(env, home) / "cli" / "transcripts"]
        if os.name != "nt" and sys.platform == "darwin":
            roots.append(home / "Library" / "Application Support" / "devin" / "cli" / "transcripts")
        return roots

    def discover(self, root: Path) -> Iterator[Path]:
        top = root / "transcripts" if (root / "transcripts").is_dir() else root
        try:
            names = sorted(os.listdir(top))
        except OSError:
            return
        for name in names:
            if name.endswith(".json"):
                yield top / name

    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        result = ParseResult(skipped=Counter(), state=dict(state or {}))
        for raw in lines:
            try:
                doc = loads(raw)
            except BadRecord as exc:
                result.skipped[exc.reason] += 1
                continue
            if not isinstance(doc, dict):
                result.skipped["not_an_object"] += 1
            elif isinstance(doc.get("steps"), list):
                result.sessions.append(self._atif(path, doc, result.skipped))
            elif isinstance(doc.get("nodes"), list) and isinstance(doc.get("session"), dict):
                result.sessions.append(self._projection(path, doc, result.skipped))
            else:
                result.skipped["unknown_document"] += 1
        return result

    # ------------------------------------------------------------------ shapes
    def _atif(self, path: Path, doc: dict, skipped: Counter) -> HarvestedSession:
        session_id = doc.get("session_id")
        key = session_id if isinstance(session_id, str) and session_id else path.stem
        agent = as_dict(doc.get("agent"))
        sess = HarvestedSession(source=self.name, key=key)
        if isinstance(agent.get("model_name"), str):
            sess.model = agent["model_name"]
        if isinstance(agent.get("version"), str):
            sess.agent_version = agent["version"]
        sess.project = _cwd(
            doc, doc.get("extra"), agent.get("extra"), doc.get("metadata")
        ) or _db_cwd(path, key)
        if isinstance(doc.get("title"), str):
            sess.title = clean(doc["title"])[:200]
        _Turns(sess, skipped).walk(key, doc["steps"], steps=True)
        return sess

    def _projection(self, path: Path, doc: dict, skipped: Counter) -> HarvestedSession:
        row = doc["session"]
        key = row.get("id") if isinstance(row.get("id"), str) and row["id"] else path.stem
        sess = HarvestedSession(
            source=self.name,
            key=key,
            project=_cwd(row) or _db_cwd(path, key),
            started_at=ms_to_iso(row.get("created_at")),
        )
        if isinstance(row.get("model"), str):
            sess.model = row["model"]
        if isinstance(row.get("title"), str):
            sess.title = clean(row["title"])[:200]
        _Turns(sess, skipped).walk(key, doc["nodes"], steps=False)
        return sess


class _Turns:
    """The messages of one session, from ATIF steps or projection nodes: the first prompt
    decides ``self_generated``, an answer whose request was seen is a retry."""

    def __init__(self, sess: HarvestedSession, skipped: Counter) -> None:
        self.sess, self.skipped = sess, skipped
        self.first = True
        self.seen_requests: set[str] = set()

    def prompt(self, uid: str, ts: str | None, text: str, meta: dict[str, Any]) -> None:
        if meta.get("is_user_input") is False:
            self.skipped["injected"] += 1
            return
        if not text:
            self.skipped["empty"] += 1
            return
        if self.first:
            self.first = False
            self.sess.self_generated = SELF_MARKER in text
        self.sess.messages.append(prompt_message(uid, ts, text))

    def retry(self, rid: Any) -> bool:
        """True (counted) when the request ``rid`` was answered already."""
        if isinstance(rid, str) and rid:
            if rid in self.seen_requests:
                self.skipped["retry"] += 1
                return True
            self.seen_requests.add(rid)
        return False

    def walk(self, key: str, items: list[Any], *, steps: bool) -> None:
        """ATIF ``steps`` (``steps``) or projection ``nodes``, each with its uid."""
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                self.skipped["bad_step" if steps else "bad_node"] += 1
            elif steps:
                self.step(f"{key}:{item.get('step_id', n)}", item)
            else:
                self.node(f"{key}:{item.get('message_id') or item.get('node_id') or n}", item)

    def step(self, uid: str, step: dict[str, Any]) -> None:
        """One ATIF step: a user prompt, or an agent answer with its observations."""
        stamp = step.get("timestamp")
        ts = stamp if isinstance(stamp, str) else ms_to_iso(stamp)
        if ts and not self.sess.started_at:
            self.sess.started_at = ts
        meta = as_dict(step.get("metadata"))
        extra = as_dict(step.get("extra"))
        source = step.get("source")
        text = _text(step.get("message")).strip()
        if source == "user":
            self.prompt(uid, ts, text, meta)
        elif source == "agent":
            if self.retry(meta.get("request_id") or extra.get("request_id")):
                return
            model = extra.get("generation_model") or meta.get("generation_model")
            if isinstance(model, str) and model:
                self.sess.model = model
            tools: list[str] = []
            for call in step.get("tool_calls") or []:
                if isinstance(call, dict):
                    add_tool_name(tools, call.get("function_name") or call.get("name"))
            if text or tools:
                self.sess.messages.append(answer_message(uid, ts, text, tools))
            else:
                self.skipped["empty"] += 1
            self.observations(uid, ts, step.get("observation"))
        elif source == "system":
            self.skipped["system_message"] += 1
        else:
            self.skipped[f"unknown_source:{source}"] += 1

    def observations(self, uid: str, ts: str | None, obs: Any) -> None:
        results = obs.get("results") if isinstance(obs, dict) else None
        for j, r in enumerate(results if isinstance(results, list) else []):
            content = _text(r.get("content")) if isinstance(r, dict) else ""
            failed = bool(isinstance(r, dict) and r.get("is_error"))
            self.sess.messages.append(tool_message(f"{uid}:o{j}", ts, content, is_error=failed))

    def node(self, uid: str, node: dict[str, Any]) -> None:
        """One projection node: a chat message of the user, the assistant or a tool."""
        chat = node.get("chat_message")
        msg = chat if isinstance(chat, dict) else node
        meta = as_dict(msg.get("metadata"))
        role, text = msg.get("role"), _text(msg.get("content")).strip()
        if role == "user":
            self.prompt(uid, None, text, meta)
        elif role == "assistant":
            if self.retry(meta.get("request_id")):
                return
            tools: list[str] = []
            for call in msg.get("tool_calls") or []:
                if isinstance(call, dict):
                    name = call.get("name") or (call.get("function") or {}).get("name")
                    add_tool_name(tools, name)
            self.sess.messages.append(answer_message(uid, None, text, tools))
        elif role == "tool":
            self.sess.messages.append(tool_message(uid, None, text, is_error=False))
        elif role == "system":
            self.skipped["system_message"] += 1
        else:
            self.skipped[f"unknown_role:{role}"] += 1
