"""What every command module of the CLI shares: the two consoles, the parsed ``--config``,
JSON and score printing, and the application service for this invocation. Command modules
import from here (never from :mod:`skillopt_sleep.cli` itself), so the CLI has no import
circle."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from skillopt_sleep.service import Service

# piped output is not cut to 80 columns (rich's default without a terminal)
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True)

#: set by the root callback: ``config`` is the ``--config`` file (None: the default one)
state: dict[str, Any] = {"config": None, "service": None}


def config_path() -> Path | None:
    path = state["config"]
    return Path(path) if path else None


def service() -> Service:
    """The application service of this invocation (one store connection, opened on use)."""
    if state["service"] is None:
        state["service"] = Service(config_path())
    svc: Service = state["service"]
    return svc


def print_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str, ensure_ascii=False))


def fmt_score(x: Any) -> str:
    return "—" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))


def first_run_setup() -> None:
    """On a new install (no config file, none given) write one that enables every agent whose
    logs exist on this machine, and say so. Used by ``harvest``, ``run`` and ``start``."""
    enabled = service().first_run_setup()
    if enabled is None:
        return
    from skillopt_sleep import paths

    err.print(
        f"first run: wrote {paths.config_file()}, harvesting "
        f"{', '.join(enabled) or 'nothing found yet'} (`skillopt-sleep sources` lists every agent)",
        markup=False,
    )
