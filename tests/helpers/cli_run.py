"""The installed ``skillopt-sleep`` console script run as a user would, and a config whose
backends are the simulator (for the CLI tests that run nights)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
