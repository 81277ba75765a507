"""Child processes the tests start (a dashboard, the model server): stopped one way."""

from __future__ import annotations

import subprocess


def stop(proc: subprocess.Popen, grace: float = 10) -> None:
    """SIGTERM ``proc``, wait up to ``grace`` seconds, then SIGKILL it and reap it."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
