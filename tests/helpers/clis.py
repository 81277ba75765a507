"""The pinned agent CLIs (``npm ci`` installs them into node_modules/.bin): where the tests find
them, and what a missing one does to a test."""

from __future__ import annotations

import os
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
