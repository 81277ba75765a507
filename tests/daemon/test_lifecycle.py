"""start / stop / status / service against real detached daemon processes."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import psutil
import pytest

from skillopt_sleep import daemon_client
from skillopt_sleep.daemon import process
from skillopt_sleep.install import units
from skillopt_sleep.results import Trigger
from skillopt_sleep.service import Service
from tests.helpers.daemon import DaemonHarness, GatedProxy, db_rows, wait_for

#: slow: each test starts and stops a real daemon process
pytestmark = pytest.mark.slow


def test_start_twice_status_stop(harness: DaemonHarness) -> None:
    harness.write_config()
    pid = harness.start()
    assert process.running_pid() == pid
    again = harness.cli("start")
    assert again.returncode == 0 and f"already running (pid {pid})" in again.stdout
    fg = harness.cli("start", "--foreground")
    assert fg.returncode == 0 and f"already running (pid {pid})" in fg.stdout

    sock = daemon_client.socket_path()
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    st = harness.cli("status").stdout
    assert f"daemon: running (pid {pid})" in st
    assert "claude_code:" in st and "next night:" in st
    live = daemon_client.daemon_status().model_dump()
    assert live["running"] and live["pid"] == pid and live["uptime_seconds"] >= 0
    assert {w["source"] for w in live["watched"]} == {"claude_code", "codex"}

    out = harness.cli("stop").stdout
    assert f"stopped (pid {pid}" in out
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert process.running_pid() is None
    assert not sock.exists()
    assert "not running" in harness.cli("stop").stdout
    assert "daemon: not running" in harness.cli("status").stdout


def test_start_with_another_config_is_refused_and_a_changed_config_shows_in_status(
    harness: DaemonHarness, tmp_path
) -> None:
    path = harness.write_config()
    pid = harness.start()
    other = tmp_path / "other.toml"
    other.write_text(path.read_text())
    refused = harness.cli("--config", str(other), "start", check=False)
    assert refused.returncode == 1
    assert f"already running (pid {pid}) with config {path}" in refused.stderr
    assert f"to start it with {other}" in refused.stderr
    assert harness.cli("start").returncode == 0  # the same (default) config: fine
    assert daemon_client.daemon_status().model_dump()["config_changed"] is False
    assert "changed since the daemon started" not in harness.cli("status").stdout

    original = path.read_bytes()
    harness.write_config(debounce_seconds=0.5)  # the user edits the file under the daemon
    assert daemon_client.daemon_status().model_dump()["config_changed"] is True
    st = harness.cli("status").stdout
    assert f"config {path} changed since the daemon started: nights use it" in st
    path.write_text(path.read_text() + "\n[broken\n")  # a typo: the next night would fail
    broken = harness.cli("status", check=False)
    assert broken.returncode == 1 and broken.stderr.startswith(f"error: config file {path}")
    assert f"config {path} changed since the daemon started and no longer loads" in broken.stdout
    path.write_bytes(original)  # the edit undone, byte for byte (a newer mtime): no change
    assert daemon_client.daemon_status().model_dump()["config_changed"] is False
    assert "changed since the daemon started" not in harness.cli("status").stdout


def test_stale_pidfile_after_kill9_does_not_block_start(harness: DaemonHarness) -> None:
    harness.write_config()
    pid = harness.start()
    harness.kill9(pid)
    assert process.read_pidfile()["pid"] == pid  # stale file left behind
    assert process.running_pid() is None
    pid2 = harness.start()
    assert pid2 != pid and process.running_pid() == pid2


def test_start_reports_config_error(harness: DaemonHarness) -> None:
    path = harness.write_config()
    path.write_text(path.read_text() + "\nbogus_key = 1\n")
    proc = harness.cli("start", check=False)
    assert proc.returncode == 1
    assert "bogus_key" in proc.stderr
    assert process.running_pid() is None


def test_stop_interrupts_night_and_kills_children(
    harness: DaemonHarness, sim_proxy: GatedProxy
) -> None:
    harness.write_demo_sessions()
    live = harness.write_live_skill()
    harness.night_config(sim_proxy.url)
    pid = harness.start()
    reply = Service().run_night(wait=False, trigger=Trigger.CLI)
    assert reply.via == "daemon" and reply.night_id is not None
    worker = daemon_client.daemon_status().night.pid
    wait_for(lambda: sim_proxy.seen > 0, 30, what="the night to call the model")
    assert worker in [c.pid for c in psutil.Process(pid).children(recursive=True)]
    out = harness.cli("stop").stdout
    assert f"stopped (pid {pid}" in out
    assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == psutil.STATUS_ZOMBIE
    rows = db_rows("select status, trigger from nights")
    assert rows == [("interrupted", "cli")]
    assert harness.skill.read_bytes() == live


def test_service_install_writes_systemd_unit(harness: DaemonHarness) -> None:
    if units.platform_kind() != "systemd":
        pytest.skip("Linux only")
    codex_home = harness.home / "codex-elsewhere"
    harness.env.update(
        CODEX_HOME=str(codex_home), SKILLOPT_SLEEP_TARGET__API_KEY="sk-never-in-a-unit"
    )
    proc = harness.cli("service", "install")
    path = units.unit_path("systemd")
    assert str(path) in proc.stdout and path.is_relative_to(harness.home)
    text = path.read_text()
    # the daemon watches the agents' folders the shell that installed it points at ...
    assert f"Environment=CODEX_HOME={codex_home}" in text
    # ... and no key lands in a unit file
    assert "sk-never-in-a-unit" not in text and "API_KEY" not in text
    assert "[Service]" in text and "[Install]" in text and "WantedBy=default.target" in text
    exec_line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    assert exec_line.endswith(" start --foreground")
    assert "KillMode=mixed" in text and "Restart=on-failure" in text
    if shutil.which("systemd-analyze"):
        v = subprocess.run(
            ["systemd-analyze", "verify", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            env=harness.env,
        )
        assert v.returncode == 0, v.stdout + v.stderr
    out = harness.cli("service", "uninstall").stdout
    assert "removed systemd service" in out and not path.exists()
    assert "no service installed" in harness.cli("service", "uninstall").stdout


def test_service_install_now_fails_when_the_manager_refuses_and_uninstall_removes_links(
    harness: DaemonHarness, tmp_path
) -> None:
    """`service install --now` exits 1 with systemctl's own reason when it refuses (here: the
    real systemctl with no user bus to reach; a missing systemctl refuses the same way), and
    `service uninstall` (without --now) removes the link `systemctl --user enable` made."""
    if units.platform_kind() != "systemd":
        pytest.skip("Linux only")
    runtime = tmp_path / "no-bus"
    runtime.mkdir(mode=0o700)
    harness.env.update(
        XDG_RUNTIME_DIR=str(runtime), DBUS_SESSION_BUS_ADDRESS=f"unix:path={runtime}/bus"
    )
    proc = harness.cli("service", "install", "--now", check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: `systemctl --user daemon-reload` ")
    assert " exited 1: " in line or " failed (" in line
    path = units.unit_path("systemd")
    assert path.exists() and "enable it with: systemctl --user" in line
    # what `systemctl --user enable` leaves: a link in default.target.wants
    wants = path.parent / "default.target.wants"
    wants.mkdir()
    (wants / units.UNIT_NAME).symlink_to(path)
    out = harness.cli("service", "uninstall").stdout
    assert "removed systemd service" in out and f"removed link: {wants / units.UNIT_NAME}" in out
    assert not path.exists() and not (wants / units.UNIT_NAME).is_symlink()
    assert list(wants.iterdir()) == []


def test_integration_files_match_templates() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "integrations"
    for kind, rel in units.INTEGRATION_FILES.items():
        text = (root / rel).read_text(units.ENCODING[kind])
        assert text == units.RENDER[kind](units.INTEGRATION_ARGV[kind]), rel
        assert "start --foreground" in text or "<string>--foreground</string>" in text


def test_service_unit_carries_the_state_folder_and_path(monkeypatch, tmp_path):
    import shutil
    import subprocess

    from skillopt_sleep.install import units

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PATH", f"{tmp_path}/node bin:/usr/bin:/bin")
    res = units.install("systemd")
    text = res.path.read_text()
    assert f'Environment="PATH={tmp_path}/node bin:/usr/bin:/bin"\n' in text
    assert f"Environment=SKILLOPT_SLEEP_HOME={tmp_path}/skillopt-home\n" in text
    if shutil.which("systemd-analyze", path="/usr/bin:/bin"):
        proc = subprocess.run(
            ["/usr/bin/systemd-analyze", "verify", "--user", str(res.path)],
            capture_output=True,
            text=True,
        )
        assert "Environment" not in proc.stderr, proc.stderr
    plist = units.render_launchd(["/x"], {"PATH": "/a"})
    assert "<key>EnvironmentVariables</key>\n    <dict>\n        <key>PATH</key>" in plist


def test_systemd_unit_escapes_specifiers_and_variables() -> None:
    """systemd.unit(5): `%` starts a specifier (`%%` is a literal one); systemd.service(5):
    `$` in ExecStart= expands a variable (`$$` is a literal one). Paths holding either must
    reach the daemon as written."""
    text = units.render_systemd(
        ["/opt/my tools/skillopt-sleep", "--config", "/home/u/50%off/$cfg.toml"],
        {"SKILLOPT_SLEEP_HOME": "/home/u/state 100%"},
    )
    exec_line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    assert exec_line == (
        'ExecStart="/opt/my tools/skillopt-sleep" --config "/home/u/50%%off/$$cfg.toml" '
        "start --foreground"
    )
    assert 'Environment="SKILLOPT_SLEEP_HOME=/home/u/state 100%%"' in text
