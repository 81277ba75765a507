"""A night that stages a proposal says so (issue 15): a desktop notification through
``notify-send`` (here a stand-in executable on PATH that records its arguments), never failing
the night when the tool is missing or fails; ``status`` gives the notice until the proposal is
looked at."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from skillopt_sleep.demo import DEMO_CONVERSATIONS
from skillopt_sleep.simulator import serve
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.cli_run import sim_config
from tests.helpers.cli_run import skillopt_in_process as skillopt


@pytest.fixture
def world(tmp_path, isolated_home):
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS)
    return isolated_home, project


def _bin(tmp_path: Path, notifier: str | None) -> dict[str, str]:
    """An environment whose PATH holds this Python's scripts and a folder with ``notifier``
    as ``notify-send`` (none when None): no other notify-send can be found."""
    fake = tmp_path / "bin"
    fake.mkdir(parents=True)
    if notifier is not None:
        exe = fake / "notify-send"
        exe.write_text(notifier, encoding="utf-8")
        exe.chmod(0o755)
    scripts = Path(sys.executable).parent
    path = os.pathsep.join([str(fake), str(scripts), "/nonexistent"])
    return dict(os.environ, PATH=path)


def _night(world, tmp_path: Path, env: dict[str, str], extra: str = "") -> dict:
    home, project = world
    with serve("demo") as sim:
        cfg = sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1", extra)
        res = skillopt("--config", str(cfg), "run", "--json", env=env)
    assert res.returncode == 0, res.stderr
    night = json.loads(res.stdout)
    assert night["status"] == "succeeded" and night["proposal_id"]
    return night


RECORDER = f"""#!{sys.executable}
import json, os, sys
with open(os.path.join(os.path.dirname(__file__), "calls.jsonl"), "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
"""


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS notifies with osascript")
def test_a_staged_proposal_notifies_and_status_says_so_until_it_is_seen(world, tmp_path):
    env = _bin(tmp_path, RECORDER)
    night = _night(world, tmp_path, env)
    pid = night["proposal_id"]
    calls = [
        json.loads(line) for line in (tmp_path / "bin" / "calls.jsonl").read_text().splitlines()
    ]
    assert len(calls) == 1, calls
    [argv] = calls
    assert argv[0] == "--app-name=skillopt-sleep"
    title, body = argv[1:]
    # it names the document and the project it is for
    _home, project = world
    assert title == f"skillopt-sleep: proposal {pid} for webapp is ready"
    assert body.startswith(f"AGENTS.md of webapp ({project}): val ")
    assert f"skillopt-sleep show {pid}" in body
    assert night["summary"]["notified"] == "sent with notify-send"
    # status: the notice, until someone looks at the proposal
    st = json.loads(skillopt("status", "--json", env=env).stdout)
    assert (
        st["notice"] and f"{pid} for" in st["notice"] and "ready, not yet reviewed" in st["notice"]
    )
    human = skillopt("status", env=env).stdout
    assert "notice: a proposal is ready" in human or "proposals are ready" in human
    assert skillopt("show", pid, env=env).returncode == 0
    st = json.loads(skillopt("status", "--json", env=env).stdout)
    assert {p["id"]: p["seen"] for p in st["pending_proposals"]}[pid] is True
    assert st["notice"] is None or f"{pid} for" not in st["notice"]


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS notifies with osascript")
def test_a_failing_notifier_never_fails_the_night(world, tmp_path):
    failing = "#!/bin/sh\necho 'Cannot autolaunch D-Bus without X11 $DISPLAY' >&2\nexit 1\n"
    night = _night(world, tmp_path, _bin(tmp_path, failing))
    assert night["summary"]["notified"] == (
        "not sent: notify-send exited 1: Cannot autolaunch D-Bus without X11 $DISPLAY"
    )


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS notifies with osascript")
def test_a_missing_notifier_is_recorded(world, tmp_path):
    night = _night(world, tmp_path, _bin(tmp_path, None))
    assert night["summary"]["notified"] == "not sent: notify-send is not on PATH"
    # the night's stored summary keeps it
    st = json.loads(skillopt("status", "--json", env=_bin(tmp_path / "x", None)).stdout)
    assert st["last_night"]["summary"]["notified"] == "not sent: notify-send is not on PATH"


def test_notify_desktop_false_sends_nothing(world, tmp_path):
    env = _bin(tmp_path, RECORDER)
    night = _night(world, tmp_path, env, extra="[notify]\ndesktop = false\n")
    assert night["summary"]["notified"] == "off (notify.desktop = false)"
    assert not (tmp_path / "bin" / "calls.jsonl").exists()
    assert shutil.which("notify-send", path=env["PATH"])  # it was there to be called


def test_the_notification_names_the_document_and_its_project():
    """A project's own file, a shared memory file's block for a project, no project."""
    from skillopt_sleep.night.notify import message

    title, body = message("p2", "/src/webapp/AGENTS.md", 0.5, 1.0, "/src/webapp")
    assert title == "skillopt-sleep: proposal p2 for webapp is ready"
    assert (
        body == "AGENTS.md of webapp (/src/webapp): val 0.50 → 1.00. Review: skillopt-sleep show p2"
    )
    title, body = message("p3", "/home/u/.claude/CLAUDE.md", None, 1.0, "/src/api/")
    assert title == "skillopt-sleep: proposal p3 for api is ready"
    assert body.startswith("CLAUDE.md in /home/u/.claude, the block for api: val — → 1.00.")
    title, body = message("p4", "/src/webapp/AGENTS.md", 0.0, 1.0)
    assert title == "skillopt-sleep: proposal p4 is ready"
    assert body.startswith("AGENTS.md in /src/webapp: val 0.00 → 1.00.")
