"""The state folder is the user's alone whatever command runs first (each case a fresh state
folder, the command run as a user would under a permissive 022 umask), and the login service
runs under ``UMask=0077``."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.install import units
from tests.helpers.sources import cc_user, write


def _open_modes(root: Path) -> list[str]:
    """Every folder or file under ``root`` (itself included) that others may read or enter."""
    found = []
    for here, _dirs, files in os.walk(root):
        for p in [Path(here)] + [Path(here) / f for f in files]:
            mode = stat.S_IMODE(os.lstat(p).st_mode)
            if mode & 0o077:
                found.append(f"{p.relative_to(root.parent)} {oct(mode)}")
    return found


@pytest.mark.parametrize(
    "first",
    [["sources"], ["harvest"], ["status"], ["proposals"], ["tasks"], ["sources", "--json"]],
    ids=lambda a: " ".join(a),
)
def test_a_new_store_is_private_after_any_first_command(
    first: list[str], isolated_home: Path, tmp_path: Path
) -> None:
    write(isolated_home / ".claude" / "projects" / "-p" / "s1.jsonl", [cc_user("u1", "hello")])
    state = tmp_path / "skillopt-home"
    assert not state.exists()
    env = dict(os.environ, HOME=str(isolated_home), SKILLOPT_SLEEP_HOME=str(state))
    for args in (first, ["harvest"], ["status"]):  # then the commands that write most
        proc = subprocess.run(
            [sys.executable, "-m", "skillopt_sleep", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            preexec_fn=lambda: os.umask(0o022),  # the usual, permissive user umask
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert state.is_dir() and (state / "state" / "skillopt.db").is_file()
    assert _open_modes(state) == []


def test_the_user_umask_is_kept_for_the_users_own_files(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        paths.make_private()
        assert paths.user_umask() == 0o022
        own = tmp_path / "own"
        own.mkdir()
        assert stat.S_IMODE(own.stat().st_mode) == 0o700
        users = tmp_path / "project" / ".claude" / "skills" / "x"
        paths.make_user_dirs(users)
        assert stat.S_IMODE(users.stat().st_mode) == 0o755
        assert stat.S_IMODE(users.parent.parent.stat().st_mode) == 0o755
    finally:
        os.umask(old)
        paths._USER_UMASK = None


def test_the_service_units_set_a_private_umask() -> None:
    argv = ["/usr/bin/skillopt-sleep"]
    assert "\nUMask=0077\n" in units.render_systemd(argv)
    plist = units.render_launchd(argv)
    assert "<key>Umask</key>\n    <integer>63</integer>" in plist  # 63 == 0o077


def test_what_adopt_rollback_and_install_keep_in_the_state_folder_is_private(
    tmp_path: Path,
) -> None:
    """Adopt's records (``adoption.json``, the killed-adopt marker), rollback's backups and
    install's originals and manifest are the user's alone under a permissive 022 umask; the
    live files adopt writes keep the user's umask (0644)."""
    demo = tmp_path / "demo"

    def run(*args: str) -> None:
        env = dict(
            os.environ, HOME=str(demo / "home"), SKILLOPT_SLEEP_HOME=str(demo / "skillopt-home")
        )
        proc = subprocess.run(
            [sys.executable, "-m", "skillopt_sleep", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
            preexec_fn=lambda: os.umask(0o022),
        )
        assert proc.returncode == 0, (args, proc.stderr[-2000:])

    run("demo", "--keep", str(demo))
    settings = demo / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text("{}\n")  # install keeps the original of a file it edits
    run("adopt", "p1", "--all-agents")
    live = demo / "home" / ".claude" / "CLAUDE.md"
    assert stat.S_IMODE(live.stat().st_mode) == 0o644
    run("install", "claude-code")
    run("rollback", "p1")
    state = demo / "skillopt-home"
    kept = {p.name for p in state.rglob("*")}
    assert {"adoption.json", "manifest.json"} <= kept, sorted(kept)
    assert any(p.parent.name == "originals" for p in state.rglob("*")), sorted(kept)
    assert _open_modes(state) == []
