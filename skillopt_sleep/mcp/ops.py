"""What the MCP tools do, as plain synchronous functions over a :class:`ServerState`.

Every failure a caller can cause is a :class:`~skillopt_sleep.errors.SkilloptError` with a
one-line reason (``ProposalError`` for unknown ids / stale bases, ``NightError`` for a night
already running, :class:`BadArgument` for bad arguments and targets outside the managed roots).
The only writes to a user's files go through :func:`skillopt_sleep.proposals.adopt` and
:func:`skillopt_sleep.proposals.rollback`.
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillopt_sleep import paths, proposals
from skillopt_sleep.config import KNOWN_SOURCES, Settings, load_settings
from skillopt_sleep.errors import NightError, ProposalError, SkilloptError, StoreError
from skillopt_sleep.mcp import models as m
from skillopt_sleep.night import lifecycle
from skillopt_sleep.night.document import Document, read_live, sha256_text
from skillopt_sleep.status import collect_status, night_view
from skillopt_sleep.store import Store

SettingsLoader = Callable[..., Settings]


class BadArgument(SkilloptError):
    """A tool argument is invalid (bad path, unknown agent, target outside the managed roots)."""


def one_line(text: str, limit: int = 600) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def default_settings_loader(**overrides: Any) -> Settings:
    return load_settings(None, **overrides)


class ServerState:
    """What the server's lifespan holds: the store (one connection, used under ``lock``), how
    to load settings, and the nights this process started (with their progress lines)."""

    def __init__(
        self, store_path: Path | None = None, settings_loader: SettingsLoader | None = None
    ):
        self.store_path = Path(store_path) if store_path else None
        self.settings_loader = settings_loader or default_settings_loader
        self.store: Store | None = None
        self.store_error = ""
        self.lock = threading.RLock()
        self.progress: dict[int, collections.deque[str]] = {}
        self.progress_lock = threading.Lock()  # the night thread appends while tools read
        self.thread: threading.Thread | None = None
        self.thread_night: int | None = None

    def db_path(self) -> Path:
        return self.store_path or paths.db_path()

    def open(self) -> None:
        try:
            self.store = Store(self.db_path())
        except StoreError as exc:  # the server still starts; every tool reports this
            self.store, self.store_error = None, str(exc)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def use(self) -> Store:
        if self.store is None:
            raise StoreError(self.store_error or "the store is not open (server not started)")
        return self.store


def _locked(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(state: ServerState, *args: Any, **kwargs: Any) -> Any:
        with state.lock:
            try:
                return fn(state, *args, **kwargs)
            except sqlite3.Error as exc:
                raise StoreError(f"database error: {exc}") from None

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


# ---------------------------------------------------------------------------- nights / status
def night_running(state: ServerState) -> bool:
    if state.thread is not None and state.thread.is_alive():
        return True
    return not lifecycle.lock_free()


def _night(state: ServerState, row: dict[str, Any]) -> m.NightInfo:
    view = night_view(row)
    view["dry_run"] = bool(row.get("dry_run"))
    view["running"] = row.get("status") == "running"
    with state.progress_lock:
        view["progress"] = list(state.progress.get(row["id"], ()))
    return m.NightInfo(**view)


@_locked
def sleep_status(state: ServerState) -> m.Status:
    data = collect_status(state.use())
    nights = [_night(state, r) for r in lifecycle.seen_as(state.use().nights.recent(5))]
    return m.Status(
        database=str(state.db_path()),
        counts=data["counts"],
        night_running=night_running(state),
        last_night=nights[0] if nights else None,
        nights=nights,
        last_error=data["last_error"],
        pending_proposals=[m.PendingProposal(**p) for p in data["pending_proposals"]],
        harvest=data["harvest"],
        daemon=data.get("daemon") or _daemon_status(),
    )


def _daemon_status() -> dict[str, Any]:
    try:
        from skillopt_sleep.daemon.control import daemon_status

        return daemon_status(timeout=1.0)
    except Exception as exc:  # the daemon is optional; its status never fails ours
        return {"running": False, "error": one_line(f"{type(exc).__name__}: {exc}", 200)}


@_locked
def get_night(state: ServerState, night_id: int) -> m.NightInfo:
    found = lifecycle.seen_as([r for r in [state.use().nights.get(night_id)] if r])
    row = found[0] if found else None
    if not row:
        last = state.use().nights.recent(1)
        hint = f"; the latest is {last[0]['id']}" if last else "; no night has run yet"
        raise BadArgument(f"no night {night_id}{hint}")
    return _night(state, row)


def _project_arg(project: str | None, *, must_exist: bool = True) -> Path | None:
    """An agent's ``project`` argument: absolute (the server's cwd means nothing to the
    caller), ``~`` expanded; a directory unless ``must_exist`` is off (filters may name a
    project folder that is gone). Raises BadArgument."""
    if not project:
        return None
    path = Path(project).expanduser()
    if not path.is_absolute():
        raise BadArgument(f"project must be an absolute path, got {project!r}")
    if not path.is_dir():
        if must_exist:
            raise BadArgument(f"project {project!r} is not a directory")
        return Path(os.path.normpath(path))
    return path.resolve()


def _under(project: str | None, root: Path) -> bool:
    r = str(root).rstrip("/")
    return bool(project) and (project == r or project.startswith(r + "/"))


def _daemon_run_now(
    state: ServerState, before: int, dry_run: bool, project: Path | None, wait_seconds: float
) -> int | None:
    """Ask a running daemon to start the night (its control channel's ``run-now``); the new
    night's id, or None when no daemon answers. Only plain nights go to the daemon, and only
    one started with this server's config file (it runs with its own settings); dry runs and
    project-scoped nights run in this process."""
    if dry_run or project is not None:
        return None
    try:
        from skillopt_sleep.daemon import control
    except ImportError:  # pragma: no cover - the daemon is optional
        return None
    from skillopt_sleep.daemon import process

    if not process.runs_with_config(getattr(state.settings_loader, "config_path", None)):
        return None  # no daemon, or one with another config: this night is ours to run
    try:
        reply = control.request("run-now", timeout=30, wait=False, trigger="mcp")
    except control.NoDaemon:
        return None
    if not reply.get("ok"):
        raise NightError(one_line(reply.get("error") or "the daemon refused to start a night"))
    nid = reply.get("night_id") or (reply.get("result") or {}).get("night_id")
    if nid:
        return int(nid)
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        found = state.use().nights.newest_after(before)
        if found is not None:
            return found
        time.sleep(0.1)
    raise NightError(
        "the daemon accepted the night but it did not start within "
        f"{wait_seconds:.0f} s; see sleep_status"
    )


def start_night(
    state: ServerState, dry_run: bool, project: str | None, wait_seconds: float = 15.0
) -> m.NightStarted:
    """Start a night in a background thread (or through the daemon) and return its id as soon
    as its ``nights`` row exists. Raises NightError when a night is already running."""
    from skillopt_sleep.night.run import run_night

    state.use()
    proj = _project_arg(project)
    settings = state.settings_loader(project=proj)  # ConfigError -> a tool error, nothing started
    with state.lock:
        if state.thread is not None and state.thread.is_alive():
            raise NightError(
                f"a night is running (night {state.thread_night}, started by this server)"
            )
        if night_running(state):
            now = lifecycle.running(state.use())
            raise NightError(f"a night is running{now.since() if now else ''}")
        before = state.use().nights.max_id()
        nid = _daemon_run_now(state, before, dry_run, proj, wait_seconds)
        if nid is not None:
            return m.NightStarted(night_id=nid, status="running", via="daemon")

        started = threading.Event()
        box: dict[str, Any] = {}
        db_path = state.db_path()
        pid = os.getpid()

        def worker() -> None:
            store = None
            try:
                store = Store(db_path)

                def progress(msg: str) -> None:
                    if "night_id" not in box:
                        found = store.nights.newest_after(before, trigger="mcp", pid=pid)
                        if found is not None:
                            box["night_id"] = found
                            with state.progress_lock:
                                state.progress[found] = collections.deque(maxlen=40)
                            state.thread_night = found
                        started.set()
                    if "night_id" in box:
                        with state.progress_lock:
                            state.progress[box["night_id"]].append(one_line(msg, 300))

                result = run_night(
                    store, settings, dry_run=dry_run, trigger="mcp", progress=progress
                )
                box.setdefault("night_id", result.night_id)
            except BaseException as exc:  # recorded in the nights row by run_night; kept here too
                box["error"] = exc
            finally:
                if store is not None:
                    store.close()
                started.set()

        thread = threading.Thread(target=worker, name="skillopt-sleep-mcp-night", daemon=False)
        state.thread = thread
        thread.start()
    started.wait(wait_seconds)
    nid = box.get("night_id")
    if nid is None:
        with state.lock:
            nid = state.use().nights.newest_after(before, trigger="mcp", pid=pid)
    if nid is None:
        err = box.get("error")
        if err is not None:
            raise (
                err
                if isinstance(err, SkilloptError)
                else NightError(f"the night could not start: {type(err).__name__}: {err}")
            )
        raise NightError(f"the night did not start within {wait_seconds:.0f} s")
    state.thread_night = nid
    with state.lock:
        row = state.use().nights.get(nid)
    return m.NightStarted(
        night_id=nid, status=row["status"] if row else "running", via="in-process"
    )


# ---------------------------------------------------------------------------- proposals
def _summary(row: dict[str, Any]) -> m.ProposalSummary:
    return m.ProposalSummary(**{k: row.get(k) for k in m.ProposalSummary.model_fields})


@_locked
def list_proposals(state: ServerState, status: str | None, limit: int) -> m.ProposalList:
    rows = proposals.list_proposals(state.use(), status)[:limit]
    return m.ProposalList(proposals=[_summary(r) for r in rows])


@_locked
def get_proposal(state: ServerState, proposal_id: str) -> m.ProposalDetail:
    row = proposals.get_proposal(state.use(), proposal_id)
    report = proposals.load_report(row)
    try:
        diff = (Path(row["dir"]) / "diff.patch").read_text("utf-8")
    except OSError as exc:
        raise ProposalError(f"proposal {proposal_id}: diff unreadable ({exc})") from None
    base = _summary(row).model_dump()
    return m.ProposalDetail(
        **base,
        new_hash=row.get("new_hash"),
        diff=diff,
        edits=[m.EditInfo(**e) for e in report.get("edits", [])],
        val_tasks=[m.TaskDelta(**t) for t in report.get("val_tasks", [])],
        test_tasks=[m.TaskDelta(**t) for t in report.get("test_tasks", [])],
        cost=report.get("cost") or {},
        summary=report.get("summary") or {},
        report_uri=f"skillopt://proposals/{row['id']}",
    )


@_locked
def adopt_proposal(state: ServerState, proposal_id: str, base_hash: str) -> m.AdoptResult:
    a = proposals.adopt(state.use(), proposal_id, base_hash=base_hash)
    return m.AdoptResult(
        proposal_id=a["proposal_id"],
        target_path=a["target_path"],
        adopted_at=a["adopted_at"],
        backup_path=a["backup_path"] or "",
        before_hash=a["before_hash"] or "",
        after_hash=a["after_hash"] or "",
    )


@_locked
def reject_proposal(state: ServerState, proposal_id: str, reason: str) -> m.RejectResult:
    row = proposals.reject(state.use(), proposal_id, reason)
    return m.RejectResult(proposal_id=row["id"], status=row["status"], reason=row["reason"] or "")


def managed_targets(store: Store) -> dict[str, str]:
    """Every live file some proposal or adoption refers to: ``{resolved path: stored path}``."""
    out: dict[str, str] = {}
    for p in store.proposals.targets():
        out[str(Path(p).expanduser().resolve())] = p
        out.setdefault(p, p)
    return out


def resolve_managed(store: Store, target: str) -> str:
    """The stored form of ``target``; BadArgument when no proposal/adoption refers to it."""
    known = managed_targets(store)
    key = str(Path(target).expanduser().resolve()) if target.strip() else ""
    if key in known:
        return known[key]
    names = sorted(set(known.values()))
    listed = ", ".join(names[:5]) if names else "none yet (no proposal has been staged)"
    raise BadArgument(f"{target!r} is outside the managed targets; managed: {listed}")


@_locked
def rollback(state: ServerState, target: str | None) -> m.RollbackResult:
    path = resolve_managed(state.use(), target) if target else None
    a = proposals.rollback(state.use(), path)
    return m.RollbackResult(
        proposal_id=a["proposal_id"],
        target_path=a["target_path"],
        rolled_back_at=a["rolled_back_at"],
        restored_previous=bool(a["existed_before"]),
    )


@_locked
def get_skill(state: ServerState, target: str | None) -> m.SkillInfo:
    store = state.use()
    if target:
        path = resolve_managed(store, target)
    else:
        latest = store.proposals.latest()
        if latest is None:
            raise BadArgument(
                "no managed target yet: no proposal has been staged (run a night first)"
            )
        path = latest["target_path"]
    text = read_live(Path(path))
    doc = Document.parse(text)
    return m.SkillInfo(
        target=path,
        exists=text is not None,
        sha256=sha256_text(text),
        managed_block=doc.had_block,
        rules=doc.rules,
        text=text or "",
    )


# ---------------------------------------------------------------------------- tasks / search
@_locked
def list_tasks(state: ServerState, project: str | None, limit: int) -> m.TaskList:
    root = _project_arg(project, must_exist=False)
    tasks = state.use().tasks.all()
    if root is not None:
        tasks = [t for t in tasks if _under(t.project, root)]
    return m.TaskList(
        total=len(tasks),
        tasks=[
            m.TaskInfo(
                id=t.id,
                project=t.project,
                intent=t.intent,
                split=t.split,
                sessions=len(t.sessions),
                checks=[c.model_dump() for c in t.checks],
                corrections=t.corrections,
                synthetic=t.synthetic,
            )
            for t in tasks[:limit]
        ],
    )


@_locked
def search_sessions(
    state: ServerState, query: str, agent: str | None, project: str | None, limit: int
) -> m.SearchResult:
    if not query.strip():
        raise BadArgument("query is empty")
    root = _project_arg(project, must_exist=False)
    if agent and agent not in KNOWN_SOURCES:
        raise BadArgument(f"unknown agent {agent!r}; known: {', '.join(KNOWN_SOURCES)}")
    rows = state.use().sessions.search(
        query, source=agent, project=None if root is None else str(root), limit=limit
    )
    return m.SearchResult(
        query=query,
        hits=[
            m.SearchHit(
                message_id=r.message_id,
                session_id=r.session_id,
                agent=r.source,
                project=r.project,
                role=r.role,
                kind=r.kind,
                timestamp=r.timestamp,
                snippet=r.snippet,
            )
            for r in rows
        ],
    )


# ---------------------------------------------------------------------------- resources
@_locked
def proposal_markdown(state: ServerState, proposal_id: str) -> str:
    row = proposals.get_proposal(state.use(), proposal_id)
    report = proposals.report_markdown(row)
    return (
        f"<!-- status: {row['status']}; base_hash: {row['base_hash'] or '(absent)'} -->\n" + report
    )


@_locked
def latest_report(state: ServerState) -> str:
    store = state.use()
    latest = store.proposals.latest()
    if latest:
        return proposal_markdown(state, latest["id"])
    nights = lifecycle.seen_as(store.nights.recent(1))
    if not nights:
        return "# No report yet\n\nNo night has run. Call the `run_night` tool to start one.\n"
    n = night_view(nights[0])
    return (
        f"# No proposal yet\n\nThe latest night ({n['id']}) ended `{n['status']}`"
        f"{': ' + n['error'] if n['error'] else ''}.\n\n```json\n"
        f"{json.dumps(n['summary'], indent=2)}\n```\n"
    )
