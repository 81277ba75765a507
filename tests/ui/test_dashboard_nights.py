"""Starting a night from the dashboard, in a real headless Chromium against a real
``skillopt-sleep ui`` process whose config names the simulator as backend: the button goes
through the one dispatch policy (no daemon runs: in the ``ui`` process, in the background),
the browser lands on the night's page, which reloads itself while the night runs and shows it
finished with a proposal; the nights page lists it. A second night while one runs is refused
with the reason; a POST without the CSRF field is refused and starts nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import tomlkit

from skillopt_sleep import paths
from skillopt_sleep.demo import demo_settings
from skillopt_sleep.night import lifecycle
from skillopt_sleep.results import NightStatus, Trigger
from skillopt_sleep.service import Service
from skillopt_sleep.simulator import Simulator, serve
from skillopt_sleep.store import Store
from skillopt_sleep.ui.app import csrf_token
from skillopt_sleep.ui.server import token_path
from tests.helpers.night import night_world, write_persona
from tests.helpers.ui import chromium, nav, ui_process

#: slow: the dashboard server as a process, nights run through it
pytestmark = pytest.mark.slow

USER_TEXT = "# Project rules\n\nWritten by hand.\n"


@pytest.fixture
def configured(tmp_path: Path, isolated_home: Path) -> Iterator[tuple[Path, Simulator]]:
    """The demo's sessions and a config file naming the simulator as target and optimizer;
    yields (the trained CLAUDE.md, the running simulator)."""
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    with serve(write_persona(tmp_path)) as sim:
        settings = demo_settings(isolated_home, project, sim.url)
        settings["document"] = {"kind": "path", "path": str(target)}
        config = paths.config_file()
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(tomlkit.dumps(settings), encoding="utf-8")
        yield target, sim


def test_start_a_night_from_the_page_runs_it_and_shows_it_finished(
    configured: tuple[Path, Simulator],
) -> None:
    target, sim = configured
    assert Service().nights(5) == []
    with ui_process() as ui, chromium() as browser:
        page = browser.new_page()
        page.goto(ui.login_url)
        nav(page, "header nav >> text=Nights")
        assert "none" in page.locator("main table").inner_text()
        nav(page, "button:text-is('Start a night')")
        [night] = Service().nights(5)
        assert page.url.startswith(f"{ui.base}/nights/{night.id}?")
        assert page.locator("h1").inner_text() == f"Night #{night.id}"
        flash = page.locator(".flash.ok").inner_text()
        assert f"night #{night.id} started in this dashboard's process" in flash
        assert "no daemon is running" in flash
        assert night.trigger == "ui"
        # the page reloads itself (no script: a meta refresh) until the night has finished
        report = page.locator("#sec-night")
        deadline_ms = 180_000
        report.filter(has_text="succeeded").wait_for(timeout=deadline_ms)
        assert page.locator("meta[http-equiv=refresh]").count() == 0
        done = Service().night(night.id)
        assert done.status == "succeeded" and done.proposal_id
        assert done.proposal_id in report.inner_text()
        assert sim.stats.requests, "the night made no model call"

        nav(page, "header nav >> text=Nights")
        row = page.locator("main table tbody tr", has_text=f"#{night.id}")
        assert row.count() == 1
        assert "succeeded" in row.inner_text() and "ui" in row.inner_text().split()
        assert done.proposal_id in row.inner_text()
        nav(page, f"main table >> text={done.proposal_id}")
        assert page.locator("h1").inner_text() == f"Proposal {done.proposal_id}"
    assert target.read_text() == USER_TEXT  # started and staged, nothing adopted


def test_a_second_night_while_one_runs_is_refused_with_the_reason(
    configured: tuple[Path, Simulator],
) -> None:
    """A night runs in another process (here: this test holds the night lock and wrote its
    running row): a start clicked on a page loaded before is refused on the nights page with
    the reason, the pages then name the running night instead of offering the button, and its
    page reloads itself until the night has finished; no other night is started."""
    with ui_process() as ui, chromium() as browser:
        page = browser.new_page()
        page.goto(ui.login_url)
        assert page.locator("#sec-last-night button:text-is('Start a night')").count() == 1
        nav(page, "header nav >> text=Nights")
        lock = lifecycle.night_lock()
        lock.acquire(timeout=5)
        store = Store(paths.db_path())
        try:
            other = lifecycle.begin(store, Service().settings(), Trigger.CLI)
            nav(page, "button:text-is('Start a night')")  # the page was loaded before
            assert page.url.startswith(f"{ui.base}/nights?")
            failed = page.locator(".flash.bad").inner_text()
            assert failed.startswith(f"no night started: a night is running (night {other}, ")
            for path in ("/nights", "/"):
                page.goto(ui.base + path)
                assert page.locator("button:text-is('Start a night')").count() == 0
                running = page.locator("#night-running")
                assert "A night is running" in running.inner_text()
                assert running.locator(f"a[href='/nights/{other}']").count() == 1
            page.goto(f"{ui.base}/nights/{other}")
            refresh = page.locator("meta[http-equiv=refresh]")
            assert refresh.count() == 1 and refresh.get_attribute("content") == "2"
            with page.expect_navigation(timeout=10_000):  # the browser reloads it by itself
                pass
            lifecycle.finish(store, other, NightStatus.NO_CHANGE)
        finally:
            store.close()
            lock.release()
        page.reload()
        assert "no_change" in page.locator("#sec-night").inner_text()
        assert page.locator("meta[http-equiv=refresh]").count() == 0
        page.goto(ui.base + "/nights")
        assert page.locator("button:text-is('Start a night')").count() == 1
    assert [n.id for n in Service().nights(5)] == [other]


def test_a_start_without_the_csrf_field_or_from_another_origin_is_refused(
    configured: tuple[Path, Simulator],
) -> None:
    with ui_process() as ui:
        token = token_path().read_text().strip()
        start = f"{ui.base}/nights/start"
        cookie = {"Cookie": f"skillopt_ui={token}"}
        origin = {"Origin": ui.base}
        with httpx.Client(follow_redirects=False, trust_env=False) as client:
            assert client.post(start, data={}, headers={**cookie, **origin}).status_code == 403
            bad = {"csrf": "0" * 64}
            assert client.post(start, data=bad, headers={**cookie, **origin}).status_code == 403
            good = {"csrf": csrf_token(token)}
            assert client.post(start, data=good, headers=origin).status_code == 401
            other = {**cookie, "Origin": "http://127.0.0.1:1"}
            assert client.post(start, data=good, headers=other).status_code == 403
            assert client.get(start, headers=cookie).status_code in (404, 405)
    assert Service().nights(5) == []
