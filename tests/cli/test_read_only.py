"""A state folder this user cannot write (a backup, a read-only disk, another user's folder):
read commands answer from it, write commands fail with one line naming the folder, and no
byte of it changes.

The folder is made read-only for the command alone with a read-only bind mount in a mount
namespace of its own (``unshare -m``): the tests run as root, whom file modes do not stop, and
the interpreter lives where another user cannot run it. Where this machine allows no mount
namespace the tests are skipped (reported as skipped, not passed).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt_sleep.demo import DEMO_CONVERSATIONS
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.sessions import write_conversations

#: slow: commands in a read-only mount namespace (unshare), a process each
pytestmark = pytest.mark.slow

_MOUNT = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'


def _read_only_cli(folder: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """``skillopt-sleep ARGS`` with ``folder`` mounted read-only for it alone."""
    cmd = ["unshare", "-m", "sh", "-c", _MOUNT, str(folder)]
    cmd += [sys.executable, "-m", "skillopt_sleep", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def _mounts_work(tmp_path: Path) -> bool:
    if not shutil.which("unshare"):
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    res = subprocess.run(
        ["unshare", "-m", "sh", "-c", _MOUNT, str(probe), "touch", str(probe / "x")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return res.returncode != 0 and "Read-only file system" in res.stderr


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def state(tmp_path: Path, isolated_home: Path) -> tuple[Path, dict]:
    """A state folder after a harvest and a night (simulator), and the CLI's environment."""
    if not _mounts_work(tmp_path):
        pytest.skip("no mount namespace here: cannot make a folder read-only for root")
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS)
    home = tmp_path / "skillopt-home"
    env = dict(os.environ, COLUMNS="200")
    with serve("demo") as sim:
        backend = f'name = "openai_compatible"\nbase_url = "{sim.url}/v1"\nmodel = "sim"\n'
        backend += 'api_key = "sk-test"\nmax_retries = 1\n'
        cfg = home / "config" / "config.toml"
        cfg.parent.mkdir(parents=True)
        cfg.write_text(
            f'project = "{project}"\nepochs = 1\n[target]\n{backend}[optimizer]\n{backend}'
            f'[document]\nkind = "path"\npath = "{project / "AGENTS.md"}"\n',
            encoding="utf-8",
        )
        run = subprocess.run(
            [sys.executable, "-m", "skillopt_sleep", "run", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
        )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["proposal_id"] == "p1"
    return home, env


def test_read_commands_answer_from_a_read_only_folder(state: tuple[Path, dict]) -> None:
    home, env = state
    before = _digest(home)
    assert not Path(f"{home}/state/skillopt.db-wal").exists()  # closed: checkpointed
    answers = {}
    for args in (
        ("status", "--json"),
        ("proposals", "--json"),
        ("show", "p1", "--json"),
        ("tasks", "--json"),
        ("search", "pnpm", "--json"),
        ("nights", "--json"),
        ("logs",),
        ("outbox", "--json"),
        ("doctor",),
        ("status",),
    ):
        res = _read_only_cli(home, env, *args)
        assert "unable to open database file" not in res.stderr, args
        if args[0] != "doctor":  # doctor fails on the agents' CLIs missing here
            assert res.returncode == 0, (args, res.stderr)
        answers[args[0]] = res.stdout
    assert json.loads(answers["proposals"])[0]["id"] == "p1"
    assert json.loads(answers["show"])["id"] == "p1"
    assert json.loads(answers["tasks"]) and json.loads(answers["search"])["hits"]
    assert json.loads(answers["nights"])[0]["proposal_id"] == "p1"
    assert json.loads(answers["outbox"])
    assert "ok      store" in answers["doctor"]
    assert "pending proposal p1" in answers["status"]
    assert _digest(home) == before  # nothing written, not even a first config or a lock


def test_a_read_only_folder_with_a_live_wal_is_read_whole(state: tuple[Path, dict]) -> None:
    """The owner's process has the store open with rows only in its WAL (not checkpointed):
    a read-only reader sees them (SQLite ``mode=ro`` with the shared-memory file there)."""
    home, env = state
    owner = Store(home / "state" / "skillopt.db")
    try:
        owner.db.execute("PRAGMA wal_autocheckpoint = 0")
        with owner.write():
            nid = owner.nights.add(started_at="2026-01-01T00:00:00+00:00", status="failed")
        assert Path(f"{home}/state/skillopt.db-wal").stat().st_size > 0
        res = _read_only_cli(home, env, "nights", "--json")
        assert res.returncode == 0, res.stderr
        assert nid in [n["id"] for n in json.loads(res.stdout)]
    finally:
        owner.close()


def test_write_commands_fail_with_one_line_naming_the_folder(state: tuple[Path, dict]) -> None:
    home, env = state
    before = _digest(home)
    for args in (
        ("reject", "p1"),
        ("adopt", "p1"),
        ("forget", "--before", "2020-01-01"),
        ("harvest",),
        ("run",),
    ):
        res = _read_only_cli(home, env, *args)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 1, (args, res.stderr)
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, res.stderr)
        assert str(home) in lines[0], (args, lines)
        assert "Traceback" not in res.stderr
    assert _digest(home) == before
    assert (
        json.loads(
            subprocess.run(
                [sys.executable, "-m", "skillopt_sleep", "proposals", "--json"],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            ).stdout
        )[0]["status"]
        == "staged"
    )
