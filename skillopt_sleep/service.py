"""The application service: every operation the faces offer, in one place.

The CLI, the MCP tools and the daemon's night worker call a :class:`Service` and nothing
below it; they parse a request, call one method, and print or return its typed result
(:mod:`skillopt_sleep.results`). The service owns:

* **the night dispatch policy** (:meth:`Service.dispatch`): a night asked for now runs in the
  running daemon only when the daemon would run the very night this caller would — a plain
  night (no dry run, no project, no backend flags), with the same config file and the same
  ``SKILLOPT_SLEEP_*`` settings variables; otherwise here, and the decision says why;
* running a night here (waiting, or in a background thread that reports the night's id as
  soon as its row exists, through ``on_started`` — never by polling the store);
* status, proposals (list, show, adopt, reject, rollback), the managed documents, stored
  tasks, full-text search.

Errors are :class:`~skillopt_sleep.errors.SkilloptError` subclasses with a one-line reason;
a database failure is a :class:`~skillopt_sleep.errors.StoreError`.

A :class:`Service` holds one store connection, opened on first use and shared by its methods
under a lock (the MCP server calls it from several threads); a night it runs in a background
thread opens its own.
"""

from __future__ import annotations

import collections
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_sleep import paths
from skillopt_sleep.config import KNOWN_SOURCES, Settings, load_settings
from skillopt_sleep.errors import (
    BadArgument,
    ConfigError,
    NightError,
    ProposalError,
    SkilloptError,
    StoreError,
    one_line,
)
from skillopt_sleep.results import (
    AdoptResult,
    DaemonStatus,
    Dispatch,
    DoctorCheck,
    NightLog,
    NightOutcome,
    NightResult,
    NightView,
    OnProgress,
    PendingProposal,
    ProposalDetail,
    ProposalReport,
    ProposalSummary,
    RefusalLifted,
    RejectResult,
    RollbackResult,
    SearchHit,
    SearchResult,
    SessionMessage,
    SessionView,
    SkillInfo,
    Status,
    TaskInfo,
    TaskList,
    Trigger,
    WildCheck,
    night_label,
)
from skillopt_sleep.store import Place, ProposalRow, Store, machine_failure

Progress = Callable[[str], None]


def _seen_key(proposal_id: str, created_at: str | None) -> str:
    return f"{proposal_id}@{created_at or ''}"


def ready_notice(pending: list[PendingProposal]) -> str | None:
    """The notice that staged proposals nobody has looked at are ready (None: none)."""
    unseen = [p for p in pending if not p.seen]
    if not unseen:
        return None

    def one(p: PendingProposal) -> str:
        def f(x: float | None) -> str:
            return "—" if x is None else f"{x:.2f}"

        return f"{p.id} for {p.target} (val {f(p.val_before)} → {f(p.val_after)})"

    first = unseen[0].id
    return (
        f"{'a proposal is' if len(unseen) == 1 else f'{len(unseen)} proposals are'} ready, not "
        f"yet reviewed: {'; '.join(one(p) for p in unseen)}. Review with `skillopt-sleep show "
        f"{first}` (MCP: get_proposal), then adopt or reject it."
    )


@dataclass
class SourcesReport:
    """What :meth:`Service.sources` found and did: the config file (``created`` now?), the
    sources it switched on, those found but not enabled, and every source's status."""

    config: Path
    created: bool
    enabled_now: list[str]
    found_not_enabled: list[str]
    sources: list[Any]


def _can_create(path: Path) -> bool:
    """Whether ``path`` can be made: its nearest existing folder is writable (a read-only
    home, a backup: reads do not write a first config there)."""
    here = path.parent
    while not here.exists() and here != here.parent:
        here = here.parent
    return os.access(here, os.W_OK | os.X_OK)


#: how many progress lines are kept per night started by this service (for MCP get_night)
PROGRESS_LINES = 40


class Service:
    """The operations of skillopt-sleep for one config file and one store.

    ``config_path``: the TOML config (None: the user's default file; settings also read the
    ``SKILLOPT_SLEEP_*`` environment). ``store_path``: the SQLite store (None: the user's
    default database, resolved on first use).
    """

    def __init__(self, config_path: Path | None = None, *, store_path: Path | None = None):
        self.config_path = Path(config_path) if config_path else None
        self.store_path = Path(store_path) if store_path else None
        self.lock = threading.RLock()
        self._store: Store | None = None
        self._progress: dict[int, collections.deque[str]] = {}
        self._progress_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._thread_night: int | None = None

    # ------------------------------------------------------------------ settings and store
    def settings(self, **overrides: Any) -> Settings:
        """Settings from the config file < environment < ``overrides`` (None values ignored).
        Raises ConfigError naming the offending key."""
        return load_settings(self.config_path, **overrides)

    def config_error(self) -> str | None:
        """Why the config as it is now does not load, or None."""
        try:
            self.settings()
        except ConfigError as exc:
            return str(exc)
        return None

    def db_path(self) -> Path:
        return self.store_path or paths.db_path()

    def open(self, *, check: bool | None = None) -> Store:
        """The shared store connection (opened, created and migrated on first use). Its
        page-by-page check (:meth:`Store.check`, seconds on a large store) runs on open for a
        small store, else before the first write through :meth:`_use` (``check=True``);
        ``check=False``: not on open (the caller checks before it writes)."""
        with self.lock:
            if self._store is None:
                self._store = Store(self.db_path(), check=check)
            return self._store

    def close(self) -> None:
        with self.lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    @contextmanager
    def _use(self, *, check: bool = False, on_open: bool | None = None) -> Iterator[Store]:
        """The store under the lock; an SQLite failure is a StoreError (one line): a write
        to a read-only store names its folder (:meth:`Store.refuse_write`). ``check``: the
        caller writes, so a damaged file is refused first (:meth:`Store.check`).
        ``on_open``: whether opening checks it (see :meth:`open`)."""
        with self.lock:
            store = self.open(check=on_open)
            if check:
                store.check()
            try:
                yield store
            except sqlite3.Error as exc:
                code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
                if store.read_only and code == sqlite3.SQLITE_READONLY:
                    store.refuse_write()
                if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
                    raise StoreError(f"{self.db_path()}: {machine_failure(exc)}") from None
                raise StoreError(f"database error: {exc}") from None

    # ------------------------------------------------------------------ harvest and tasks
    def harvest(self, *, on_progress: OnProgress | None = None) -> Any:
        """Harvest every enabled source now; returns the ``HarvestReport``. ``on_progress``:
        a ``harvest`` event per file."""
        from skillopt_sleep.sources.ingest import harvest

        settings = self.settings()
        # the harvest checks the file before it writes what it read, and a pass that read
        # nothing only the table its record goes to (Store.check_table): a no-change harvest
        # of a large store does not read every page of it (issue 14)
        with self._use(on_open=False) as store:
            report = harvest(store, settings, on_progress=on_progress)
            if store.adoptions.in_place():  # else there is no reach to judge (nothing imported)
                from skillopt_sleep.delivery.wild import record_reach

                store.check()
                record_reach(store, similarity=settings.similarity)
            return report

    def forget(
        self,
        *,
        project: str | None = None,
        session: str | None = None,
        before: str | None = None,
        dry_run: bool = False,
    ) -> Any:
        """Delete stored data for good (:func:`skillopt_sleep.forgetting.forget`); returns
        the ``ForgetResult``."""
        from skillopt_sleep.forgetting import forget

        with self._use(check=True) as store:
            return forget(store, project=project, session=session, before=before, dry_run=dry_run)

    def outbox(self, limit: int = 50) -> list[dict[str, Any]]:
        """The last ``limit`` outbound model calls, newest first (texts past
        ``privacy.outbox_days`` are emptied first)."""
        days = self.settings().privacy.outbox_days
        with self._use() as store:
            if not store.read_only:
                store.outbox.expire(days)
            cutoff = store.outbox.cutoff(days)  # read-only: expired texts are not shown
            return [
                r.as_dict() | {"prompt": ""} if str(r.at or "") < cutoff else r.as_dict()
                for r in store.outbox.recent(limit)
            ]

    def mine(self, project: Path | None = None, *, on_progress: OnProgress | None = None) -> Any:
        """Mine tasks from the store now (and save them); returns the ``MineReport``."""
        from skillopt_sleep.mining.mine import mine

        settings = self.settings(project=project)
        with self._use(check=True) as store:
            return mine(store, settings, on_progress=on_progress)

    def harvested_yet(self) -> bool:
        with self._use() as store:
            return store.harvests.any()

    def stored_tasks(self, project: str | None = None, limit: int = 50) -> TaskList:
        """The tasks as the last night or ``tasks`` stored them, newest mining first."""
        from skillopt_sleep.mining.judges import capsule_state, context_state

        root = _project_arg(project, must_exist=False)
        with self._use() as store:
            tasks = store.tasks.all()
            if root is not None:
                tasks = [t for t in tasks if _under(t.project, root)]
            places = store.sessions.places(
                (o.session_id, o.seq) for t in tasks[:limit] for o in t.occurrences
            )
        return TaskList(
            total=len(tasks),
            tasks=[
                TaskInfo(
                    id=t.id,
                    project=t.project,
                    intent=t.intent,
                    split=t.split,
                    sessions=len(t.sessions),
                    checks=[c.model_dump() for c in t.checks],
                    corrections=t.corrections,
                    synthetic=t.synthetic,
                    occurrences=[
                        _occurrence(
                            o.model_dump(exclude={"context"})
                            | {"context": capsule_state(o.context or t.context)},
                            places.get((o.session_id, o.seq)),
                        )
                        for o in t.occurrences
                    ],
                    apart=t.apart,
                    demoted=[c.model_dump() for c in t.demoted],
                    context=context_state(t),
                )
                for t in tasks[:limit]
            ],
        )

    def search(
        self, query: str, *, agent: str | None = None, project: str | None = None, limit: int = 20
    ) -> SearchResult:
        """Full-text search over the harvested (redacted) messages, best match first.
        ``agent``: a source name (``claude_code``, ``copilot_cli`` …)."""
        if not query.strip():
            raise BadArgument("query is empty")
        root = _project_arg(project, must_exist=False)
        if agent and agent not in KNOWN_SOURCES:
            raise BadArgument(f"unknown agent {agent!r}; known: {', '.join(KNOWN_SOURCES)}")
        with self._use() as store:
            rows = store.sessions.search(
                query, source=agent, project=None if root is None else str(root), limit=limit
            )
        return SearchResult(
            query=query,
            hits=[
                SearchHit(
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

    def session(self, session_id: str) -> SessionView:
        """A harvested session with its (redacted) messages in order. ``session_id`` is its
        id (``codex:KEY``), its key alone, a unique prefix of either, or the shortened
        ``head…tail`` that ``search`` prints on a narrow terminal. BadArgument when no session
        or more than one matches (naming them)."""
        with self._use() as store:
            row = store.sessions.get(session_id)
            if row is None:
                head, _, tail = session_id.partition("…")
                found = store.sessions.ids_matching(head, tail, limit=6) if head else []
                if len(found) > 1:
                    shown = ", ".join(found[:5]) + (", …" if len(found) > 5 else "")
                    raise BadArgument(f"session {session_id!r} is ambiguous: {shown}")
                row = store.sessions.get(found[0]) if found else None
            if row is None:
                raise BadArgument(f"no session {session_id!r}")
            messages = store.sessions.messages(row.id)
        return SessionView(
            id=row.id,
            agent=row.source,
            project=row.project,
            started_at=row.started_at,
            updated_at=row.updated_at,
            model=row.model,
            title=row.title,
            messages=[
                SessionMessage(
                    id=m.id,
                    seq=m.seq,
                    role=m.role,
                    kind=m.kind,
                    timestamp=m.timestamp,
                    text=m.text or "",
                    tool_names=[str(t) for t in m.tool_names or []],
                )
                for m in messages
            ],
        )

    # ------------------------------------------------------------------ agents and sources
    def config_file(self) -> Path:
        """The config file this service reads (and ``sources`` writes)."""
        return self.config_path or paths.config_file()

    def sources(self, *, enable_found: bool = False) -> SourcesReport:
        """Every known source: its roots found, sessions and bytes, enabled? On a new
        install (no config file yet) this writes one enabling every agent whose logs exist;
        ``enable_found`` also switches on agents found after that."""
        from skillopt_sleep.sources.discovery import discover_sources, enableable
        from skillopt_sleep.sources.discovery import enable_found as do_enable

        config = self.config_file()
        statuses = discover_sources(self.settings(), config_path=config)
        created = not config.exists() and _can_create(config)
        changed: list[str] = []
        if enable_found or created:
            changed = do_enable(config, statuses, switch_disabled=enable_found)
            if changed or created:
                statuses = discover_sources(self.settings(), config_path=config)
        return SourcesReport(
            config=config,
            created=created,
            enabled_now=changed,
            found_not_enabled=enableable(config, statuses),
            sources=statuses,
        )

    def first_run_setup(self) -> list[str] | None:
        """On a new install (the default config file absent, none given) write one that
        enables every agent whose logs exist here; returns what it enabled (None: nothing
        to set up)."""
        from skillopt_sleep.sources.discovery import discover_sources, enable_found

        path = paths.config_file()
        if self.config_path is not None or path.exists():
            return None
        return enable_found(path, discover_sources(load_settings(path), config_path=path))

    @staticmethod
    def install(agent: str, project: Path | None = None, *, dry_run: bool = False) -> Any:
        """Put the agent shell in place (see :mod:`skillopt_sleep.install`); its report."""
        from skillopt_sleep.install import install

        return install(agent, project, dry_run=dry_run)

    @staticmethod
    def uninstall(agent: str, project: Path | None = None, *, dry_run: bool = False) -> Any:
        """Undo :meth:`install`, byte for byte; its report."""
        from skillopt_sleep.install import uninstall

        return uninstall(agent, project, dry_run=dry_run)

    @staticmethod
    def demo(
        keep: Path | None, say: Progress | None, on_progress: OnProgress | None = None
    ) -> dict[str, Any]:
        """One whole night in a sandbox against the bundled simulator (:mod:`.demo`)."""
        from skillopt_sleep.demo import run_demo

        return run_demo(keep, say=say, on_progress=on_progress)

    # ------------------------------------------------------------------ nights
    def dispatch(
        self, *, dry_run: bool = False, project: Path | None = None, overridden: bool = False
    ) -> Dispatch:
        """Where a night asked for now runs, and why (see the module docstring).
        ``overridden``: backend or model flags were given."""
        from skillopt_sleep import daemon_client

        daemon = daemon_client.running_daemon()
        if dry_run:
            return Dispatch(
                where="here", reason="a dry run runs here", daemon_running=daemon is not None
            )
        if project is not None or overridden:
            return Dispatch(
                where="here",
                reason="a night for one project or with other backends runs here (the daemon "
                "runs nights with its own settings)",
                daemon_running=daemon is not None,
            )
        if daemon is None:
            return Dispatch(where="here", reason="no daemon is running")
        if daemon.config != daemon_client.config_key(self.config_path):
            return Dispatch(
                where="here",
                reason=f"the daemon runs with another config ({daemon.config})",
                daemon_running=True,
            )
        ours = daemon_client.settings_env()
        if daemon.settings_env != ours:
            differ = sorted(
                {
                    k
                    for k in set(ours) | set(daemon.settings_env)
                    if ours.get(k) != daemon.settings_env.get(k)
                }
            )
            return Dispatch(
                where="here",
                reason="the daemon runs with other SKILLOPT_SLEEP_* settings "
                f"({', '.join(differ)})",
                daemon_running=True,
            )
        try:
            daemon_client.request("ping", timeout=2)
        except daemon_client.NoDaemon as exc:
            return Dispatch(
                where="here", reason=f"the daemon does not answer ({exc})", daemon_running=True
            )
        return Dispatch(
            where="daemon",
            reason=f"the daemon (pid {daemon.pid}) runs with the same config and settings",
            daemon_running=True,
        )

    def run_night(
        self,
        *,
        dry_run: bool = False,
        project: Path | None = None,
        target: dict[str, str] | None = None,
        optimizer: dict[str, str] | None = None,
        trigger: Trigger = Trigger.CLI,
        wait: bool = True,
        progress: Progress | None = None,
        on_rollout: Callable[[Any], None] | None = None,
        on_dispatch: Callable[[Dispatch], None] | None = None,
        start_timeout: float = 15.0,
        on_progress: OnProgress | None = None,
    ) -> NightOutcome:
        """Run a night now, here or in the daemon (:meth:`dispatch`).

        ``wait``: return its result; otherwise return as soon as it started (its
        ``night_id`` known, the night going on in a thread of this process or in the daemon).
        ``target`` / ``optimizer``: backend overrides (``{"name": …, "model": …}``).
        Raises ConfigError before anything starts, NightError when a night is already running
        or the daemon refuses or fails it, and what a night raises (backend and budget errors,
        KeyboardInterrupt) when it runs here and is waited for. ``on_progress``: the typed
        progress events of a night waited for here (a night in the daemon reports none).
        """
        settings = self.settings(
            project=project, target=target or None, optimizer=optimizer or None
        )
        decision = self.dispatch(
            dry_run=dry_run, project=project, overridden=bool(target or optimizer)
        )
        if on_dispatch is not None:
            on_dispatch(decision)
        if decision.where == "daemon":
            return self._run_in_daemon(decision, trigger, wait)
        if wait:
            result = self.run_here(
                settings,
                dry_run=dry_run,
                trigger=trigger,
                progress=progress,
                on_rollout=on_rollout,
                on_progress=on_progress,
            )
            return NightOutcome(
                via="here", reason=decision.reason, night_id=result.night_id, result=result
            )
        return self._start_here(settings, dry_run, trigger, progress, start_timeout, decision)

    def run_here(
        self,
        settings: Settings,
        *,
        dry_run: bool = False,
        trigger: Trigger = Trigger.CLI,
        harvest_first: bool = True,
        progress: Progress | None = None,
        on_rollout: Callable[[Any], None] | None = None,
        on_started: Callable[[int], None] | None = None,
        on_progress: OnProgress | None = None,
    ) -> NightResult:
        """Run one night in this process, on a connection of its own (the daemon's worker
        and waiting callers). See :func:`skillopt_sleep.night.run.run_night`."""
        from skillopt_sleep.night.run import run_night

        store = Store(self.db_path())
        try:
            return run_night(
                store,
                settings,
                dry_run=dry_run,
                trigger=trigger,
                harvest_first=harvest_first,
                progress=progress,
                on_rollout=on_rollout,
                on_started=on_started,
                on_progress=on_progress,
            )
        finally:
            store.close()

    def _run_in_daemon(self, decision: Dispatch, trigger: Trigger, wait: bool) -> NightOutcome:
        from skillopt_sleep import daemon_client

        try:
            reply = daemon_client.request(
                "run-now", timeout=None if wait else 60, wait=wait, trigger=str(trigger)
            )
        except daemon_client.NoDaemon as exc:
            raise NightError(
                f"the daemon stopped during the night ({exc}); `skillopt-sleep status` shows "
                "the night, the daemon log says why"
            ) from None
        if not reply.get("ok"):
            if reply.get("interrupted") or reply.get("error") == "interrupted":
                raise NightError(
                    "the night was interrupted (the daemon stopped or the night was killed); "
                    "`skillopt-sleep status` shows it"
                )
            raise NightError(one_line(reply.get("error") or "the daemon refused to run a night"))
        if wait:
            result = NightResult.model_validate(reply.get("result") or {})
            return NightOutcome(
                via="daemon", reason=decision.reason, night_id=result.night_id, result=result
            )
        night_id = reply.get("night_id")
        if not isinstance(night_id, int):
            raise NightError(
                "the daemon accepted the night but did not report it started; see "
                "`skillopt-sleep status`"
            )
        return NightOutcome(via="daemon", reason=decision.reason, night_id=night_id)

    def _start_here(
        self,
        settings: Settings,
        dry_run: bool,
        trigger: Trigger,
        progress: Progress | None,
        timeout: float,
        decision: Dispatch,
    ) -> NightOutcome:
        """Start a night in a background thread; returns once its row exists."""
        from skillopt_sleep.night import lifecycle

        with self.lock:
            if self._thread is not None and self._thread.is_alive():
                raise NightError(
                    f"a night is running (night {self._thread_night}, started by this process)"
                )
            with self._use() as store:
                now = lifecycle.running(store)
            if now is not None:
                raise NightError(f"a night is running{now.since()}")
            started = threading.Event()
            box: dict[str, Any] = {}

            def on_started(night_id: int) -> None:
                with self._progress_lock:
                    self._progress[night_id] = collections.deque(maxlen=PROGRESS_LINES)
                self._thread_night = box["night_id"] = night_id
                started.set()

            def say(msg: str) -> None:
                night_id = box.get("night_id")
                if night_id is not None:
                    with self._progress_lock:
                        self._progress[night_id].append(one_line(msg, 300))
                if progress is not None:
                    progress(msg)

            def work() -> None:
                try:
                    self.run_here(
                        settings,
                        dry_run=dry_run,
                        trigger=trigger,
                        progress=say,
                        on_started=on_started,
                    )
                except BaseException as exc:  # recorded in the night's row by run_night
                    box["error"] = exc
                finally:
                    started.set()

            self._thread = threading.Thread(target=work, name="skillopt-sleep-night", daemon=False)
            self._thread.start()
        started.wait(timeout)
        night_id = box.get("night_id")
        if night_id is None:
            err = box.get("error")
            if isinstance(err, SkilloptError):
                raise err
            if err is not None:
                raise NightError(f"the night could not start: {type(err).__name__}: {err}")
            raise NightError(f"the night did not start within {timeout:.0f} s")
        return NightOutcome(via="here", reason=decision.reason, night_id=night_id)

    def wait_background(self, timeout: float | None = None) -> None:
        """Wait for a night this service started in the background (tests, shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def night_running(self) -> bool:
        """Whether a night runs now, in this process or any other."""
        from skillopt_sleep.night import lifecycle

        if self._thread is not None and self._thread.is_alive():
            return True
        return not lifecycle.lock_free()

    def night(self, night_id: int) -> NightView:
        """One night (a stale ``running`` one shows ``interrupted``). BadArgument when
        unknown."""
        from skillopt_sleep.night import lifecycle
        from skillopt_sleep.status import night_view

        with self._use() as store:
            row = store.nights.get(night_id)
            if row is None:
                last = store.nights.recent(1)
                latest = night_label(last[0].id) if last else ""
                hint = f"; the latest is {latest}" if last else "; no night has run yet"
                raise BadArgument(f"no night {night_label(night_id)}{hint}")
            return night_view(lifecycle.seen_as([row])[0])

    def nights(self, limit: int = 5) -> list[NightView]:
        from skillopt_sleep.night import lifecycle
        from skillopt_sleep.status import night_view

        with self._use() as store:
            return [night_view(r) for r in lifecycle.seen_as(store.nights.recent(limit))]

    def progress(self, night_id: int) -> list[str]:
        """The latest progress lines of a night this service started ([] for others)."""
        with self._progress_lock:
            return list(self._progress.get(night_id, ()))

    def night_log(self, max_bytes: int = 64_000, night_id: int | None = None) -> str:
        """The end of the daemon's night log (``<state>/night.log``: the stderr of the nights
        it ran), or with ``night_id`` of that night's own log
        (:mod:`skillopt_sleep.night.log`), at most ``max_bytes``; "" when there is none.
        BadArgument for a night that does not exist."""
        if night_id is not None:
            from skillopt_sleep.night.log import read_night_log

            self.night(night_id)  # BadArgument when unknown
            return read_night_log(night_id, max_bytes)
        path = paths.state_dir() / "night.log"
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - max_bytes))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def night_log_view(self, max_bytes: int = 64_000, night_id: int | None = None) -> NightLog:
        """:meth:`night_log` with where it is read from and, when the daemon has no night log
        yet, the last night (whose own log there is)."""
        text = self.night_log(max_bytes, night_id=night_id)
        where = paths.night_log_path(night_id) if night_id is not None else None
        last = self.nights(limit=1) if night_id is None and not text else []
        return NightLog(
            night_id=night_id,
            path=str(where or paths.state_dir() / "night.log"),
            text=text,
            last_night_id=last[0].id if last else None,
        )

    # ------------------------------------------------------------------ doctor
    def doctor(self, *, backends: bool = True) -> list[DoctorCheck]:
        """Every check ``doctor`` makes: the config, the store's integrity, each agent's logs
        and CLI (its version), the target / optimizer backends (reachable and authorised:
        their own ``check``; only hosts the config names), the login service and daemon."""
        import shutil
        import subprocess

        from skillopt_sleep import agents
        from skillopt_sleep.backends import get_backend
        from skillopt_sleep.install import units

        out: list[DoctorCheck] = []
        cfg_error = self.config_error()
        out.append(
            DoctorCheck(name="config", status="fail", detail=cfg_error)
            if cfg_error
            else DoctorCheck(name="config", status="ok", detail=str(self.config_file()))
        )
        try:
            with self._use() as store:
                bad = store.integrity()
            out.append(
                DoctorCheck(name="store", status="fail", detail="; ".join(bad[:5]))
                if bad
                else DoctorCheck(name="store", status="ok", detail=str(self.db_path()))
            )
        except (SkilloptError, sqlite3.Error) as exc:
            out.append(DoctorCheck(name="store", status="fail", detail=one_line(str(exc))))
        if cfg_error:
            return out
        for src in self.sources().sources:
            if not src.found:
                out.append(DoctorCheck(name=f"logs {src.name}", status="skip", detail="not found"))
                continue
            # session files: a subagent's own file counts, a database counts its sessions
            detail = (
                f"{src.sessions} session file{'' if src.sessions == 1 else 's'}, {src.bytes} bytes"
            )
            out.append(
                DoctorCheck(name=f"logs {src.name}", status="ok", detail=detail)
                if src.enabled
                else DoctorCheck(
                    name=f"logs {src.name}",
                    status="warn",
                    detail=f"{detail}, not harvested (`skillopt-sleep sources --enable-found`)",
                )
            )
        for agent in agents.AGENTS:
            if not agent.executable:
                continue
            exe = shutil.which(agent.executable)
            name = f"cli {agent.executable}"
            if exe is None:
                out.append(DoctorCheck(name=name, status="skip", detail="not on PATH"))
                continue
            try:
                proc = subprocess.run(
                    [exe, "--version"], capture_output=True, text=True, timeout=20, check=False
                )
                said = one_line(proc.stdout or proc.stderr, 120)
                ok = proc.returncode == 0
            except (OSError, subprocess.TimeoutExpired) as exc:
                said, ok = one_line(str(exc), 120), False
            out.append(
                DoctorCheck(name=name, status="ok" if ok else "fail", detail=f"{exe}: {said}")
            )
        if backends:
            settings = self.settings()
            for role, cfg in (("target", settings.target), ("optimizer", settings.optimizer)):
                if role == "optimizer" and cfg == settings.target:
                    continue
                try:
                    backend = get_backend(cfg)
                    try:
                        backend.check()
                    finally:
                        backend.close()
                    where = cfg.base_url or cfg.executable or cfg.name
                    out.append(
                        DoctorCheck(
                            name=f"backend {role}", status="ok", detail=f"{cfg.name} ({where})"
                        )
                    )
                except SkilloptError as exc:
                    out.append(
                        DoctorCheck(
                            name=f"backend {role}", status="fail", detail=one_line(str(exc))
                        )
                    )
        kind = units.platform_kind()
        unit = units.unit_path(kind)
        out.append(
            DoctorCheck(name="service", status="ok", detail=f"{kind}: {unit}")
            if unit.exists()
            else DoctorCheck(
                name="service",
                status="warn",
                detail=f"not installed (`skillopt-sleep service install --now`; {unit})",
            )
        )
        d = self.daemon_status()
        out.append(
            DoctorCheck(name="daemon", status="ok", detail=f"running (pid {d.pid})")
            if d.running
            else DoctorCheck(
                name="daemon", status="warn", detail="not running (`skillopt-sleep start`)"
            )
        )
        return out

    # ------------------------------------------------------------------ status
    def status(self, *, nights: int = 5, daemon_timeout: float = 3.0) -> Status:
        """The daemon, the store, the last nights, pending proposals, harvest accounting, the
        last error and whether the config loads. A read: nothing is written."""
        from skillopt_sleep import status as status_view

        with self._use() as store:
            status = status_view.collect_status(store, database=str(self.db_path()), nights=nights)
        status.in_the_wild = self.in_the_wild()
        status.daemon = self.daemon_status(timeout=daemon_timeout)
        status.night_running = self.night_running()
        status.config_error = self.config_error()
        seen = self._seen()
        for p in status.pending_proposals:
            p.seen = _seen_key(p.id, p.created_at) in seen
        status.notice = ready_notice(status.pending_proposals)
        return status

    # the proposals whose report was looked at: a small file beside the store (a read
    # receipt, so the notice that a proposal is ready is given until someone looks)
    def _seen_file(self) -> Path:
        return self.db_path().parent / "seen-proposals.json"

    def _seen(self) -> set[str]:
        import json

        try:
            data = json.loads(self._seen_file().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return set()
        return {str(x) for x in data} if isinstance(data, list) else set()

    def _saw(self, row: ProposalRow) -> None:
        """Remember that ``row``'s report was looked at (never fails the read)."""
        import json

        if row.status != "staged":
            return
        seen = self._seen()
        key = _seen_key(row.id, row.created_at)
        if key in seen:
            return
        path = self._seen_file()
        try:
            tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(sorted(seen | {key})[-500:]), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass

    def in_the_wild(self) -> list[WildCheck]:
        """Each adoption in place against the sessions harvested since (:mod:`.delivery.wild`)."""
        from skillopt_sleep.delivery.wild import in_the_wild

        try:
            similarity = self.settings().similarity
        except ConfigError:
            similarity = 0.72
        with self._use() as store:
            return in_the_wild(store, similarity=similarity)

    @staticmethod
    def daemon_status(timeout: float = 3.0) -> DaemonStatus:
        """The daemon's status (``running=False`` when none runs); never raises."""
        from skillopt_sleep import daemon_client

        try:
            return daemon_client.daemon_status(timeout=timeout)
        except Exception as exc:  # the daemon is optional; its status never fails ours
            return DaemonStatus(running=False, error=one_line(f"{type(exc).__name__}: {exc}", 200))

    # ------------------------------------------------------------------ proposals
    def proposals(
        self, status: str | None = None, limit: int | None = None
    ) -> list[ProposalSummary]:
        """Proposals, newest first (``status``: only those)."""
        from skillopt_sleep import proposals

        with self._use() as store:
            rows = proposals.list_proposals(store, status)
        return [_summary(r) for r in rows[:limit]]

    def proposal(self, proposal_id: str) -> ProposalDetail:
        """A proposal with its report and diff. ProposalError when unknown or unreadable.
        A staged one is marked seen (``status`` stops giving its ready notice)."""
        from skillopt_sleep import proposals

        with self._use() as store:
            row = proposals.get_proposal(store, proposal_id)
        report = proposals.load_report(row)
        self._saw(row)
        try:
            with open(Path(row.dir) / "diff.patch", encoding="utf-8", newline="") as fh:
                diff = fh.read()  # byte-exact: a CRLF file's diff keeps its CRs
        except OSError as exc:
            raise ProposalError(f"proposal {proposal_id}: diff unreadable ({exc})") from None
        return ProposalDetail(
            **_summary(row.as_dict()).model_dump(),
            new_hash=row.new_hash,
            folder=row.dir,
            diff=diff,
            edits=report.edits,
            val_tasks=report.val_tasks,
            test_tasks=report.test_tasks,
            cost=report.cost,
            summary=report.summary,
            report_uri=f"skillopt://proposals/{row.id}",
        )

    def report(self, proposal_id: str) -> ProposalReport:
        """The proposal's ``report.json``, typed. ProposalError when unknown or unreadable."""
        from skillopt_sleep import proposals

        with self._use() as store:
            row = proposals.get_proposal(store, proposal_id)
        return proposals.load_report(row)

    def proposal_markdown(self, proposal_id: str, *, with_status: bool = False) -> str:
        """The proposal's ``report.md`` as it stands now (a proposal no longer staged says it
        can no longer be adopted); ``with_status`` adds a first comment line with its status
        and base hash (for agents). A staged one is marked seen, as by :meth:`proposal`."""
        from skillopt_sleep import proposals

        with self._use() as store:
            row = proposals.get_proposal(store, proposal_id)
        report = proposals.report_markdown(row)
        self._saw(row)
        if not with_status:
            return report
        return f"<!-- status: {row.status}; base_hash: {row.base_hash or '(absent)'} -->\n" + report

    def latest_report(self) -> str:
        """The newest proposal's report, or why the last night staged none (Markdown)."""
        with self._use() as store:
            latest = store.proposals.latest()
        if latest:
            return self.proposal_markdown(latest.id, with_status=True)
        recent = self.nights(1)
        if not recent:
            return "# No report yet\n\nNo night has run. Call the `run_night` tool to start one.\n"
        n = recent[0]
        return (
            f"# No proposal yet\n\nThe latest night ({n.id}) ended `{n.status}`"
            f"{': ' + n.error if n.error else ''}.\n\n```json\n"
            f"{n.summary.model_dump_json(indent=2, exclude_none=True)}\n```\n"
        )

    def adopt(
        self,
        proposal_id: str,
        *,
        base_hash: str | None = None,
        force: bool = False,
        allow_flagged: bool = False,
    ) -> AdoptResult:
        """Write a staged proposal to its live file (atomically, with a backup), only where
        the config and the agent registry allow; ``allow_flagged``: even when it adds rules
        the poisoning screen flags."""
        from skillopt_sleep import proposals

        settings = self.settings()
        with self._use(check=True) as store:
            return proposals.adopt(
                store,
                proposal_id,
                base_hash=base_hash,
                force=force,
                allow_flagged=allow_flagged,
                settings=settings,
            )

    def agent_copies(self, proposal_id: str) -> list[str]:
        """The other staged proposals carrying the same night's rules for other agents."""
        from skillopt_sleep import proposals

        with self._use() as store:
            return proposals.agent_group(store, proposal_id)[1:]

    def copy_statuses(self, proposal_id: str) -> dict[str, str]:
        """The other proposals carrying the same night's rules for other agents (whatever
        their status), by id, with their status now."""
        from skillopt_sleep import proposals

        with self._use() as store:
            return proposals.copy_statuses(store, proposal_id)

    def adopt_all_agents(
        self, proposal_id: str, *, force: bool = False, allow_flagged: bool = False
    ) -> list[AdoptResult]:
        """Adopt a proposal and the staged copies of its rules for other agents (see
        :func:`skillopt_sleep.proposals.adopt_group`); the adoptions, ``proposal_id``'s first."""
        from skillopt_sleep import proposals

        settings = self.settings()
        with self._use(check=True) as store:
            return proposals.adopt_group(
                store, proposal_id, force=force, allow_flagged=allow_flagged, settings=settings
            )

    def reject(self, proposal_id: str, reason: str = "") -> RejectResult:
        from skillopt_sleep import proposals

        with self._use(check=True) as store:
            return proposals.reject(store, proposal_id, reason)

    def lift_refusal(self, proposal_id: str) -> RefusalLifted:
        """Take back the refusal of a rejected or rolled-back proposal (staged again; see
        :func:`skillopt_sleep.proposals.lift_refusal`)."""
        from skillopt_sleep import proposals

        with self._use(check=True) as store:
            return proposals.lift_refusal(store, proposal_id)

    def rollback(
        self,
        target: str | None = None,
        *,
        force: bool = False,
        all_agents: bool = False,
        managed_only: bool = False,
    ) -> RollbackResult:
        """Undo an adoption (see :func:`skillopt_sleep.proposals.rollback`): ``target`` is a
        proposal's or an agent's copy's id, a live file (its latest adoption) or None (the
        latest adoption); ``all_agents``: the adopted copies of the same rules for other
        agents too, each in its own file. ``managed_only``: a ``target`` path must be a file
        some proposal or adoption refers to (BadArgument otherwise)."""
        from skillopt_sleep import proposals

        settings = self.settings()
        with self._use(check=True) as store:
            path = target
            if target and managed_only and not proposals.names_proposal(store, target):
                path = self._managed(store, target)
            return proposals.rollback(
                store, path, force=force, all_agents=all_agents, settings=settings
            )

    def skill(self, target: str | None = None) -> SkillInfo:
        """A managed document as it is now (default: the latest proposal's target)."""
        from skillopt_sleep import proposals
        from skillopt_sleep.delivery.document import all_rules, read_live, sections, sha256_text

        with self._use() as store:
            if target:
                path = self._managed(store, target)
            else:
                latest = store.proposals.latest()
                if latest is None:
                    raise BadArgument(
                        "no managed target yet: no proposal has been staged (run a night first)"
                    )
                path = latest.target_path
            proposals.check_target(store, path, self.settings())
        text = read_live(Path(path))
        return SkillInfo(
            target=path,
            exists=text is not None,
            sha256=sha256_text(text),
            managed_block=bool(sections(text)),
            rules=all_rules(text),
            text=text or "",
        )

    @staticmethod
    def _managed(store: Store, target: str) -> str:
        """The stored form of ``target``; BadArgument when no proposal / adoption names it."""
        known: dict[str, str] = {}
        for p in store.proposals.targets():
            known[str(Path(p).expanduser().resolve())] = p
            known.setdefault(p, p)
        key = str(Path(target).expanduser().resolve()) if target.strip() else ""
        if key in known:
            return known[key]
        names = sorted(set(known.values()))
        listed = ", ".join(names[:5]) if names else "none yet (no proposal has been staged)"
        raise BadArgument(f"{target!r} is outside the managed targets; managed: {listed}")


def _occurrence(occ: dict[str, Any], place: Place | None) -> dict[str, Any]:
    """A stored occurrence with where it is: ``agent`` (the session's source), ``project``
    and ``message_id`` (all None when the session is no longer stored)."""
    return occ | {
        "agent": place.source if place else None,
        "project": place.project if place else None,
        "message_id": place.message_id if place else None,
    }


def _summary(row: dict[str, Any]) -> ProposalSummary:
    from skillopt_sleep.store.proposals import block_of

    return ProposalSummary.model_validate(
        {k: row.get(k) for k in ProposalSummary.model_fields}
        | {"base_hash": row.get("base_hash") or "", "block": block_of(row)}
    )


def _project_arg(project: str | None, *, must_exist: bool = True) -> Path | None:
    """An agent's ``project`` argument: absolute (a server's cwd means nothing to its caller),
    ``~`` expanded; a directory unless ``must_exist`` is off (filters may name a project
    folder that is gone). Raises BadArgument."""
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


def project_arg(project: str | None) -> Path | None:
    """An agent's ``project`` for a night: an absolute, existing directory (BadArgument)."""
    return _project_arg(project, must_exist=True)


def _under(project: str | None, root: Path) -> bool:
    r = str(root).rstrip("/")
    return bool(project) and (project == r or (project or "").startswith(r + "/"))


#: seconds the SessionEnd hook waits for the daemon at most (agents wait for their hooks)
HOOK_TIMEOUT = 0.3


def session_end_hook(timeout: float = HOOK_TIMEOUT) -> str:
    """An agent session ended (the Claude Code plugin's ``SessionEnd`` hook): ask a running
    daemon to ingest now. Never raises, never waits more than ``timeout`` seconds.

    Returns what happened (``"sent"``, ``"answered"``, ``"refused"``, ``"no daemon"``) for
    callers that want to log it; the hook discards it.
    """
    from skillopt_sleep import daemon_client

    try:
        reply = daemon_client.request("ingest-now", timeout=timeout)
    except daemon_client.NoDaemon as exc:
        # connected but the ingest outlasted the timeout: the daemon keeps going
        return "sent" if "did not answer" in str(exc) else "no daemon"
    except Exception:
        return "no daemon"
    return "answered" if reply.get("ok") else "refused"
