"""The tasks page in a real headless Chromium against a real ``skillopt-sleep ui`` process, on
a store a real night against the simulator produced: every occurrence of every task is listed
with when it was asked, its own split (splits are per occurrence, by time), its agent and
project, and a link to the very message in its session; the page's split summary counts the
tasks and the occurrences as the store holds them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest

from skillopt_sleep import paths
from skillopt_sleep.night.run import run_night
from skillopt_sleep.service import Service
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from tests.helpers.night import night_settings, night_world, write_persona
from tests.helpers.ui import chromium, nav, ui_process

#: slow: a real browser (chromium) drives the tasks page
pytestmark = pytest.mark.slow


@pytest.fixture
def night(tmp_path: Path, isolated_home: Path) -> None:
    project, target = night_world(tmp_path, isolated_home, "# Rules\n")
    store = Store(paths.db_path())
    try:
        with serve(write_persona(tmp_path)) as sim:
            result = run_night(store, night_settings(isolated_home, project, target, sim.url))
    finally:
        store.close()
    assert result.status == "succeeded", result


def _role(task_split: str, occ: dict) -> str:
    if occ["split"]:
        return occ["split"]
    return "withheld" if task_split and occ["note"] else "unscored"


@pytest.mark.usefixtures("night")
def test_the_tasks_page_lists_each_occurrence_with_its_split_agent_and_session() -> None:
    stored = Service().stored_tasks(limit=1000).tasks
    occurrences = [(t, o) for t in stored for o in t.occurrences]
    # the night's store has tasks asked in more than one agent, with several roles each
    assert any(len({o["split"] for o in t.occurrences}) >= 2 for t in stored), stored
    assert any(len({o["session_id"].split(":")[0] for o in t.occurrences}) >= 2 for t in stored)
    with ui_process() as ui, chromium() as browser:
        page = browser.new_page()
        page.goto(ui.login_url)
        nav(page, "header nav >> text=Tasks")
        assert page.locator("h1").inner_text() == "Tasks"
        assert page.locator("#sec-tasks table tbody tr").count() == len(stored)

        by_task = Counter(t.split or "unscored" for t in stored)
        by_occ = Counter(_role(t.split, o) for t, o in occurrences)
        summary = page.locator("#split-summary").inner_text()
        assert summary.startswith(f"{len(stored)} tasks; by task: ")
        for role, n in by_task.items():
            assert f"{role} {n}" in summary.split(";")[1], summary
        assert f"{len(occurrences)} occurrences: " in summary
        for role, n in by_occ.items():
            assert f"{role} {n}" in summary.split(";")[2], summary

        for t in stored:  # each task's row says how its occurrences split
            row = page.locator("#sec-tasks table tbody tr", has=page.locator(f"#task-{t.id}"))
            roles = Counter(_role(t.split, o) for o in t.occurrences)
            cell = row.locator("td").nth(2).inner_text()
            assert cell.startswith(f"{len(t.occurrences)}: ")
            assert all(f"{r} {n}" in cell for r, n in roles.items()), cell

        rows = page.locator("#sec-occurrences table tbody tr")
        assert rows.count() == len(occurrences) > len(stored)
        links = []
        for i, (t, o) in enumerate(occurrences):
            cells = rows.nth(i).locator("td")
            sid = o["session_id"]
            agent = sid.split(":", 1)[0]  # a session id is <source>:<key>
            assert cells.nth(0).inner_text() == t.id
            assert cells.nth(1).inner_text() == o["when"]
            assert cells.nth(2).inner_text() == _role(t.split, o)
            assert cells.nth(4).inner_text() == agent
            assert cells.nth(5).inner_text() == o["project"] == t.project
            assert cells.nth(7).inner_text() == o["prompt"]
            href = cells.nth(3).locator("a").get_attribute("href") or ""
            assert href.startswith(f"/sessions/{quote(sid, safe='')}#m"), href
            links.append((href, o["prompt"], agent))

        # each link leads to the session and to the very message asked there
        for href, prompt, agent in links:
            page.goto(ui.base + href)
            assert page.locator("h1").inner_text().startswith("Session")
            assert agent in page.locator("#sec-session").inner_text()
            asked = page.locator(f"#{href.rsplit('#', 1)[1]} pre").inner_text()
            assert asked == prompt
