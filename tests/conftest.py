"""Shared fixtures. Every test runs with its own HOME and skillopt-sleep home under tmp_path,
so nothing reads or writes the real user's agent logs or state."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import realmodel
from tests.helpers.clis import NODE_BIN

#: the umask pytest started with (read once, restored at once)
_START_UMASK = os.umask(0o022)
os.umask(_START_UMASK)
#: the real model's cache, read before any test points HOME at its tmp_path (docs/realmodel.md)
_MODEL_CACHE = realmodel.cache_dir()
#: the fetch done once collection is over: {"file": Path} or {"error": the exception}
_FETCHED: dict[str, object] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that drives a real agent CLI (marker ``cli``) or the real model (``realmodel``)
    is ``slow`` too: ``pytest -m "not slow"`` is the fast subset (in-process tests, the CLI
    run in-process, the simulator).

    The slow tests run first, the longest of them (:data:`LONGEST`: real agent CLIs' whole
    nights, a minute or two each) before the rest, each group in its collected order: the
    workers start on them, so no minutes-long night is left alone at the end while the other
    workers idle."""
    for item in items:
        if item.get_closest_marker("cli") is not None:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("realmodel") is not None:
            item.add_marker(pytest.mark.slow)  # the model's inference: not the fast subset
            # the report carries it to the controller (keywords hold node names too)
            item.user_properties.append(("kind", "realmodel"))

    def order(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        if path in LONGEST:
            return 0, LONGEST.index(path)
        if item.get_closest_marker("realmodel") is not None:
            return 3, 0  # last: the model's inference would slow the real-CLI nights above
        return (1 if item.get_closest_marker("slow") is not None else 2), 0

    items.sort(key=order)


#: when the session started, and when the last test of each kind (real-model or not) ended
_CLOCK: dict[str, float] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    _CLOCK["start"] = time.time()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note when each kind's last test ended (under xdist the controller sees every report)."""
    if report.when == "teardown":
        real = any(tuple(p) == ("kind", "realmodel") for p in report.user_properties)
        kind = "realmodel" if real else "rest"
        _CLOCK[kind] = max(_CLOCK.get(kind, 0.0), report.stop)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The wall time of the suite apart from the real-model tests, and with them (the
    real-model tests run last: the difference is theirs)."""
    start = _CLOCK.get("start")
    if start is None:
        return
    if "rest" not in _CLOCK:  # `pytest -m realmodel`, the README's second run
        if "realmodel" in _CLOCK:
            terminalreporter.write_line(
                f"wall time: {_CLOCK['realmodel'] - start:.0f} s for the real-model tests"
            )
        return
    line = f"wall time: {_CLOCK['rest'] - start:.0f} s for the tests apart from the real-model ones"
    if "realmodel" in _CLOCK:
        line += f", {max(_CLOCK.values()) - start:.0f} s with them"
    terminalreporter.write_line(line)


#: the test files whose tests take 20 s to 2 min each, longest first (``--durations``)
LONGEST = (
    "tests/night/test_openclaw_deployed.py",
    "tests/night/test_certified_deployed.py",
    "tests/night/test_night_real_clis.py",
    "tests/install/test_agent_clis.py",
    "tests/backends/test_exec_real_failures.py",
    "tests/night/test_parallel_nights.py",
)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))
    monkeypatch.setenv("SKILLOPT_SLEEP_HOME", str(tmp_path / "skillopt-home"))
    for var in list(os.environ):
        if var.startswith("SKILLOPT_SLEEP_") and var != "SKILLOPT_SLEEP_HOME":
            monkeypatch.delenv(var)
    for var in (
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "COPILOT_HOME",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "XDG_DATA_HOME",
        "PI_CODING_AGENT_DIR",
        "PI_CODING_AGENT_SESSION_DIR",
        "OPENCLAW_STATE_DIR",
        "OPENCLAW_HOME",
        "OPENCLAW_CONFIG_PATH",
        "OPENCLAW_WORKSPACE_DIR",
        "OPENCLAW_PROFILE",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
    ):
        monkeypatch.delenv(var, raising=False)
    # a night's desktop notification never reaches a developer's real desktop session (the
    # tests' stand-in notify-send scripts do not use the bus)
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "disabled:")
    # an in-process command makes the process private (umask 077) and remembers the user's
    # umask: each test starts from the umask pytest started with, nothing remembered
    from skillopt_sleep import paths

    monkeypatch.setattr(paths, "_USER_UMASK", None)
    os.umask(_START_UMASK)
    # an in-process command keeps its service (and store) for the process: a test's CLI
    # calls never reach an earlier test's store
    from skillopt_sleep.cli import console

    monkeypatch.setitem(console.state, "service", None)
    monkeypatch.setitem(console.state, "config", None)
    return home


@pytest.fixture
def corpus() -> Path:
    """The shared real-log corpus (``SKILLOPT_CORPUS``, set by .ci/run)."""
    value = os.environ.get("SKILLOPT_CORPUS")
    reason = (
        "SKILLOPT_CORPUS is not set: the shared session-log corpus is not available"
        if not value
        else f"SKILLOPT_CORPUS={value} is not a directory"
    )
    if value and Path(value).is_dir():
        return Path(value)
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must provide it; .ci/run sets it from ../shared/corpus)")
    pytest.skip(reason)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A project folder with one file, for the agent CLIs to run in."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "hello.txt").write_text("hi\n")
    return work


@pytest.fixture
def cli_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """node_modules/.bin first on PATH (CI's .ci/run does the same)."""
    monkeypatch.setenv("PATH", f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Fetch the real model (once, cached) before the first test when any selected test needs
    it: a first download (~1.1 GB) then counts against no test's timeout."""
    if any(item.get_closest_marker("realmodel") for item in session.items):
        try:
            _FETCHED["file"] = realmodel.fetch(cache=_MODEL_CACHE)
        except Exception as exc:  # reported by real_model_file, in the tests that need it
            _FETCHED["error"] = exc


@pytest.fixture(scope="session")
def real_model_file() -> Path:
    """The real model's GGUF (docs/realmodel.md), fetched into its cache if needed. Missing:
    a failure under CI, a skip elsewhere."""
    if "error" in _FETCHED:
        realmodel.missing(f"the real model could not be fetched: {_FETCHED['error']}")
    try:
        return realmodel.fetch(cache=_MODEL_CACHE)
    except realmodel.ModelFetchError as exc:
        realmodel.missing(f"the real model could not be fetched: {exc}")


@pytest.fixture(scope="session")
def real_model(real_model_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL (``http://127.0.0.1:<port>``, no ``/v1``) of the real model's server
    (tests/realmodel/serve.mjs, docs/realmodel.md), started once per session (per xdist
    worker) and shared by the tests. Missing runtime: a failure under CI, a skip elsewhere."""
    log = tmp_path_factory.mktemp("realmodel") / "serve.log"
    try:
        with realmodel.serve(real_model_file, log) as server:
            yield server.base_url
    except realmodel.ModelFetchError as exc:
        realmodel.missing(str(exc))
