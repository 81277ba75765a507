"""The ``skillopt-sleep`` command line run two ways, and a config whose backends are the
simulator (for the CLI tests that run nights).

- :func:`skillopt` runs the installed console script as a user would (a process per command):
  for the tests where a process is the point (signals, the daemon, stdin and terminals, the
  console-script entry, what one command imports).
- :func:`skillopt_in_process` runs the same entry point (``skillopt_sleep.cli.main``) in this
  process, its stdout and stderr captured, and returns what :func:`skillopt` returns: for the
  tests of the CLI's behaviour (exit codes, messages, JSON), a second or so less per command.
  What still differs from a process: modules already imported stay imported, Python warnings
  go to pytest's summary rather than stderr, and commands run back to back within one second
  (a store that orders rows by the second then sees ties a process would not make).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path


def skillopt_argv(*args: str) -> list[str]:
    exe = shutil.which("skillopt-sleep")
    return [exe, *args] if exe else [sys.executable, "-m", "skillopt_sleep", *args]


def skillopt(
    *args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 240
) -> subprocess.CompletedProcess:
    """Run ``skillopt-sleep ARGS`` with stdout and stderr captured (both pipes)."""
    return subprocess.run(
        skillopt_argv(*args),
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


class _Captured(io.StringIO):
    """A captured stdout or stderr: a pipe, as :func:`skillopt` gives the command (no
    terminal, utf-8)."""

    encoding = "utf-8"

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def _process_like(env: dict | None, cwd: Path | None) -> Iterator[None]:
    """What a new process would have, for the duration of one in-process command, restored
    after: its environment (``env``, else this one's), working folder, umask and the CLI's
    per-process state (the cached service and config, the consoles made on first use)."""
    from skillopt_sleep import paths
    from skillopt_sleep.cli import console

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_umask = os.umask(0o022)
    os.umask(saved_umask)
    saved_user_umask = paths._USER_UMASK
    saved_options = (dict(console.out._options), dict(console.err._options))
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    # the consoles are made anew, sized as a piped process sizes them (COLUMNS, else 160)
    sized = os.environ.get("COLUMNS", "").strip().isdigit()
    console.out._options["width"] = None if sized else 160
    console.out._console = console.err._console = None
    console.state.update(config=None, service=None)
    try:
        yield
    finally:
        svc = console.state.get("service")
        if svc is not None:
            svc.close()  # the process would have exited: its store closed
        console.state.update(config=None, service=None)
        console.out._console = console.err._console = None
        console.out._options, console.err._options = saved_options
        paths._USER_UMASK = saved_user_umask
        os.umask(saved_umask)
        os.chdir(saved_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(saved_env)


def skillopt_in_process(
    *args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 240
) -> subprocess.CompletedProcess:
    """``skillopt-sleep ARGS`` run in this process through the console script's own entry
    point (``main``: its error lines and exit codes), stdin empty, stdout and stderr captured;
    the result is :func:`skillopt`'s. ``timeout`` is accepted for the same call shape (pytest's
    timeout bounds an in-process command)."""
    from skillopt_sleep.cli import main

    argv = skillopt_argv(*args)
    stdout, stderr = _Captured(), _Captured()
    code: int = 0
    saved_argv, saved_streams = sys.argv, (sys.stdin, sys.stdout, sys.stderr)
    saved_main = sys.modules["__main__"]
    with _process_like(env, cwd), open(os.devnull, encoding="utf-8") as devnull:
        # the console script's argv and __main__ (click names the program from them: usage
        # lines say "skillopt-sleep", not "python -m pytest")
        sys.argv = ["skillopt-sleep", *args]
        sys.modules["__main__"] = types.ModuleType("__main__")
        sys.stdin, sys.stdout, sys.stderr = devnull, stdout, stderr
        try:
            main()
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:  # sys.exit("message"): the message on stderr, status 1
                stderr.write(f"{exc.code}\n")
                code = 1
        finally:
            sys.argv = saved_argv
            sys.modules["__main__"] = saved_main
            sys.stdin, sys.stdout, sys.stderr = saved_streams
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def sim_config(
    path: Path, home: Path, project: Path, base_url: str, extra: str = "", api_key: str = "sk-test"
) -> Path:
    """A config: Claude Code and Codex sessions under ``home``, ``project``'s AGENTS.md
    trained through the simulator at ``base_url`` (one epoch)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"""
project = "{project}"
epochs = 1
[sources.claude_code]
roots = ["{home / ".claude" / "projects"}"]
[sources.codex]
roots = ["{home / ".codex" / "sessions"}"]
[target]
name = "openai_compatible"
base_url = "{base_url}"
model = "sim"
api_key = "{api_key}"
max_retries = 1
timeout = 10
[optimizer]
name = "openai_compatible"
base_url = "{base_url}"
model = "sim"
api_key = "{api_key}"
max_retries = 1
[document]
kind = "path"
path = "{project / "AGENTS.md"}"
{extra}
""",
        encoding="utf-8",
    )
    return path
