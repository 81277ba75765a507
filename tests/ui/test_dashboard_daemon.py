"""The daemon serves the dashboard when the config says ``ui.serve = true``: on 127.0.0.1 at
``ui.port``, with the same per-install token, shown by ``status``; ``skillopt-sleep ui`` then
prints that address with the token instead of starting a second server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from skillopt_sleep.ui.server import token_path
from tests.helpers.daemon import DaemonHarness, db_rows, wait_for
from tests.helpers.net import closed_port
from tests.helpers.ui import chromium, nav

#: slow: the dashboard beside a real daemon process
pytestmark = pytest.mark.slow


@pytest.fixture
def harness(isolated_home: Path, tmp_path: Path) -> Iterator[DaemonHarness]:
    h = DaemonHarness(isolated_home, tmp_path)
    try:
        yield h
    finally:
        h.cleanup()


def test_the_daemon_serves_the_dashboard_when_configured(harness: DaemonHarness) -> None:
    port = closed_port()
    harness.write_demo_sessions()
    harness.write_config(ui={"serve": True, "port": port})
    harness.start()
    base = f"http://127.0.0.1:{port}"
    status = harness.status()
    assert status["ui"] == base + "/"
    assert f"dashboard: {base}/" in harness.cli("status").stdout
    token = token_path().read_text().strip()

    printed = harness.cli("ui").stderr
    assert f"dashboard (served by the daemon): {base}/?token={token}" in printed

    with httpx.Client(trust_env=False) as client:
        assert client.get(base + "/").status_code == 401
    with chromium() as browser:
        page = browser.new_page()
        answer = page.goto(f"{base}/?token={token}")
        assert answer is not None and answer.status == 200
        daemon = page.locator("#sec-daemon").inner_text()
        assert f"running (pid {status['pid']})" in daemon
        assert "schedule" in daemon and "next night" in daemon

    harness.cli("stop", "--timeout", "20")
    with pytest.raises(httpx.ConnectError), httpx.Client(trust_env=False) as client:
        client.get(base + "/")


def test_without_the_setting_the_daemon_serves_no_dashboard(harness: DaemonHarness) -> None:
    harness.write_config()
    harness.start()
    assert harness.status()["ui"] is None
    assert not token_path().exists()


def test_start_a_night_on_the_dashboard_the_daemon_serves_runs_it_in_the_daemon(
    harness: DaemonHarness,
) -> None:
    """The one dispatch policy: the dashboard the daemon serves hands the night to the daemon
    (same config, same settings), whose worker runs it; the page shows it finished."""
    from skillopt_sleep.simulator import serve

    port = closed_port()
    harness.write_demo_sessions()
    with serve("demo") as sim:
        harness.night_config(sim.url, ui={"serve": True, "port": port})
        harness.start()
        base = f"http://127.0.0.1:{port}"
        token = token_path().read_text().strip()
        with chromium() as browser:
            page = browser.new_page()
            page.goto(f"{base}/?token={token}")
            nav(page, "header nav >> text=Nights")
            nav(page, "button:text-is('Start a night')")
            flash = page.locator(".flash.ok").inner_text()
            assert "started in the daemon" in flash and "same config and settings" in flash
            night_id = int(page.url.split("/nights/", 1)[1].split("?", 1)[0])
            assert page.locator("h1").inner_text() == f"Night #{night_id}"
            page.locator("#sec-night").filter(has_text="succeeded").wait_for(timeout=180_000)
        assert db_rows("select id, trigger, status from nights") == [(night_id, "ui", "succeeded")]
        wait_for(
            lambda: bool(harness.status().get("last_daemon_night")), 60, what="the worker's end"
        )
        last = harness.status()["last_daemon_night"]
        assert last["trigger"] == "ui" and last["result"]["night_id"] == night_id
