"""OpenClaw sessions (npm ``openclaw``; checked against the files 2026.9.6 writes, docs/sources.md).
Root: ``<state>/agents`` with ``<state>`` = ``$OPENCLAW_STATE_DIR`` or ``~/.openclaw`` (and,
without ``$OPENCLAW_STATE_DIR``, each ``~/.openclaw-<profile>/agents`` that ``openclaw --profile``
made). Override
with ``[sources.openclaw] roots = [...]``.

Two generations, both per agent (``agents/<agentId>/``):

* **SQLite** ``agent/openclaw-agent.sqlite`` (2026.9.x; WAL), opened **read-only**: table
  ``transcript_events`` (``session_id``, ``seq``, ``event_json`` — or ``event_zstd``, the same
  JSON zstd-compressed — ``created_at``). Incremental per session: ``state["seq"][session]``
  is the last ``seq`` read; each pass reads only later events.
* the older **JSONL** files ``sessions/<session>.jsonl`` (``sessions.json`` beside them is an
  index, not read): one event a line, read by byte offset.

An event is an entry of Pi's session format (OpenClaw's embedded agent runtime is Pi's; format
version 4): a ``session`` header (``id``, ``cwd``: the agent's workspace), ``model_change``,
``message`` entries (``user`` / ``assistant`` / ``toolResult`` …, parsed by
:func:`~skillopt_sleep.sources.common.pi_message`) and ``custom`` entries (OpenClaw's
bookkeeping: ``model-snapshot``, ``openclaw:bootstrap-context:full`` …), counted as
``ignored_type:<type>``. uids are ``<session id>:<entry id>``. The project is the header's
``cwd``. A session whose first prompt carries :data:`SELF_MARKER` is ``self_generated``.

``headless`` (checked against 2026.9.6, running ``openclaw agent --local`` and ``openclaw tui
--local`` against the simulator and diffing what each stored): the transcript events of the
two are alike (user content, ``custom`` entries; only ``__openclaw.senderIsOwner`` differs,
which says who sent a message, not how), but the database's runtime trace
(``trajectory_runtime_events``, on by default) starts each run with a ``trace.metadata``
event whose ``data.harness.invocation`` is the command line that ran the turn. A session
whose first traced run was ``openclaw agent`` (a one-shot turn from a script or a shell, the
analogue of ``claude -p``) is ``headless``; ``tui`` / ``chat`` (interactive) and turns a
running gateway made (channels, ``openclaw agent`` without ``--local``, whose trace names the
gateway's command line) are not. A session without a trace (the trace switched off, or the
JSONL files of older builds, which keep none) is not marked.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from skillopt_sleep.redact import decode
from skillopt_sleep.sources.base import ParseResult, ReadMode, Source, ending, walk_files
from skillopt_sleep.sources.common import (
    BadRecord,
    PiSession,
    loads,
    parse_pi_lines,
    stat_signature,
)

DB_NAME = "openclaw-agent.sqlite"
#: an event's size cap in the database (``event_utf8_bytes`` is at most 4 MiB)
MAX_EVENT = 4 * 1024 * 1024


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)


def _fresh(key: str) -> dict[str, Any]:
    return {"key": key, "line": 0, "fp": False, "self": False}


#: global options of ``openclaw`` that take a value (before the command)
_VALUED = {"--container", "--log-level", "--profile"}


def headless_invocation(argv: Any) -> bool:
    """Whether a run's command line (``trace.metadata``'s ``data.harness.invocation``: node,
    the CLI's script, its arguments) is ``openclaw agent`` (a one-shot turn)."""
    if not isinstance(argv, list):
        return False
    args = [a for a in argv if isinstance(a, str)]
    at = next((i for i, a in enumerate(args) if Path(a).name in ("openclaw.mjs", "openclaw")), None)
    if at is None:
        return False
    rest = iter(args[at + 1 :])
    for a in rest:
        if a in _VALUED:
            next(rest, None)
        elif not a.startswith("-"):
            return a == "agent"
    return False


def _first_invocation(con: sqlite3.Connection, sid: str) -> Any:
    """The command line of the session's first traced run (None: no trace of it)."""
    try:
        row = con.execute(
            "select json_extract(event_json, '$.data.harness.invocation') "
            "from trajectory_runtime_events where session_id = ? "
            "and json_extract(event_json, '$.type') = 'trace.metadata' order by seq limit 1",
            (sid,),
        ).fetchone()
    except sqlite3.Error:  # no trace table (an older build), or an unreadable row
        return None
    if row is None or not isinstance(row[0], str):
        return None
    try:
        return loads(row[0])
    except BadRecord:
        return None


class OpenClawSource(Source):
    """Harvester for OpenClaw's per-agent SQLite transcripts and legacy JSONL (module doc)."""

    name = "openclaw"
    mode = "snapshot"
    format_version = "openclaw 2026.9.6 openclaw-agent.sqlite transcript_events (session v4)"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        """``<state>/agents``; without ``$OPENCLAW_STATE_DIR`` also each profile's
        (``openclaw --profile NAME`` keeps its state in ``~/.openclaw-NAME``), sorted."""
        from skillopt_sleep.agents import agent_of_source

        state = agent_of_source(self.name).home(env, home)
        roots = [state / "agents"]
        if not env.get("OPENCLAW_STATE_DIR", "").strip():
            try:
                profiles = sorted(
                    p / "agents" for p in state.parent.glob(".openclaw-*") if p.is_dir()
                )
            except OSError:
                profiles = []
            roots += profiles
        return roots

    def discover(self, root: Path) -> Iterator[Path]:
        """Each agent's ``agent/openclaw-agent.sqlite`` and ``sessions/*.jsonl``, sorted."""
        try:
            agents = sorted(p for p in root.iterdir() if p.is_dir())
        except FileNotFoundError:
            return
        for agent in agents:
            db = agent / "agent" / DB_NAME
            if db.is_file():
                yield db
            yield from walk_files(agent / "sessions", ending(".jsonl"))

    def read_mode(self, path: Path) -> ReadMode:
        return "jsonl" if path.suffix == ".jsonl" else "snapshot"

    # JSONL (older builds) ------------------------------------------------------
    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        return parse_pi_lines(self.name, lines, dict(state) if state else _fresh(path.stem))

    # SQLite (2026.9.x) -----------------------------------------------------------
    def signature(self, path: Path) -> str:
        return stat_signature((path, Path(f"{path}-wal")))

    def count_sessions(self, path: Path) -> int:
        if path.suffix == ".jsonl":
            return 1
        try:
            con = _connect(path)
            try:
                row = con.execute("select count(distinct session_id) from transcript_events")
                return int(row.fetchone()[0])
            finally:
                con.close()
        except sqlite3.Error:
            return 0

    def read_snapshot(self, path: Path, state: dict) -> ParseResult:
        state = dict(state or {})
        seqs: dict[str, int] = dict(state.get("seq") or {})
        sessions: dict[str, dict] = dict(state.get("sessions") or {})
        result = ParseResult(skipped=Counter(), state=state)
        try:
            con = _connect(path)
        except sqlite3.Error as exc:
            result.skipped[f"db_error:{type(exc).__name__}"] += 1
            return result
        passes: dict[str, PiSession] = {}
        n_bytes = 0
        try:
            rows = con.execute(
                "select session_id, seq, event_json, event_zstd from transcript_events "
                "order by session_id, seq"
            ).fetchall()
            for sid, seq, text, packed in rows:
                if not isinstance(sid, str) or not isinstance(seq, int):
                    result.skipped["bad_row"] += 1
                    continue
                if seq <= seqs.get(sid, -1):
                    continue
                seqs[sid] = seq
                rec = self._event(text, packed, result.skipped)
                n_bytes += len(text or "") + len(packed or b"")
                if rec is None:
                    continue
                one = passes.get(sid)
                if one is None:
                    st = dict(sessions.get(sid) or _fresh(sid))
                    one = passes[sid] = PiSession(self.name, st)
                try:
                    one.record(rec, result.skipped, seq == 0)
                except (TypeError, ValueError, AttributeError) as exc:
                    result.skipped[f"malformed:{type(exc).__name__}"] += 1
            for sid, one in passes.items():
                if "headless" not in one.st:  # decided once, by the session's first run
                    argv = _first_invocation(con, sid)
                    if argv is not None:
                        one.st["headless"] = headless_invocation(argv)
        except sqlite3.Error as exc:
            result.skipped[f"db_error:{type(exc).__name__}"] += 1
        finally:
            con.close()
        for sid, one in passes.items():
            result.sessions.append(one.done())
            sessions[sid] = {
                k: one.st[k]
                for k in ("key", "line", "fp", "self", "cwd", "started", "headless")
                if k in one.st
            }
        state["seq"], state["sessions"] = seqs, sessions
        result.bytes_read = n_bytes
        return result

    @staticmethod
    def _event(text: Any, packed: Any, skipped: Counter) -> dict | None:
        """One event row's JSON object (``event_zstd`` decompressed), None when unreadable."""
        import zstandard

        try:
            if isinstance(text, str):
                raw = text
            elif isinstance(packed, bytes):
                unpacked = zstandard.ZstdDecompressor().decompress(
                    packed, max_output_size=MAX_EVENT
                )
                raw = decode(unpacked)
            else:
                skipped["empty_event"] += 1
                return None
            rec = loads(raw)
        except zstandard.ZstdError:
            skipped["bad_zstd"] += 1
            return None
        except BadRecord as exc:
            skipped[exc.reason] += 1
            return None
        if not isinstance(rec, dict):
            skipped["not_an_object"] += 1
            return None
        return rec
