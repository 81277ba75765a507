"""``adopt`` killed (a real SIGKILL) after it recorded the adoption and before it replaced
the live file: the next command that adopts or rolls back finds the adoption never happened
(the live file is still the old one), undoes its record, and the proposal adopts again.

The kill lands at an exact point: ``strace`` delivers SIGKILL on entering the rename that
would put the new live file in place (found by a first, traced-only adopt, rolled back; the
rename is failed as the kill is delivered, so it cannot happen).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt_sleep.demo import DEMO_CONVERSATIONS
from skillopt_sleep.simulator import serve
from skillopt_sleep.testing.sessions import write_conversations

#: slow: adopt killed under strace at an exact system call
pytestmark = pytest.mark.slow

RENAMES = "rename,renameat,renameat2"


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "skillopt_sleep", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )


def _traced(env: dict, inject: str, *args: str) -> subprocess.CompletedProcess:
    cmd = ["strace", "-f", "-qq", "-e", f"trace={RENAMES}", "-e", "signal=none"]
    cmd += inject.split() if inject else []
    cmd += [sys.executable, "-m", "skillopt_sleep", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)


@pytest.fixture
def world(tmp_path: Path, isolated_home: Path) -> tuple[Path, Path, dict]:
    if not shutil.which("strace"):
        pytest.skip("strace is not installed: cannot kill adopt at an exact system call")
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS)
    live = project / "AGENTS.md"
    live.write_text("# rules\n\nmine\n", encoding="utf-8")
    home = tmp_path / "skillopt-home"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    with serve("demo") as sim:
        backend = f'name = "openai_compatible"\nbase_url = "{sim.url}/v1"\nmodel = "sim"\n'
        backend += 'api_key = "sk-test"\nmax_retries = 1\n'
        cfg = home / "config" / "config.toml"
        cfg.parent.mkdir(parents=True)
        cfg.write_text(
            f'project = "{project}"\nepochs = 1\n[target]\n{backend}[optimizer]\n{backend}'
            f'[document]\nkind = "path"\npath = "{live}"\n',
            encoding="utf-8",
        )
        run = _cli(env, "run", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["proposal_id"] == "p1"
    return home, live, env


def _live_rename(trace: str, live: Path) -> int:
    """The 1-based index, among the traced renames, of the one onto ``live``."""
    calls = [
        ln for ln in trace.splitlines() if re.search(rf"\b(?:{RENAMES.replace(',', '|')})\(", ln)
    ]
    hits = [i for i, ln in enumerate(calls, 1) if f'"{live}")' in ln or f'"{live}",' in ln]
    assert len(hits) == 1, calls
    return hits[0]


def _trial(env: dict, live: Path) -> int:
    """Adopt p1 traced (renames only), roll it back; the index of the live file's rename."""
    old = live.read_bytes()
    dry = _traced(env, "", "adopt", "p1")
    assert dry.returncode == 0, dry.stderr
    assert _cli(env, "rollback").returncode == 0 and live.read_bytes() == old
    return _live_rename(dry.stderr, live)


def test_adopt_killed_between_record_and_write_is_undone_and_adopts_again(
    world: tuple[Path, Path, dict], tmp_path: Path
) -> None:
    home, live, env = world
    old = live.read_bytes()
    nth = _trial(env, live)

    inject = f"-e inject={RENAMES}:error=EIO:signal=KILL:when={nth}"
    killed = _traced(env, inject, "adopt", "p1")
    assert killed.returncode in (-9, 137), (killed.returncode, killed.stderr[-2000:])
    assert killed.stderr.strip().splitlines()[-1].endswith(f'"{live}") = ?')  # died in it
    assert live.read_bytes() == old  # the kill landed before the live file was replaced

    # the next adopt finds the unfinished adoption, undoes its record and adopts
    res = _cli(env, "adopt", "p1")
    assert res.returncode == 0, res.stderr
    assert live.read_bytes() != old and "pnpm" in live.read_text("utf-8")
    listed = json.loads(_cli(env, "proposals", "--all", "--json").stdout)
    assert [p["status"] for p in listed if p["id"] == "p1"] == ["adopted"]
    res = _cli(env, "rollback")
    assert res.returncode == 0, res.stderr
    assert live.read_bytes() == old
    listed = json.loads(_cli(env, "proposals", "--all", "--json").stdout)
    assert [p["status"] for p in listed if p["id"] == "p1"] == ["rolled_back"]
    assert not list(home.glob("state/proposals/*/adopting.json"))


def test_rollback_after_a_killed_adopt_needs_no_force(
    world: tuple[Path, Path, dict], tmp_path: Path
) -> None:
    home, live, env = world
    old = live.read_bytes()
    nth = _trial(env, live)
    killed = _traced(env, f"-e inject={RENAMES}:error=EIO:signal=KILL:when={nth}", "adopt", "p1")
    assert killed.returncode in (-9, 137) and live.read_bytes() == old

    # the adoption never happened: nothing to roll back, the proposal is as it was
    res = _cli(env, "rollback")
    assert res.returncode == 1 and "nothing to roll back" in res.stderr, res.stderr
    listed = json.loads(_cli(env, "proposals", "--all", "--json").stdout)
    assert [p["status"] for p in listed if p["id"] == "p1"] == ["rolled_back"]
    assert live.read_bytes() == old
    res = _cli(env, "adopt", "p1")
    assert res.returncode == 0, res.stderr
    assert "pnpm" in live.read_text("utf-8")
