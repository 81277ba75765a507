"""Fixtures for the daemon tests; the harness and helpers are in :mod:`tests.helpers.daemon`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.daemon import DaemonHarness, GatedProxy


@pytest.fixture
def harness(isolated_home: Path, tmp_path: Path) -> Iterator[DaemonHarness]:
    h = DaemonHarness(isolated_home, tmp_path)
    try:
        yield h
    finally:
        h.cleanup()


@pytest.fixture
def sim_proxy() -> Iterator[GatedProxy]:
    from skillopt_sleep.simulator import serve

    try:
        from skillopt_sleep.simulator import demo_persona_path

        persona = demo_persona_path()
    except ImportError:  # pragma: no cover
        persona = "demo"
    with serve(persona) as sim:
        proxy = GatedProxy(sim.url)
        try:
            yield proxy
        finally:
            proxy.close()
