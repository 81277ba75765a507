"""GitHub Copilot CLI sessions: ``$COPILOT_HOME/session-state/<id>/events.jsonl`` (plus the
legacy flat ``session-state/<id>.jsonl``); ``COPILOT_HOME`` defaults to ``~/.copilot``.

Each line is one ``copilot-agent`` event; :mod:`skillopt_sleep.sources.copilot_events` parses
them (what is kept, session key, project, ``headless``, ``self_generated``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from skillopt_sleep.sources.base import ParseResult, Source
from skillopt_sleep.sources.copilot_events import parse_events


class CopilotCliSource(Source):
    """Harvester for GitHub Copilot CLI ``session-state`` event logs (see module doc)."""

    name = "copilot_cli"
    format_version = (
        "Copilot CLI copilot-agent events, copilotVersion 1.0.11 (synthetic: no real capture)"
    )
    mode = "jsonl"

    def default_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        from skillopt_sleep.agents import agent_of_source

        return [agent_of_source(self.name).home(env, home) / "session-state"]

    def discover(self, root: Path) -> Iterator[Path]:
        """``<root>/<id>/events.jsonl`` and legacy ``<root>/<id>.jsonl``, sorted."""
        try:
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.name.endswith(".jsonl"):
                yield Path(entry.path)
            elif entry.is_dir():
                events = Path(entry.path) / "events.jsonl"
                if events.exists() or events.is_symlink():
                    yield events

    def parse(self, path: Path, lines: Iterable[bytes], state: dict) -> ParseResult:
        default = path.parent.name if path.name == "events.jsonl" else path.stem
        return parse_events(self.name, path, lines, state, default)
