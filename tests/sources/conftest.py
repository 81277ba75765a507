"""Fixtures for the harvester tests; the log builders are in :mod:`tests.helpers.sources`."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillopt_sleep.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def claude_root(isolated_home: Path) -> Path:
    root = isolated_home / ".claude" / "projects"
    root.mkdir(parents=True)
    return root


@pytest.fixture
def codex_home(isolated_home: Path) -> Path:
    home = isolated_home / ".codex"
    (home / "sessions").mkdir(parents=True)
    return home
