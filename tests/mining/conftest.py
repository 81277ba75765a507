"""Fixtures of the mining tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skillopt_sleep.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A fresh store in the test's folder, closed after it."""
    s = Store(tmp_path / "t.db")
    yield s
    s.close()
