"""The proposal page leads with its rules in plain words (issue 26), in a real headless
Chromium against a real ``skillopt-sleep ui`` process: a rule refused on its own keeps the
others adoptable, and adopting the checked rules writes only those."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.delivery.document import Document
from skillopt_sleep.night.run import run_night
from skillopt_sleep.service import Service
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from tests.helpers.night import night_settings, night_world, write_persona
from tests.helpers.scope import COMMITS, INSTALLS, PERSONA
from tests.helpers.ui import chromium, nav, ui_process

pytestmark = pytest.mark.slow

COMMIT_RULE = "When writing a commit message: keep answers under 50 characters."
PNPM_RULE = "When installing dependencies or adding packages: use `pnpm` instead of `npm`."


def test_rules_are_refused_one_by_one_and_the_checked_ones_adopted(
    tmp_path: Path, isolated_home: Path
) -> None:
    project, target = night_world(tmp_path, isolated_home, "# mine\n", COMMITS + INSTALLS)
    store = Store(paths.db_path())
    try:
        with serve(write_persona(tmp_path, PERSONA)) as sim:
            night = run_night(store, night_settings(isolated_home, project, target, sim.url))
    finally:
        store.close()
    pid = night.proposal_id
    assert night.status == "succeeded" and pid
    rules = {r.rule: r.n for r in Service().proposal(pid).rules}
    assert set(rules) == {COMMIT_RULE, PNPM_RULE}
    with ui_process() as ui, chromium() as browser:
        page = browser.new_page()
        page.goto(ui.login_url)
        page.goto(f"{ui.base}/proposals/{pid}")
        # the rules come first, in plain words, before the report and the diff
        headings = page.locator("main h2").all_inner_texts()
        assert headings[0] == "Rules" and headings.index("Diff") > 0, headings
        listed = page.locator("#sec-rules").inner_text()
        assert COMMIT_RULE in listed and PNPM_RULE in listed
        assert "where you said" in listed and "keep the commit message under 50" in listed

        n = rules[COMMIT_RULE]
        item = page.locator(f"#rule-{n}")
        item.locator("input[name=reason]").fill("too terse")
        nav(page, f"#rule-{n} >> button:text-is('Refuse this rule')")
        assert f"refused rule {n}" in page.locator(".flash.ok").inner_text()
        assert "too terse" in page.locator(f"#rule-{n}").inner_text()
        assert page.locator(f"#rule-{n} input[type=checkbox]").count() == 0

        nav(page, "button:text-is('Adopt the checked rules')")
        flash = page.locator(".flash.ok").inner_text()
        assert f"adopted {pid}" in flash and COMMIT_RULE in flash
    assert Document.parse(target.read_text("utf-8")).rules == [PNPM_RULE]
    detail = Service().proposal(pid)
    assert {r.rule: r.status for r in detail.rules} == {
        COMMIT_RULE: "refused",
        PNPM_RULE: "adopted",
    }
