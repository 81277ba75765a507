"""Shared process handling of the agent exec backends (``claude -p``, ``codex exec``,
``copilot -p``).

* **Executable:** ``config.executable`` (a path, or a name looked up on ``PATH``), else the
  CLI's default name on ``PATH``; a clear :class:`BackendUnreachable` naming the install
  command when absent.
* **Process hygiene:** every call runs in its own session / process group
  (``start_new_session``) inside a fresh temporary working directory, a copy of the replayed
  occurrence's project named like it (:func:`working_copy`), where the scope a project's
  block states holds. A replay of the user's task offers the live agent's tools under the
  CLI's own safe permission mode (:meth:`ExecBackend.acts_live`), and what the agent wrote
  there is read back (:func:`written`) into :attr:`Completion.acts`. On timeout the
  whole group gets SIGTERM, then SIGKILL; after a normal exit any process the CLI left behind
  in its group is killed too, so no orphan survives a call.
* **Retries:** bounded (``config.max_retries``), exponential backoff, transient failures only
  (timeouts, connection failures reported by the CLI, HTTP 429 / 5xx / overloaded). Auth,
  unknown model, unsupported flag and unreachable-at-preflight are never retried.
* **Loud failures:** each backend turns the CLI's exit code and structured output into the
  :mod:`skillopt_sleep.errors` tree with a one-line reason and a fix. The CLI's error text is
  never returned as an answer. stderr and error text are redacted before they reach any
  message (and so the store / logs).
* **Never harvest yourself:** the prompt's first line is
  :data:`~skillopt_sleep.sources.base.SELF_MARKER`, so a session a CLI insists on writing is
  recognised by the harvesters as ``self_generated`` and never mined.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from skillopt_sleep import agents
from skillopt_sleep.backends.base import Backend, context_block, workspace_files
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import (
    BackendAuthError,
    BackendError,
    BackendModelError,
    BackendResponseError,
    BackendTimeout,
    BackendUnreachable,
)
from skillopt_sleep.models import (
    Completion,
    CompletionRequest,
    Placement,
    Usage,
    workdir_name,
)
from skillopt_sleep.redact import redact as _redact  # shared with the harvesters
from skillopt_sleep.sources.base import SELF_MARKER

#: Seconds between SIGTERM and SIGKILL of a timed-out process group.
KILL_GRACE = 2.0
#: Cap on one backoff sleep, in seconds.
MAX_DELAY = 30.0
#: Characters of stderr / error text kept in an error message.
ERROR_CHARS = 300


def redact(text: str) -> str:
    """Secrets in ``text`` replaced (:func:`skillopt_sleep.redact.redact`, plus any leftover
    ``sk-…`` key)."""
    text = _redact(text)
    return re.sub(r"\bsk-[A-Za-z0-9_\-]{8,}", "[REDACTED:api_key]", text)


def one_line(text: str, limit: int = ERROR_CHARS) -> str:
    """Redacted, whitespace-collapsed, shortened ``text`` for an error message."""
    flat = " ".join(redact(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def marked(prompt: str) -> str:
    """The prompt sent to an agent: SELF_MARKER on the first line, then the task."""
    return f"{SELF_MARKER}\n{prompt}"


def prompt_for(request: CompletionRequest, placed: Placement | None) -> str:
    """What the agent is asked. A placed replay (certified = deployed) sends the task
    exactly as the user asks it: any other word reaches the model and can change what it
    does (the marker's words made the model pick a skill the user's own prompt would not).
    Its session cannot reach the user's logs instead (no transcript, an ephemeral run, or a
    throw-away home: see each backend). An unplaced call (the fallback that gives the
    document as system text) is :func:`marked`."""
    return request.prompt if placed is not None else marked(request.prompt)


# ---------------------------------------------------------------- processes
@dataclass
class ProcessResult:
    returncode: int
    stdout: str
    stderr: str  # already redacted
    seconds: float


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a foreign process reused the id
        return False
    return True


#: process groups of the agent-CLI calls in flight in this process, and a counter bumped by
#: :func:`cancel_running` (a call started before a bump neither runs on nor retries)
_live: set[int] = set()
_live_lock = threading.Lock()
_generation = 0


def generation() -> int:
    return _generation


def cancel_running() -> int:
    """Kill every agent-CLI call in flight in this process, whole process groups, and stop
    calls already started from retrying. For an interrupted night whose rollouts run in
    parallel threads (the main thread gets the signal; the workers are blocked in their
    calls). Returns the number of process groups killed."""
    global _generation
    with _live_lock:
        _generation += 1
        groups = list(_live)
    for pgid in groups:
        _kill_group(pgid, signal.SIGKILL)
    return len(groups)


class _Cancelled(BackendError):
    """A call of a night being interrupted (see :func:`cancel_running`)."""


def run_process(
    argv: list[str],
    *,
    stdin: str | None,
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    backend: str,
    started_in: int | None = None,
) -> ProcessResult:
    """Run ``argv`` in its own process group; kill the whole group on timeout.

    ``started_in``: the :func:`generation` the call began in; the process is killed at once
    if :func:`cancel_running` ran since. Raises BackendTimeout (the group is dead by then) or
    BackendUnreachable when the executable cannot be started.
    """
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=str(cwd),
            start_new_session=True,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
    except OSError as exc:
        raise BackendUnreachable(
            f"cannot start {argv[0]}: {exc.strerror or exc}",
            backend=backend,
            fix="check `executable` in the backend config",
        ) from None
    pgid = proc.pid  # start_new_session: the child leads its own group
    with _live_lock:
        _live.add(pgid)
        cancelled = started_in is not None and started_in != _generation
    if cancelled:
        _kill_group(pgid, signal.SIGKILL)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(pgid, signal.SIGTERM)
        try:
            proc.communicate(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(pgid, signal.SIGKILL)
        try:
            proc.communicate(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired:  # pragma: no cover - pipes held by a zombie
            pass
        raise BackendTimeout(
            f"{Path(argv[0]).name} gave no answer within {timeout:g}s; "
            "its process group was killed",
            backend=backend,
            fix="raise `timeout` in the backend config",
        ) from None
    except BaseException:
        _kill_group(pgid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        with _live_lock:
            _live.discard(pgid)
        # anything the CLI left running in its group (helpers, daemons) dies with the call
        if _group_alive(pgid):
            _kill_group(pgid, signal.SIGKILL)
    return ProcessResult(proc.returncode, out or "", redact(err or ""), time.monotonic() - started)


# ---------------------------------------------------------------- helpers
def resolve_executable(config: BackendConfig, default: str, backend: str, install: str) -> str:
    """``config.executable`` (path or name on PATH), else ``default`` on PATH."""
    wanted = config.executable or default
    if os.sep in wanted or (os.altsep and os.altsep in wanted):
        path = Path(wanted).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise BackendUnreachable(
            f"executable {wanted!r} not found or not executable",
            backend=backend,
            fix="fix `executable` in the backend config",
        )
    found = shutil.which(wanted)
    if found:
        return found
    what = (
        "set as `executable` in the backend config, is not on PATH"
        if config.executable
        else "is not installed or not on PATH"
    )
    raise BackendUnreachable(
        f"`{wanted}` {what}",
        backend=backend,
        fix=f"install it with `{install}` or set `executable` in the backend config",
    )


def api_key(config: BackendConfig) -> str | None:
    """The configured key: ``config.api_key``, else ``$config.api_key_env``; None if neither."""
    if config.api_key is not None and config.api_key.get_secret_value():
        return config.api_key.get_secret_value()
    if config.api_key_env:
        value = os.environ.get(config.api_key_env, "").strip()
        return value or None
    return None


def check_reachable(base_url: str, backend: str, timeout: float = 3.0) -> None:
    """Fail fast (BackendUnreachable, not retried) when nothing listens at ``base_url``."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise BackendUnreachable(
            f"cannot reach {base_url} ({exc.strerror or exc})",
            backend=backend,
            fix="check `base_url` in the backend config; is the server running?",
        ) from None


#: (pattern, kind) over the CLI's error text; first match wins. kind: auth / model /
#: unreachable / transient / flag.
_CLASSES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.I), kind)
    for p, kind in [
        (
            r"unknown option|unexpected argument|unrecognized (option|argument)|"
            r"invalid value .* for '--",
            "flag",
        ),
        (
            r"not logged in|please run /login|log ?in required|invalid api key|"
            r"incorrect api key|authentication (failed|error)|unauthori[sz]ed|\b401\b|\b403\b|"
            r"missing environment variable|api key (is )?(missing|required|not set)|"
            r"no (api key|credentials)|forbidden",
            "auth",
        ),
        (
            r"model[^.\n]{0,60}(not found|does not exist|not available|unknown|not supported)|"
            r"issue with the selected model|unknown model|model_not_found|invalid model",
            "model",
        ),
        (
            r"econnrefused|connection refused|connection failed|could not connect|"
            r"cannot connect|unable to connect|error sending request|enotfound|"
            r"getaddrinfo|dns error|network is unreachable|ehostunreach|econnreset|"
            r"connection reset|^connection error\.?$",
            "unreachable",
        ),
        (
            r"\b(429|500|502|503|504|529)\b|overloaded|rate.?limit|too many requests|"
            r"server error|temporar|high demand|try again|timed? ?out",
            "transient",
        ),
    ]
]


@dataclass
class Failure:
    """A failed call, classified. ``transient`` failures are retried."""

    kind: str  # auth / model / unreachable / transient / flag / other
    message: str
    status: int | None = None

    @property
    def transient(self) -> bool:
        return self.kind in ("transient", "unreachable")


def classify(message: str, status: int | None = None) -> Failure:
    """Classify an error text (and HTTP status, when the CLI reports one)."""
    text = one_line(message, 2000)
    if status in (401, 403):
        return Failure("auth", text, status)
    if status == 404 and "model" in text.lower():
        return Failure("model", text, status)
    if status is not None and (status == 429 or status >= 500):
        return Failure("transient", text, status)
    for pattern, kind in _CLASSES:
        if pattern.search(text):
            return Failure(kind, text, status)
    return Failure("other", text, status)


# ---------------------------------------------------------------- the base class
@dataclass
class CallSetup:
    """Everything one CLI invocation needs; ``files`` are written into ``cwd`` first."""

    argv: list[str]
    env: dict[str, str]
    stdin: str | None = None
    files: dict[str, str] = field(default_factory=dict)


class ExecBackend(Backend):
    """An agent CLI as a backend. Subclasses define the command line and the output parser."""

    #: sleep between retries (seconds, doubled each attempt); tests shorten it
    base_delay: float = 1.0
    works_in_folder = True

    def __init__(self, config: BackendConfig, *, sleep: Callable[[float], None] = time.sleep):
        super().__init__(config)
        self.sleep = sleep
        self._checked_url: str | None = None

    # -- subclass hooks ------------------------------------------------------------------
    @abstractmethod
    def build(
        self, request: CompletionRequest, executable: str, cwd: Path, scratch: Path
    ) -> CallSetup:
        """The command line for one call (``cwd`` is the empty working directory, ``scratch``
        a private folder for output files)."""

    @abstractmethod
    def parse(
        self, result: ProcessResult, request: CompletionRequest, scratch: Path
    ) -> Completion | Failure:
        """Turn a finished process into a Completion, or a Failure to raise / retry."""

    def cleanup(self, setup: CallSetup, cwd: Path) -> None:
        """After a call: remove what the CLI left about it outside ``cwd`` (best effort)."""

    #: the agent (registry name) this CLI is; a placement for it goes where it loads files
    agent: str = ""
    #: folders (relative to the working folder) where the CLI keeps its own state: a file
    #: written there is not the agent's work (:func:`written`)
    own_files: tuple[str, ...] = ()

    def acts_live(self, request: CompletionRequest) -> bool:
        """Whether the call offers the tools the live agent offers, under the CLI's own
        safe permission mode: a replay of the user's task with the document placed where
        the agent loads it (certified = deployed; its writes and commands are graded). Other
        calls (an optimizer's, a judge's, a document given as system text) act on nothing."""
        return self.placed(request) is not None and request.purpose == "target"

    # the agent's CLI as the registry names it (agents.py: one home for an agent's facts)
    @property
    def executable_name(self) -> str:
        """The CLI's default executable name."""
        return agents.get_agent(self.agent).executable or self.name

    @property
    def install_hint(self) -> str:
        """The install command shown when the executable is missing."""
        return agents.get_agent(self.agent).install_hint

    @property
    def login_fix(self) -> str:
        """What to tell a user whose credentials are missing or rejected."""
        return agents.get_agent(self.agent).login_fix

    def placed(self, request: CompletionRequest) -> Placement | None:
        """The request's placement when it is for this CLI's agent (else None: the document,
        if any, travels as ``request.system``)."""
        p = request.placement
        return p if p is not None and p.agent == self.agent else None

    def overlay_home(self, placement: Placement, scratch: Path, *, copy_auth: bool = True) -> Path:
        """A throw-away home folder for this agent for one call: the candidate written at
        ``placement.path`` (user scope), plus copies of the user's :attr:`Agent.auth_files`
        (``copy_auth``) so their login keeps working. The user's own folder is only read."""
        agent = agents.get_agent(self.agent)
        home = scratch / f"{self.agent}-home"
        home.mkdir(exist_ok=True)
        if copy_auth:
            copy_private(agent.home(), home, agent.auth_files)
        write_placed(home, placement)
        return home

    def home_copy(self, scratch: Path) -> Path:
        """A throw-away home folder for this agent holding copies of the user's login files
        and user-level memory files, as the live agent finds them: for a replay of a project
        file whose CLI would otherwise write its session among the user's logs."""
        agent = agents.get_agent(self.agent)
        home = scratch / f"{self.agent}-home"
        home.mkdir(exist_ok=True)
        copy_private(agent.home(), home, (*agent.auth_files, *agent.user_memory))
        return home

    def documents(
        self,
        request: CompletionRequest,
        placed: Placement | None,
        *,
        user_root: Path | None = None,
        system_file: str | None = "AGENTS.md",
    ) -> dict[str, str]:
        """The files of the call's working directory, and the one placement rule of the exec
        backends: a user-level document is written under ``user_root`` (the call's throw-away
        home; ``None``: the caller placed it already), a project document goes into the
        working directory, and a request's system text without a placement is written there
        as ``system_file`` (``None``: the backend passes it some other way)."""
        if placed is not None and placed.scope == "user":
            if user_root is not None:
                write_placed(user_root, placed)
            return {}
        if placed is not None:
            return {placed.path: placed.text}
        if system_file and request.system:
            return {system_file: request.system}
        return {}

    def pass_key(self, env: dict[str, str], variable: str) -> None:
        """Hand the configured API key (if any) to the CLI through ``variable`` only."""
        env.pop(variable, None)
        key = api_key(self.config)
        if key:
            env[variable] = key

    def base_env(self) -> dict[str, str]:
        """The child's environment: ours, without our own settings variables."""
        return {k: v for k, v in os.environ.items() if not k.startswith("SKILLOPT_SLEEP_")}

    # -- the call ------------------------------------------------------------------------
    def executable(self) -> str:
        return resolve_executable(self.config, self.executable_name, self.name, self.install_hint)

    def error_for(self, failure: Failure) -> BackendError:
        where = f" ({self.config.base_url})" if self.config.base_url else ""
        if failure.kind == "auth":
            return BackendAuthError(
                f"not logged in or the API key was rejected{where}: {failure.message}",
                backend=self.name,
                fix=self.login_fix,
            )
        if failure.kind == "model":
            return BackendModelError(
                f"unknown model {self.model or '(CLI default)'!r}: {failure.message}",
                backend=self.name,
                fix="check `model` in the backend config",
            )
        if failure.kind == "unreachable":
            fix = (
                "check `base_url` and the network; is the server running?"
                if self.config.base_url
                else "no `base_url` is set, so the CLI uses its own model settings: is that "
                f"endpoint up? ({self.login_fix})"
            )
            return BackendUnreachable(
                f"the CLI cannot reach its model API{where or ' (its own configured endpoint)'}"
                f": {failure.message}",
                backend=self.name,
                fix=fix,
            )
        if failure.kind == "flag":
            return BackendResponseError(
                f"the installed `{self.executable_name}` rejected a flag: {failure.message}",
                backend=self.name,
                fix=f"install the supported version (`{self.install_hint}`)",
            )
        return BackendResponseError(
            failure.message or "the CLI failed without a message", backend=self.name
        )

    def check(self) -> None:
        """The CLI is installed and, with a ``base_url``, something listens there."""
        self.executable()
        if self.config.base_url:
            check_reachable(self.config.base_url, self.name)

    def complete(self, request: CompletionRequest) -> Completion:
        executable = self.executable()
        files = workspace_files(request.context)
        if request.context is not None and request.context.items:
            # the replayed occurrence's context: its files in the throw-away working folder,
            # the outputs it saw (and the files' text: a call without tools cannot read them)
            # before the prompt
            request = request.model_copy(
                update={
                    "prompt": context_block(request.context, in_workdir=bool(files))
                    + request.prompt,
                    "context": None,
                }
            )

        if self.config.base_url and self._checked_url != self.config.base_url:
            check_reachable(self.config.base_url, self.name)
            self._checked_url = self.config.base_url
        attempts = self.config.max_retries + 1
        began = _generation
        for attempt in range(attempts):
            last = attempt == attempts - 1
            if _generation != began:
                raise _Cancelled(
                    "the call was cancelled: the night is being interrupted", backend=self.name
                )
            try:
                outcome = self._once(request, executable, began, files)
            except BackendTimeout:
                if last:
                    raise
                self.sleep(min(self.base_delay * 2**attempt, MAX_DELAY))
                continue
            if isinstance(outcome, Completion):
                return outcome
            if _generation != began:
                raise _Cancelled(
                    "the call was cancelled: the night is being interrupted", backend=self.name
                )
            if outcome.transient and not last:
                self.sleep(min(self.base_delay * 2**attempt, MAX_DELAY))
                continue
            error = self.error_for(outcome)
            if outcome.transient and attempts > 1:
                error.args = (f"{error.args[0]} (after {attempts} attempts)",)
            raise error
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(
        self,
        request: CompletionRequest,
        executable: str,
        began: int | None = None,
        files: dict[str, str] | None = None,
    ) -> Completion | Failure:
        with tempfile.TemporaryDirectory(prefix="skillopt-sleep-replay-") as tmp:
            # the working folder is a copy of the occurrence's project, named like it: the
            # scope its block states holds there as it does live (delivery.document.covers)
            cwd = working_copy(Path(tmp), request.workdir)
            scratch = Path(tmp) / "scratch"
            cwd.mkdir(parents=True)
            scratch.mkdir()
            setup = self.build(request, executable, cwd, scratch)
            for name, text in {**(files or {}), **setup.files}.items():
                (cwd / name).parent.mkdir(parents=True, exist_ok=True)
                (cwd / name).write_text(text, encoding="utf-8")
            before = snapshot(cwd)
            try:
                result = run_process(
                    setup.argv,
                    stdin=setup.stdin,
                    env=setup.env,
                    cwd=cwd,
                    timeout=self.config.timeout,
                    backend=self.name,
                    started_in=began,
                )
            finally:
                self.cleanup(setup, cwd)
            outcome = self.parse(result, request, scratch)
            if isinstance(outcome, Completion):
                files, diff = written(cwd, before, self.own_files)
                acts = outcome.acts.model_copy(update={"files": files, "diff": diff})
                outcome = outcome.model_copy(update={"acts": acts})
            return outcome


#: most files an agent's writes report, and characters of one file's text kept
MAX_WRITTEN_FILES = 20
MAX_WRITTEN_CHARS = 20_000
#: a file larger than this is not read back (a build output, not an artifact)
MAX_SNAPSHOT_BYTES = 1_000_000


def snapshot(root: Path) -> dict[str, bytes]:
    """``{relative path: bytes}`` of the files under ``root`` (symlinks and files over
    :data:`MAX_SNAPSHOT_BYTES` left out)."""
    out: dict[str, bytes] = {}
    for path in root.rglob("*"):
        try:
            if path.is_symlink() or not path.is_file():
                continue
            if path.stat().st_size > MAX_SNAPSHOT_BYTES:
                continue
            out[path.relative_to(root).as_posix()] = path.read_bytes()
        except OSError:
            continue
    return out


def written(
    root: Path, before: dict[str, bytes], own: tuple[str, ...]
) -> tuple[dict[str, str], str]:
    """What an agent wrote in its working copy ``root`` since ``before`` (its
    :func:`snapshot` when the call began): ``({path: text}, unified diff)`` of the files it
    created, changed or deleted, redacted; paths under one of ``own`` (the CLI's own state
    folders) are not the agent's work."""
    after = snapshot(root)

    def mine(path: str) -> bool:
        return not any(path == o or path.startswith(o.rstrip("/") + "/") for o in own)

    changed = sorted(
        p for p in set(after) | set(before) if mine(p) and after.get(p) != before.get(p)
    )[:MAX_WRITTEN_FILES]
    files: dict[str, str] = {}
    diff: list[str] = []
    for path in changed:
        old = before.get(path)
        new = after.get(path)
        new_text = redact(new.decode("utf-8", "replace"))[:MAX_WRITTEN_CHARS] if new else ""
        if new is not None:
            files[path] = new_text
        old_text = redact(old.decode("utf-8", "replace"))[:MAX_WRITTEN_CHARS] if old else ""
        diff += difflib.unified_diff(
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=f"a/{path}" if old is not None else "/dev/null",
            tofile=f"b/{path}" if new is not None else "/dev/null",
        )
        if diff and not diff[-1].endswith("\n"):
            diff[-1] += "\n"
    return files, "".join(diff)


def working_copy(call_root: Path, workdir: str) -> Path:
    """The working folder of a call whose temporary folder is ``call_root``: a copy of the
    project ``workdir``, named like it (``work/<name>``; its sibling ``scratch`` is the call's
    private folder)."""
    return call_root / "work" / workdir_name(workdir)


def remove_empty_tree(path: Path) -> None:
    """Delete ``path`` and its sub-folders when (and only when) they hold no file at all."""
    if not path.is_dir() or any(p.is_file() or p.is_symlink() for p in path.rglob("*")):
        return
    for sub in sorted((p for p in path.rglob("*")), key=lambda p: len(p.parts), reverse=True):
        try:
            sub.rmdir()
        except OSError:
            return
    try:
        path.rmdir()
    except OSError:
        pass


def openai_base(url: str) -> str:
    """An OpenAI-compatible base URL: ``url`` as given when it has a path, else ``…/v1``."""
    url = url.rstrip("/")
    return url if urlsplit(url).path not in ("", "/") else url + "/v1"


def copy_private(src_dir: Path, dst_dir: Path, names: Iterable[str]) -> None:
    """Copy the files ``names`` of ``src_dir`` that exist into ``dst_dir``, readable by the
    user only (login files, private configuration). The source is only read."""
    for name in names:
        src = src_dir / name
        if src.is_file():
            dst = dst_dir / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o600)


def write_placed(root: Path, placed: Placement) -> None:
    """Write the placed document at ``placed.path`` under ``root``."""
    target = root / placed.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(placed.text, encoding="utf-8")


def native_tools(
    requested: list[str], aliases: dict[str, tuple[str, ...]], lower: bool
) -> list[str]:
    """The CLI's own names of the ``requested`` task tools, each once, in order; a tool
    without an alias keeps its name (lower-cased when ``lower``)."""
    out: list[str] = []
    for tool in requested:
        for name in aliases.get(tool, (tool.lower() if lower else tool,)):
            if name not in out:
                out.append(name)
    return out


def no_answer(result: ProcessResult, what: str) -> Failure:
    """A Failure for a run that exited cleanly without an answer."""
    return classify(
        f"{what} finished without an answer: " + (result.stderr.strip()[-200:] or "no output")
    )


def stderr_failure(result: ProcessResult, what: str) -> Failure:
    """A Failure from a non-zero exit with no structured error: classify stderr."""
    tail = result.stderr.strip().splitlines()[-5:]
    text = " ".join(tail) or f"{what} exited with status {result.returncode} and no output"
    return classify(text)


def json_lines(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL stream; other lines (banners, warnings) are skipped."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def usage_of(input_tokens: Any, output_tokens: Any) -> Usage:
    def num(v: Any) -> int:
        try:
            return max(0, int(v or 0))
        except (TypeError, ValueError):
            return 0

    return Usage(input_tokens=num(input_tokens), output_tokens=num(output_tokens))


def map_tool_names(
    native: list[str], requested: list[str], aliases: dict[str, tuple[str, ...]]
) -> list[str]:
    """Names of the tools called, in the task's vocabulary where one was asked for.

    ``aliases`` maps a task tool name (Claude Code's, e.g. ``Bash``) to the CLI's own names
    (e.g. ``("bash",)``). A native call matching a requested tool (case-insensitively or by
    alias) is reported under the requested name; any other call keeps its native name.
    """
    out = []
    for name in native:
        low = name.lower()
        hit = next(
            (
                r
                for r in requested
                if r.lower() == low or low in (a.lower() for a in aliases.get(r, ()))
            ),
            None,
        )
        out.append(hit or name)
    return out
