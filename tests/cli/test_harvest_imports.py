"""The no-change ``skillopt-sleep harvest`` stays lean: it does not import what only a night,
the daemon, proposals or the faces other than the CLI need (issue 14: a harvest with nothing
new is mostly interpreter start-up and imports). Not a timing test: the modules a whole
``harvest`` process imports are read from ``python -X importtime``."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from skillopt_sleep.testing.corpus_gen import generate_corpus

#: never needed by a harvest that finds nothing new (most not by one that reads new files)
HEAVY = (
    "skillopt_sleep.daemon_client",
    "skillopt_sleep.night.lifecycle",
    "skillopt_sleep.night.log",
    "skillopt_sleep.night.replay",
    "skillopt_sleep.delivery.document",
    "skillopt_sleep.night.screen",
    "skillopt_sleep.mining.mine",
    "skillopt_sleep.proposals",
    "skillopt_sleep.status",
    "skillopt_sleep.backends",
    "psutil",
    "filelock",
    "rapidfuzz",
    "sqlite_utils",  # the store reads and records the pass without it (issue 14)
    "platformdirs",  # SKILLOPT_SLEEP_HOME is set (isolated_home): the folders are its
    "rich.console",  # --json: the JSON is written plain (cli/console.py print_json)
    "rich.progress",  # --json: no live display
    "rich.table",  # --json: no table
    "httpx",
    "mcp",
    "starlette",
    "uvicorn",
)


def _harvest_imports(cwd: Path) -> tuple[dict, set[str]]:
    """Run one whole ``skillopt-sleep harvest --json``; its report and the modules it
    imported."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "skillopt_sleep", "harvest", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    return json.loads(done.stdout), modules


def test_a_no_change_harvest_does_not_import_the_night_the_daemon_or_other_faces(
    isolated_home: Path, tmp_path: Path
) -> None:
    for name in HEAVY:  # each named module exists: the check below cannot pass on a typo
        assert importlib.util.find_spec(name) is not None, name
    generate_corpus(isolated_home, 12, seed=14, size_scale=0.05)
    first, _ = _harvest_imports(tmp_path)
    assert sum(s["files_read"] for s in first["sources"].values()) > 10

    again, modules = _harvest_imports(tmp_path)
    sources = again["sources"].values()
    assert sum(s["files_seen"] for s in sources) == sum(s["files_unchanged"] for s in sources)
    assert sum(s["files_read"] for s in sources) == 0
    # the parse of importtime's report works: what the harvest does need is listed
    assert {"skillopt_sleep.sources.ingest", "skillopt_sleep.store", "typer"} <= modules
    assert sorted(set(HEAVY) & modules) == []
