"""``skillopt-sleep demo``: a whole night in a sandbox against the bundled simulator.

The sandbox gets its own HOME-like folder with Claude Code and Codex session logs written in
those agents' on-disk formats (Claude Code 2.1.x project JSONL, Codex envelope rollouts), its
own store and state folder, and a simulator on 127.0.0.1. Nothing outside the sandbox is read
or written. The transcript writers are in :mod:`skillopt_sleep.testing.sessions`; the engine's
tests use them too.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillopt_sleep.errors import NightError
from skillopt_sleep.results import DemoResult, OnProgress, ProgressEvent
from skillopt_sleep.testing.sessions import write_conversations

#: (prompt, answer, correction or None) turns per conversation in the demo project.
DEMO_CONVERSATIONS: list[tuple[str, list[tuple[str, str, str | None]]]] = [
    (
        "claude_code",
        [
            (
                "how do I install the dependencies?",
                "Run `npm install` in the project root.",
                "no, use pnpm instead of npm",
            )
        ],
    ),
    (
        "codex",
        [
            (
                "How do I install the dependencies",
                "Run `npm install` in the project root.",
                "no, use pnpm instead of npm",
            )
        ],
    ),
    (
        "claude_code",
        [("install the dependencies please", "Run `npm install` in the project root.", None)],
    ),
    (
        "claude_code",
        [("run the tests", "Run `npm test` to run the suite.", "no, use pnpm instead of npm")],
    ),
    ("codex", [("run the tests", "Run `npm test` to run the suite.", "use pnpm instead of npm")]),
    (
        "claude_code",
        [
            (
                "add the lodash package as a dependency",
                "Run `npm install lodash`.",
                "no, use pnpm instead of npm",
            )
        ],
    ),
    (
        "codex",
        [
            (
                "add the zod package as a dependency",
                "Run `npm install zod`.",
                "use pnpm instead of npm",
            )
        ],
    ),
    ("claude_code", [("run the linter", "Run `npm run lint`.", "no, use pnpm instead of npm")]),
    (
        "codex",
        [("run the linter on the project", "Run `npm run lint`.", "use pnpm instead of npm")],
    ),
    (
        "claude_code",
        [
            (
                "set up the project for development",
                "Run `npm install` in the project root.",
                "no, use pnpm instead of npm",
            )
        ],
    ),
    (
        "codex",
        [("set up the project for development", "Run `npm install` in the project root.", None)],
    ),
]


@contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def demo_settings(home: Path, project: Path, url: str) -> dict[str, Any]:
    """Settings overrides for a sandbox night against the simulator at ``url``."""
    backend = {
        "name": "openai_compatible",
        "base_url": url + "/v1",
        "model": "sim-demo",
        "api_key": "sk-sim-demo",
        "max_retries": 0,
        "timeout": 30,
    }
    return {
        "sources": {
            "claude_code": {"roots": [str(home / ".claude" / "projects")]},
            "codex": {"roots": [str(home / ".codex" / "sessions")]},
        },
        "project": str(project),
        "target": backend,
        "optimizer": backend,
        "epochs": 1,
        "edit_budget": 3,
        # Claude Code's user memory file in the sandbox's home (never the user's own): the
        # file the agent loads in every turn, where the replays put each candidate too
        "document": {"kind": "path", "path": str(home / ".claude" / "CLAUDE.md")},
        # the sandbox's proposal is not the user's to review: no desktop notification
        "notify": {"desktop": False},
    }


#: what a demo report says where a night's report says how to adopt (its adopt command works
#: only inside the sandbox, with the sandbox's HOME)
DEMO_NEXT = (
    "This proposal lives in the demo's sandbox: "
    "`HOME={root}/home SKILLOPT_SLEEP_HOME={root}/skillopt-home skillopt-sleep adopt {pid}` "
    "writes the sandbox's file, nothing of yours. For your own sessions: "
    "`skillopt-sleep harvest` (what was found), `skillopt-sleep run --dry-run` (the tasks a night "
    "would train on, no model calls), `skillopt-sleep run` (a night; a backend configured in "
    "`skillopt-sleep config path`), then `skillopt-sleep proposals` and "
    "`skillopt-sleep adopt ID`."
)


def _demo_next_steps(report: Path, pid: str, root: Path) -> None:
    """Replace the report's adopt lines with :data:`DEMO_NEXT` (the sandbox's commands and
    the ones a user runs next for their own sessions)."""
    try:
        text = report.read_text("utf-8")
    except OSError:
        return
    text = re.sub(r"(?m)^Adopt them all with `skillopt-sleep adopt [^\n]*\n\n?", "", text)
    text = re.sub(
        r"(?m)^Adopt with `skillopt-sleep adopt [^\n]*$",
        lambda _m: DEMO_NEXT.format(root=root, pid=pid),
        text,
        count=1,
    )
    report.write_text(text, encoding="utf-8")


def run_demo(
    folder: Path | None = None,
    say: Callable[[str], None] | None = None,
    on_progress: OnProgress | None = None,
) -> DemoResult:
    """Run the demo night; returns status, scores and the report path. ``say`` gets its
    progress lines, ``on_progress`` its progress events (the night's, and ``demo`` ones)."""
    from skillopt_sleep.config import load_settings
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.simulator import serve
    from skillopt_sleep.store import Store

    lines = say

    def note(message: str) -> None:
        if lines is not None:
            lines(message)
        if on_progress is not None:
            on_progress(ProgressEvent(step="demo", message=message))

    keep = folder is not None
    root = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="skillopt-sleep-demo-"))
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise NightError(f"demo folder {root} must be a new or empty folder")
    root.mkdir(parents=True, exist_ok=True)
    home, project = root / "home", root / "webapp"
    project.mkdir(parents=True, exist_ok=True)
    write_conversations(home, project, DEMO_CONVERSATIONS)
    note(f"sandbox: {root} ({len(DEMO_CONVERSATIONS)} sessions written)")
    with serve("demo") as sim, _env(SKILLOPT_SLEEP_HOME=str(root / "skillopt-home")):
        note(f"simulator on {sim.url}")
        settings = load_settings(root / "no-config.toml", **demo_settings(home, project, sim.url))
        store = Store(root / "skillopt-home" / "state" / "skillopt.db")
        # the sandbox's home: the agent folders the night resolves are the sandbox's
        result = run_night(
            store,
            settings,
            trigger="demo",
            progress=lines,
            on_progress=on_progress,
            env={},
            home=home,
        )
        report = ""
        if result.proposal_id:
            row = store.proposals.get(result.proposal_id)
            assert row is not None
            report = str(Path(row.dir) / "report.md")
        for staged in store.proposals.staged():  # the night's proposal and its copies
            _demo_next_steps(Path(staged.dir) / "report.md", staged.id, root)
        store.close()
    return DemoResult(
        status=result.status,
        val_before=result.val_before,
        val_after=result.val_after,
        test_before=result.test_before,
        test_after=result.test_after,
        report=report,
        sandbox=str(root) if keep or report else "",
        proposal_id=result.proposal_id,
        home=str(root / "skillopt-home"),
        #: the sandbox's HOME (its agents' folders and the trained memory file)
        user_home=str(home),
    )
