"""The desktop notification a night sends when it stages a proposal.

``notify-send`` on Linux (and other Unixes) when it is on ``PATH``, ``osascript`` on macOS;
config ``notify.desktop`` (default on) switches it off. It never fails a night: a missing
tool, a tool that fails (no display, no session bus) or one that hangs (bounded wait) is
returned as one line that the night records in its summary (``notified``). The agent-visible
notice (``status`` / the MCP ``sleep_status`` tool) is built from the store, not sent from here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from skillopt_sleep.config import Settings
from skillopt_sleep.errors import one_line

#: how long a notification tool may take before the night goes on without it (seconds)
TIMEOUT = 10.0


def _score(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def message(
    proposal_id: str,
    target: str,
    val_before: float | None,
    val_after: float | None,
    project: str | None = None,
) -> tuple[str, str]:
    """The notification's title and body: which document, of which project (a project's
    own file: ``AGENTS.md of webapp (/src/webapp)``; a shared memory file: ``CLAUDE.md in
    /home/u/.claude, the block for webapp``), and its scores."""
    name = os.path.basename(target) or target
    folder = os.path.dirname(target)
    what = f"{name} in {folder}" if folder else name
    pname = ""
    if project:
        root = project.rstrip("/") or project
        pname = os.path.basename(root) or root
        inside = target.startswith(root + "/")
        what = f"{name} of {pname} ({folder})" if inside else f"{what}, the block for {pname}"
    return (
        f"skillopt-sleep: proposal {proposal_id}"
        + (f" for {pname}" if pname else "")
        + " is ready",
        f"{what}: val {_score(val_before)} → {_score(val_after)}. "
        f"Review: skillopt-sleep show {proposal_id}",
    )


def _command(title: str, body: str) -> tuple[list[str] | None, str]:
    """The command that shows the notification here, or None and why there is none."""
    if sys.platform == "darwin":
        exe = shutil.which("osascript")
        if exe is None:
            return None, "osascript is not on PATH"

        def quoted(text: str) -> str:
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

        script = f"display notification {quoted(body)} with title {quoted(title)}"
        return [exe, "-e", script], ""
    if sys.platform.startswith("win"):
        return None, "no desktop notifier on Windows"
    exe = shutil.which("notify-send")
    if exe is None:
        return None, "notify-send is not on PATH"
    return [exe, "--app-name=skillopt-sleep", title, body], ""


def proposal_ready(
    settings: Settings,
    proposal_id: str,
    target: str,
    val_before: float | None,
    val_after: float | None,
    project: str | None = None,
) -> str:
    """Tell the desktop that ``proposal_id`` is staged; returns what happened, one line
    (``sent with notify-send``, ``off (notify.desktop = false)``, ``not sent: …``).
    ``project``: the project whose block it trained (default: the night's project)."""
    if not settings.notify.desktop:
        return "off (notify.desktop = false)"
    project = project or (str(settings.project) if settings.project else None)
    title, body = message(proposal_id, target, val_before, val_after, project)
    argv, why = _command(title, body)
    if argv is None:
        return f"not sent: {why}"
    tool = os.path.basename(argv[0])
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"not sent: {tool} did not answer within {TIMEOUT:.0f} s"
    except OSError as exc:
        return f"not sent: {tool}: {one_line(str(exc), 200)}"
    if done.returncode != 0:
        said = one_line(done.stderr or done.stdout or "", 200)
        return f"not sent: {tool} exited {done.returncode}" + (f": {said}" if said else "")
    return f"sent with {tool}"
