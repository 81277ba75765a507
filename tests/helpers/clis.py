"""The pinned agent CLIs (``npm ci`` installs them into node_modules/.bin): where the tests find
them, and what a missing one does to a test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = ROOT / "node_modules" / ".bin"


def agent_binary(name: str, bin_dir: Path | None = None) -> str:
    """Path of the pinned CLI ``name``. Missing: the test FAILS when ``CI`` is set (CI must
    have installed it), and is skipped with the reason otherwise."""
    path = (bin_dir or NODE_BIN) / name
    if path.exists():
        return str(path)
    reason = f"{path} is missing (run `npm ci` in {ROOT})"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def require_cli(name: str) -> str:
    """Path of the pinned CLI ``name`` (see :func:`agent_binary`)."""
    return agent_binary(name)


def cli_env(**extra: str) -> dict[str, str]:
    """A minimal environment for running an agent CLI in the test's HOME: PATH, HOME, a UTF-8
    locale, no colour, loopback never proxied, plus ``extra`` (an empty value removes it)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ["HOME"],
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v}


def run_cli(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run an agent CLI with no stdin; it must exit 0 (else the assertion shows its stderr)."""
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{argv[0]} exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    return proc
