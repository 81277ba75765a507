"""Setting up: the sources found and enabled, the agent shells, the demo night."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.results import DemoResult, OnProgress
from skillopt_sleep.service.core import Core, Progress

if TYPE_CHECKING:
    from skillopt_sleep.install import Report
    from skillopt_sleep.sources.discovery import SourceStatus


@dataclass
class SourcesReport:
    """What :meth:`Service.sources` found and did: the config file (``created`` now?), the
    sources it switched on, those found but not enabled, and every source's status."""

    config: Path
    created: bool
    enabled_now: list[str]
    found_not_enabled: list[str]
    sources: list[SourceStatus]


def _can_create(path: Path) -> bool:
    """Whether ``path`` can be made: its nearest existing folder is writable (a read-only
    home, a backup: reads do not write a first config there)."""
    here = path.parent
    while not here.exists() and here != here.parent:
        here = here.parent
    return os.access(here, os.W_OK | os.X_OK)


class OnboardingService:
    """The sources, the first config, the agent shells (install / uninstall) and the demo."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def sources(self, *, enable_found: bool = False) -> SourcesReport:
        """Every known source: its roots found, sessions and bytes, enabled? On a new
        install (no config file yet) this writes one enabling every agent whose logs exist;
        ``enable_found`` also switches on agents found after that."""
        from skillopt_sleep.sources.discovery import discover_sources, enableable
        from skillopt_sleep.sources.discovery import enable_found as do_enable

        config = self.core.config_file()
        statuses = discover_sources(self.core.settings(), config_path=config)
        created = not config.exists() and _can_create(config)
        changed: list[str] = []
        if enable_found or created:
            changed = do_enable(config, statuses, switch_disabled=enable_found)
            if changed or created:
                statuses = discover_sources(self.core.settings(), config_path=config)
        return SourcesReport(
            config=config,
            created=created,
            enabled_now=changed,
            found_not_enabled=enableable(config, statuses),
            sources=statuses,
        )

    def first_run_setup(self) -> list[str] | None:
        """On a new install (the default config file absent, none given) write one that
        enables every agent whose logs exist here; returns what it enabled (None: nothing
        to set up)."""
        from skillopt_sleep.sources.discovery import discover_sources, enable_found

        path = paths.config_file()
        if self.core.config_path is not None or path.exists():
            return None
        return enable_found(path, discover_sources(load_settings(path), config_path=path))

    def install(self, agent: str, project: Path | None = None, *, dry_run: bool = False) -> Report:
        """Put the agent shell in place (see :mod:`skillopt_sleep.install`); its report."""
        from skillopt_sleep.install import install

        return install(agent, project, dry_run=dry_run)

    def uninstall(
        self, agent: str, project: Path | None = None, *, dry_run: bool = False
    ) -> Report:
        """Undo :meth:`install`, byte for byte; its report."""
        from skillopt_sleep.install import uninstall

        return uninstall(agent, project, dry_run=dry_run)

    def demo(
        self, keep: Path | None, say: Progress | None, on_progress: OnProgress | None = None
    ) -> DemoResult:
        """One whole night in a sandbox against the bundled simulator (:mod:`.demo`)."""
        from skillopt_sleep.demo import run_demo

        return run_demo(keep, say=say, on_progress=on_progress)
