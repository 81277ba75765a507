"""A REAL agent CLI that hangs past the backend's ``timeout`` is killed with every process it
started (the fake-CLI version of this is in test_exec_process.py).

After one answered call, the simulator stalls every model call (``Simulator.stall_next``: the
request is read, no byte is answered), so ``claude -p`` / ``codex exec`` / ``copilot -p`` /
``opencode run`` / ``pi -p`` from node_modules/.bin sit
waiting for their model API. While the call runs, a watcher records the whole process tree
under the test process (psutil); after BackendTimeout none of those processes, and no process
running the CLI with this test's HOME, may be left alive.

In CI (env ``CI`` set) a missing CLI fails; elsewhere these tests are skipped.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Self

import psutil
import pytest

from skillopt_sleep.backends import get_backend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import BackendTimeout
from skillopt_sleep.models import CompletionRequest
from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from tests.helpers.clis import agent_binary

pytestmark = [pytest.mark.cli, pytest.mark.usefixtures("cli_path")]

KEY = "sk-sim-stall-0123456789"
PERSONA = persona_from_dict(
    {"name": "stall-test", "models": ["sim-demo"], "default_answer": "Sure: {prompt}"}
)
TIMEOUT = 5.0
#: opencode starts every call in a fresh XDG sandbox (a new opencode.db and its migrations):
#: 5-10 s before its first model request on a loaded 2-core machine
SLOW_START = {"opencode": 30.0}
#: the simulator holds each request this long: far past TIMEOUT, bounded so its threads end
STALL = 60.0


class TreeWatcher:
    """Polls the descendants of this process while a call runs; keeps every one seen, keyed
    by (pid, create_time) so a recycled pid is never mistaken for a survivor."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, float], list[str]] = {}
        self._stop = threading.Event()
        self._me = psutil.Process()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in self._me.children(recursive=True):
                try:
                    key = (proc.pid, proc.create_time())
                    cmd = proc.cmdline()
                except psutil.Error:
                    continue
                # the latest command line: a child caught between fork and exec shows its
                # parent's (or none) first, the CLI's once it has exec'd
                if cmd or key not in self.seen:
                    self.seen[key] = cmd
            self._stop.wait(0.05)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def alive(pid: int, created: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def survivors(seen: dict[tuple[int, float], list[str]]) -> list[str]:
    return [
        f"{pid} {' '.join(cmd)[:120]}"
        for (pid, created), cmd in seen.items()
        if alive(pid, created)
    ]


def runs_cli(cmd: list[str], paths: tuple[str, ...], binary: str) -> bool:
    """``cmd`` runs the CLI: its path is in the command line, or (pi sets its process title
    to ``pi``, which replaces the command line) the command line is the bare name."""
    return any(p in " ".join(cmd) for p in paths) or cmd[:1] == [binary]


def cli_processes_of(home: str, paths: tuple[str, ...], binary: str) -> list[str]:
    """Live processes (anywhere on the machine) running one of ``paths`` with HOME = ``home``
    (this test's own HOME, so a CLI run by anything else on the machine does not count)."""
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if (
                not runs_cli(proc.info["cmdline"] or [], paths, binary)
                or proc.status() == psutil.STATUS_ZOMBIE
            ):
                continue
            if proc.environ().get("HOME") == home:
                out.append(f"{proc.pid} {cmd[:120]}")
        except psutil.Error:
            continue
    return out


@pytest.mark.parametrize(
    "name,binary",
    [
        ("claude_code", "claude"),
        ("codex", "codex"),
        ("copilot", "copilot"),
        ("opencode", "opencode"),
        ("pi", "pi"),
    ],
)
def test_a_real_cli_hanging_on_its_model_api_is_killed_with_its_children(
    name, binary, isolated_home
):
    exe = agent_binary(binary)
    # the CLI's own path as run, and the real file behind the node_modules/.bin link
    paths = (exe, os.path.realpath(exe))
    with serve(PERSONA, api_key=KEY) as sim:

        def backend(timeout: float):
            return get_backend(
                BackendConfig(
                    name=name,
                    model="sim-demo",
                    api_key=KEY,
                    max_retries=0,
                    timeout=timeout,
                    base_url=sim.url if name == "claude_code" else sim.url + "/v1",
                )
            )

        # a first, answered call: the backend works, and the CLI's first-run set-up in the
        # fresh HOME is done, so even on a loaded machine the hanging call below reaches the
        # model API well within TIMEOUT
        assert backend(120).complete(CompletionRequest(prompt="hello")).text.startswith("Sure: ")
        timeout = SLOW_START.get(name, TIMEOUT)
        b = backend(timeout)
        sim.reset()
        sim.stall_next(100, STALL)
        with TreeWatcher() as tree:
            started = time.monotonic()
            with pytest.raises(BackendTimeout) as info:
                b.complete(CompletionRequest(prompt="how do I install the dependencies?"))
            elapsed = time.monotonic() - started
        requests = sim.stats.snapshot()["requests"]
    stalled = [r for r in requests if r.get("stalled")]
    message = str(info.value)
    assert message.startswith(f"{name}: ") and f"within {timeout:g}s" in message, message
    assert "raise `timeout`" in message
    # it really hung on the model API (not, say, on start-up) ...
    assert stalled, f"the CLI never reached the simulator's model API: {requests} ({elapsed:.1f}s)"
    # ... and was given up on promptly: timeout + SIGTERM grace + SIGKILL grace, with slack
    # for a loaded 2-core machine
    assert timeout <= elapsed < timeout + 15, elapsed
    # the CLI itself was seen running (a process whose command line holds its path)
    assert any(runs_cli(cmd, paths, binary) for cmd in tree.seen.values()), tree.seen
    deadline = time.monotonic() + 5
    while survivors(tree.seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert survivors(tree.seen) == []
    assert cli_processes_of(str(isolated_home), paths, binary) == []
