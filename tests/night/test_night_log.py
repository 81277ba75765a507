"""Each night has its own log (``<state>/nights/<id>/night.log``), written as it runs and
redacted: two nights against the simulator each hold only their own lines, shown by
``skillopt-sleep logs --night N`` and by the dashboard's night page."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from skillopt_sleep import paths
from skillopt_sleep.errors import SkilloptError
from skillopt_sleep.night.log import NightLog, read_night_log
from skillopt_sleep.night.run import run_night
from skillopt_sleep.service import Service
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.ui.app import build_app
from tests.helpers.cli_run import skillopt_in_process
from tests.helpers.net import closed_port
from tests.helpers.night import night_settings, night_world, write_persona

SECRET = "sk-ant-api03-" + "Zq7" * 30  # an Anthropic key's shape, made up here


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return skillopt_in_process(*args, timeout=120)


def test_two_nights_each_log_their_own_lines(tmp_path: Path, isolated_home: Path) -> None:
    project, target = night_world(tmp_path, isolated_home, "# Rules\n")
    persona = write_persona(tmp_path)
    store = Store(paths.db_path())
    try:
        with serve(persona) as sim:
            first = run_night(store, night_settings(isolated_home, project, target, sim.url))
        assert first.status == "succeeded"
        # the second night's backend is gone: it fails after its first steps
        down = f"http://127.0.0.1:{closed_port()}/v1"
        with pytest.raises(SkilloptError):
            run_night(store, night_settings(isolated_home, project, target, down))
        second = store.nights.recent(1)[0]
    finally:
        store.close()
    one, two = first.night_id, int(second.id)
    assert two == one + 1 and second.status == "failed"

    log1, log2 = read_night_log(one), read_night_log(two)
    assert paths.night_log_path(one).is_file() and paths.night_log_path(two).is_file()
    lines1, lines2 = log1.splitlines(), log2.splitlines()
    assert lines1[0].endswith(f"night {one} started (cli)")
    assert lines1[-1].endswith(f"night {one} succeeded: proposal {first.proposal_id}")
    assert any("epoch 1/" in line for line in lines1)
    assert any("harvest: " in line for line in lines1)
    assert lines2[0].endswith(f"night {two} started (cli)")
    assert lines2[-1].split(" ", 1)[1].startswith(f"night {two} failed: ")
    assert second.error in lines2[-1]
    # only its own lines: no line of one night is in the other's log
    assert not any(f"night {two}" in line for line in lines1)
    assert not any(f"night {one}" in line for line in lines2)
    assert not any("epoch 1/" in line or "succeeded" in line for line in lines2)
    assert paths.night_log_path(one).stat().st_mode & 0o077 == 0

    shown = _cli("logs", "--night", str(one))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == log1.strip()
    shown2 = _cli("logs", "--night", str(two))
    assert shown2.returncode == 0 and shown2.stdout.strip() == log2.strip()
    missing = _cli("logs", "--night", "99")
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: no night 99") and len(missing.stderr.splitlines()) == 1

    client = TestClient(
        build_app(Service(), "tok", 8765),
        base_url="http://127.0.0.1:8765",
        headers={"authorization": "Bearer tok"},
    )
    for night, own, other in ((one, log1, two), (two, log2, one)):
        page = client.get(f"/nights/{night}")
        assert page.status_code == 200
        assert own.splitlines()[0] in page.text and own.splitlines()[-1] in page.text
        assert f"night {other} started" not in page.text


def test_a_night_log_is_redacted_before_it_is_written(isolated_home: Path) -> None:
    log = NightLog(7)
    log.line(f"calling the backend with {SECRET}\nand a second line")
    log.close()
    raw = paths.night_log_path(7).read_bytes()
    assert SECRET.encode() not in raw and b"[REDACTED:" in raw
    assert len(raw.decode().splitlines()) == 2
    assert read_night_log(7).endswith("and a second line\n")
    assert read_night_log(8) == ""
