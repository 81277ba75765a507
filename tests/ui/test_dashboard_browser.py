"""The dashboard in a real headless Chromium against a real ``skillopt-sleep ui`` process, on
a store holding a real night against the simulator: every page renders, the score-history
charts carry the night's own numbers, adopt and rollback through the page change the live file
byte for byte, reject keeps the reason, and nothing reaches the server without the token, from
another origin or without the page's CSRF field."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from skillopt_sleep import paths
from skillopt_sleep.night.run import run_night
from skillopt_sleep.results import NightResult
from skillopt_sleep.service import Service
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.ui.app import csrf_token
from skillopt_sleep.ui.server import token_path
from tests.helpers.night import night_settings, night_world, write_persona
from tests.helpers.ui import chart_points, chromium, nav, ui_process

#: slow: a real browser (chromium) drives the dashboard
pytestmark = pytest.mark.slow

USER_TEXT = b"# Project rules\r\n\r\nWritten by hand, no final newline."


@dataclass
class World:
    project: Path
    target: Path
    night: NightResult


@pytest.fixture
def world(tmp_path: Path, isolated_home: Path) -> Iterator[World]:
    """One real night against the simulator; its proposal staged for ``CLAUDE.md``."""
    project, target = night_world(tmp_path, isolated_home, USER_TEXT)
    persona = write_persona(tmp_path)
    store = Store(paths.db_path())
    try:
        with serve(persona) as sim:
            result = run_night(store, night_settings(isolated_home, project, target, sim.url))
    finally:
        store.close()
    assert result.status == "succeeded" and result.proposal_id
    yield World(project, target, result)


def test_every_page_renders_and_the_charts_carry_the_nights_numbers(world: World) -> None:
    night = world.night
    with ui_process() as ui, chromium() as browser:
        page = browser.new_page()
        first = page.goto(ui.login_url)
        assert first is not None and first.status == 200
        assert page.url == ui.base + "/"  # the token left the address bar for a cookie
        # a cookie that outlives the browser session (Max-Age), still HttpOnly and Strict
        [cookie] = [c for c in page.context.cookies() if c["name"] == "skillopt_ui"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict", cookie
        assert cookie["expires"] > time.time() + 7 * 86400, cookie  # -1: a session cookie
        assert page.locator("h1").inner_text() == "Overview"
        harvest = page.locator("#sec-agents-and-harvest").inner_text()
        assert "claude_code" in harvest and "codex" in harvest
        assert night.proposal_id in page.locator("#sec-staged-proposals").inner_text()

        for label, title in [
            ("Score history", "Score history"),
            ("Proposals", "Proposals"),
            ("Tasks", "Tasks"),
            ("Search", "Search"),
            ("Nights", "Nights"),
            ("Overview", "Overview"),
        ]:
            nav(page, f"header nav >> text={label}")
            assert page.locator("h1").inner_text() == title
            assert page.locator(".flash.bad").count() == 0

        nav(page, "header nav >> text=Score history")
        x = f"#{night.night_id}"
        doc = page.locator("figure.chart[id$='-val']")
        assert doc.count() == 1
        val = chart_points(page, doc.get_attribute("id") or "")
        expected = {("val before", x): night.val_before, ("val after", x): night.val_after}
        assert val == {k: v for k, v in expected.items() if v is not None}
        test_id = (doc.get_attribute("id") or "").removesuffix("-val") + "-test"
        tests = chart_points(page, test_id)
        expected = {("test before", x): night.test_before, ("test after", x): night.test_after}
        assert tests == {k: v for k, v in expected.items() if v is not None}
        # every axis label lies inside its chart's svg (none clipped at an edge)
        texts = page.locator("svg.chart text").count()
        outside = page.eval_on_selector_all(
            "svg.chart",
            """svgs => svgs.flatMap(svg => {
                const b = svg.getBoundingClientRect();
                return [...svg.querySelectorAll('text')].filter(t => {
                    const r = t.getBoundingClientRect();
                    return r.left < b.left - 0.5 || r.right > b.right + 0.5
                        || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5;
                }).map(t => svg.closest('figure').id + ': ' + t.textContent);
            })""",
        )
        assert texts > 0 and outside == [], outside
        # on a narrow window too, each chart scaled down whole inside its figure and the page
        page.set_viewport_size({"width": 420, "height": 800})
        cut = page.eval_on_selector_all(
            "svg.chart",
            """svgs => svgs.filter(svg => {
                const b = svg.getBoundingClientRect();
                const f = svg.closest('figure').getBoundingClientRect();
                return b.left < f.left - 0.5 || b.right > f.right + 0.5 || b.right > 420.5;
            }).map(svg => svg.closest('figure').id)""",
        )
        assert cut == [], cut
        page.set_viewport_size({"width": 1280, "height": 800})
        calls = chart_points(page, "calls")
        assert calls[("calls", x)] == night.cost.calls and night.cost.calls
        tokens = chart_points(page, "tokens")
        assert tokens.get(("input", x)) == night.cost.input_tokens

        nav(page, "header nav >> text=Tasks")
        stored = Service().stored_tasks(limit=1000)
        assert page.locator("#sec-tasks table tbody tr").count() == stored.total > 0
        assert {t.split for t in stored.tasks} <= set(
            page.locator("#sec-tasks table").inner_text().split()
        )
        # the checks read as text, never as Python dicts
        listed = page.locator("#sec-tasks table").inner_text()
        assert "{" not in listed and "'negative'" not in listed, listed
        assert "fails the corrected answer: pass" in listed, listed

        nav(page, "header nav >> text=Search")
        page.fill("input[name=q]", "pnpm")
        nav(page, "button:text('Search')")
        assert "mark" in page.content() and "matches" in page.locator("main").inner_text()
        page.locator("main table a").first.click()
        assert page.locator("h1").inner_text().startswith("Session")
        anchor = page.url.rsplit("#", 1)[1]  # the link points at the matching message
        assert "pnpm" in page.locator(f"#{anchor} pre").inner_text().lower()

        nav(page, "header nav >> text=Nights")
        nav(page, f"main table >> text=#{night.night_id}")
        assert page.locator("h1").inner_text() == f"Night #{night.night_id}"
        assert "succeeded" in page.locator("main").inner_text()
        log = page.locator("#night-log").inner_text()  # the night's own log
        assert f"night {night.night_id} started" in log
        assert f"night {night.night_id} succeeded: proposal {night.proposal_id}" in log


def test_a_dry_run_is_listed_as_d1_and_its_page_opens(world: World, isolated_home: Path) -> None:
    """A dry run takes no night number: the nights page lists it as #d1 beside the real night
    #1, and its link opens its page (a negative id in the store)."""
    store = Store(paths.db_path())
    try:
        # a dry run makes no model call: no simulator needed
        settings = night_settings(isolated_home, world.project, world.target, "http://127.0.0.1:9")
        dry = run_night(store, settings, dry_run=True)
    finally:
        store.close()
    assert dry.night_id == -1 and world.night.night_id == 1
    with ui_process() as ui, chromium() as browser:
        page = browser.new_page()
        page.goto(ui.login_url)
        nav(page, "header nav >> text=Nights")
        listed = page.locator("main table").first.inner_text()
        assert "#d1" in listed and "#1" in listed, listed
        nav(page, "main table >> text=#d1")
        assert page.url.endswith("/nights/d1")
        assert page.locator("h1").inner_text() == "Night #d1"
        assert "planned" in page.locator("main").inner_text()


def test_adopt_through_the_page_changes_the_live_file_and_rollback_restores_it(
    world: World,
) -> None:
    pid = world.night.proposal_id
    assert pid
    staged = (paths.proposals_dir() / pid / "document").read_bytes()
    assert world.target.read_bytes() == USER_TEXT != staged
    with ui_process() as ui, chromium() as browser:
        page = browser.new_page()
        page.goto(ui.login_url)
        nav(page, "header nav >> text=Proposals")
        nav(page, f"main table >> text={pid}")
        assert page.locator("h1").inner_text() == f"Proposal {pid}"
        added = page.locator("table.diff td.add").all_inner_texts()
        assert any("pnpm" in line for line in added)
        verdicts = page.locator("#sec-edits-and-the-gate-s-verdicts").inner_text()
        assert "applied" in verdicts

        nav(page, "button:text-is('Adopt')")
        assert f"adopted {pid}" in page.locator(".flash.ok").inner_text()
        assert world.target.read_bytes() == staged
        assert "adopted" in page.locator("#sec-report").inner_text()

        nav(page, "header nav >> text=Score history")
        wild = {w.proposal_id: w for w in Service().in_the_wild()}
        assert pid in wild
        bars = chart_points(page, "wild")
        expected = {
            ("before adopt", pid): wild[pid].before_pass_rate,
            ("since adopt", pid): wild[pid].pass_rate,
        }
        assert bars == {k: v for k, v in expected.items() if v is not None}

        page.goto(f"{ui.base}/proposals/{pid}")
        nav(page, "button:text-is('Roll back')")
        assert f"rolled back {pid}" in page.locator(".flash.ok").inner_text()
        assert world.target.read_bytes() == USER_TEXT


def test_reject_through_the_page_keeps_the_reason(world: World) -> None:
    pid = world.night.proposal_id
    assert pid
    with ui_process() as ui, chromium() as browser:
        page = browser.new_page()
        page.goto(f"{ui.login_url}")
        page.goto(f"{ui.base}/proposals/{pid}")
        page.fill("input[name=reason]", "we <b>moved</b> to yarn")
        nav(page, "button:text-is('Reject')")
        assert "rejected" in page.locator(".flash.ok").inner_text()
        assert page.locator(".flash.ok b").count() == 0  # escaped, not markup
    detail = Service().proposal(pid)
    assert detail.status == "rejected" and detail.reason == "we <b>moved</b> to yarn"
    assert world.target.read_bytes() == USER_TEXT


class _Evil(http.server.BaseHTTPRequestHandler):
    """Another local web page (another port: the same *site* for cookies) that posts the adopt
    form to the dashboard, with the right CSRF value even."""

    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def test_requests_without_the_token_from_another_origin_or_without_csrf_are_refused(
    world: World,
) -> None:
    pid = world.night.proposal_id
    assert pid
    with ui_process() as ui:
        token = token_path().read_text().strip()  # the per-install token, private to the user
        assert ui.login_url.endswith("?token=" + token)
        assert token_path().stat().st_mode & 0o777 == 0o600
        csrf = csrf_token(token)
        adopt = f"{ui.base}/proposals/{pid}/adopt"
        host = ui.base.removeprefix("http://")
        with httpx.Client(follow_redirects=False, trust_env=False) as client:
            assert client.get(ui.base + "/").status_code == 401
            assert client.get(ui.base + "/proposals").status_code == 401
            assert client.get(ui.base + "/static/style.css").status_code == 401
            assert client.get(ui.base + "/?token=not-the-token").status_code == 401
            cookie = {"Cookie": f"skillopt_ui={token}"}
            ok = client.get(ui.base + "/", headers=cookie)
            assert ok.status_code == 200
            assert not [h for h in ok.headers if h.lower().startswith("access-control-")]
            assert "frame-ancestors 'none'" in ok.headers["content-security-policy"]
            # DNS rebinding: the right token, another Host
            evil_host = {**cookie, "Host": f"attacker.example:{host.split(':')[1]}"}
            assert client.get(ui.base + "/", headers=evil_host).status_code == 403
            # writes: POST only, with the token, this origin and the CSRF field
            form = {"csrf": csrf}
            origin = {"Origin": ui.base}
            assert client.get(adopt, headers=cookie).status_code in (404, 405)  # POST only
            assert client.post(adopt, data=form, headers=origin).status_code == 401
            assert client.post(adopt, data=form, headers=cookie).status_code == 403
            other = {**cookie, "Origin": "http://127.0.0.1:1"}
            assert client.post(adopt, data=form, headers=other).status_code == 403
            wrong = {"csrf": "0" * 64}
            assert client.post(adopt, data=wrong, headers={**cookie, **origin}).status_code == 403
            assert client.post(adopt, data={}, headers={**cookie, **origin}).status_code == 403
            pre = client.options(adopt, headers={**origin, "Access-Control-Request-Method": "POST"})
            assert pre.status_code in (401, 405)
            assert not [h for h in pre.headers if h.lower().startswith("access-control-")]
        assert world.target.read_bytes() == USER_TEXT  # nothing was adopted

        _Evil.body = (
            f'<form method="post" action="{adopt}"><input type="hidden" name="csrf" '
            f'value="{csrf}"><button id="go">win a prize</button></form>'
        ).encode()
        evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Evil)
        threading.Thread(target=evil.serve_forever, daemon=True).start()
        try:
            with chromium() as browser:
                anonymous = browser.new_context().new_page()
                refused = anonymous.goto(ui.base + "/")
                assert refused is not None and refused.status == 401
                assert "no valid token" in anonymous.locator("main").inner_text()

                page = browser.new_context().new_page()
                page.goto(ui.login_url)  # the user is logged in (the cookie is set) …
                page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
                with page.expect_response(adopt) as answer:
                    page.click("#go")  # … and another local page posts to the dashboard
                assert answer.value.status == 403
        finally:
            evil.shutdown()
            evil.server_close()
    assert world.target.read_bytes() == USER_TEXT
    assert Service().proposal(pid).status == "staged"


def test_bad_requests_are_one_line_errors_and_need_the_token_too() -> None:
    """No night needed: an empty store. Unknown proposals, nights, sessions and pages are one
    line on an error page (never a traceback); an unknown page without the token is 401."""
    with ui_process() as ui:
        token = token_path().read_text().strip()
        with httpx.Client(trust_env=False, headers={"Cookie": f"skillopt_ui={token}"}) as client:
            for path, code, words in [
                ("/proposals/p42", 400, "p42"),
                ("/nights/42", 400, "no night 42"),
                ("/nights/d7", 400, "no night d7"),
                ("/nights/-3", 400, "no night d3"),
                ("/sessions/claude_code:nope", 400, "no session"),
                ("/no/such/page", 404, "no page /no/such/page"),
            ]:
                answer = client.get(ui.base + path)
                assert answer.status_code == code, path
                assert words in answer.text and "Traceback" not in answer.text
            for query in ['"unbalanced', "a OR", "NEAR(", "*"]:
                answer = client.get(ui.base + "/search", params={"q": query})
                assert answer.status_code in (200, 400) and "Traceback" not in answer.text
                assert "internal error" not in answer.text
            for page_path in ["/", "/history", "/proposals", "/tasks", "/nights", "/search"]:
                assert client.get(ui.base + page_path).status_code == 200, page_path
        with httpx.Client(trust_env=False) as anonymous:
            assert anonymous.get(ui.base + "/no/such/page").status_code == 401


def test_the_copies_for_other_agents_are_shown_adopted_and_rolled_back_together(
    tmp_path: Path, isolated_home: Path
) -> None:
    """A night that trains Claude Code's memory file stages a copy of its rules for Codex
    (``p<n>-codex``): the proposal page lists it, and the page's "Adopt with the copies" button
    writes both live files; "Roll back" restores the proposal's own file and says the copy
    stays adopted (the same service call and outcome as ``skillopt-sleep rollback ID``), and
    "Roll back with the copies" restores both."""
    project, _ = night_world(tmp_path, isolated_home, USER_TEXT)
    memory = isolated_home / ".claude" / "CLAUDE.md"
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_bytes(b"# Mine\n")
    store = Store(paths.db_path())
    try:
        with serve(write_persona(tmp_path)) as sim:
            settings = night_settings(isolated_home, project, memory, sim.url)
            night = run_night(store, settings, env={}, home=isolated_home)
    finally:
        store.close()
    pid = night.proposal_id
    staged_copies = [c for c in night.summary.copies if c.status == "staged"]
    assert pid and staged_copies, night.summary.copies
    copy = staged_copies[0]
    assert copy.proposal_id
    live = {pid: memory, copy.proposal_id: Path(copy.target)}
    before = {k: p.read_bytes() if p.exists() else None for k, p in live.items()}
    staged = {k: (paths.proposals_dir() / k / "document").read_bytes() for k in live}
    assert all(staged[k] != before[k] for k in live)

    with ui_process() as ui, chromium() as browser:
        page = browser.new_page()
        page.goto(ui.login_url)
        page.goto(f"{ui.base}/proposals/{pid}")
        copies = page.locator("#sec-copies-for-other-agents")
        row = copies.locator("tr", has_text=copy.agent)
        assert copy.proposal_id in row.inner_text() and copy.target in row.inner_text()
        assert row.locator(f"a[href='/proposals/{copy.proposal_id}']").count() == 1

        nav(page, "header nav >> text=Score history")  # the copy's document has its chart
        shown = Service().proposal(copy.proposal_id)
        # the copy was certified on the val asks of codex's own tasks: its val chart
        split = "val" if shown.val_before is not None else "test"
        chart = page.locator("figure.chart", has_text=f"{split} score").filter(
            has=page.locator("circle")
        )
        points = {}
        for i in range(chart.count()):
            points[chart.nth(i).get_attribute("id")] = chart_points(
                page, chart.nth(i).get_attribute("id") or ""
            )
        x = f"#{night.night_id}"
        wanted = {
            (f"{split} before", x): getattr(shown, f"{split}_before"),
            (f"{split} after", x): getattr(shown, f"{split}_after"),
        }
        assert wanted and None not in wanted.values()
        assert any(wanted.items() <= p.items() for p in points.values()), points
        assert page.locator("main h2", has_text=copy.target).count() == 1

        page.goto(f"{ui.base}/proposals/{pid}")
        nav(page, "button:text-is('Adopt with the copies for other agents')")
        flash = page.locator(".flash.ok").inner_text()
        assert f"adopted {pid}" in flash and f"adopted {copy.proposal_id}" in flash
        assert {k: p.read_bytes() for k, p in live.items()} == staged
        assert Service().proposal(copy.proposal_id).status == "adopted"

        # "Roll back" restores this proposal's file only, and says the copy stays adopted
        assert f"Also adopted for other agents: {copy.proposal_id}" in page.inner_text("main")
        nav(page, "button:text-is('Roll back')")
        flash = page.locator(".flash.ok").inner_text()
        assert f"rolled back {pid}: {memory} restored" in flash
        assert f"still adopted for other agents: {copy.proposal_id} ({copy.target})" in flash
        assert memory.read_bytes() == before[pid]
        assert live[copy.proposal_id].read_bytes() == staged[copy.proposal_id]
        assert Service().proposal(pid).status == "rolled_back"
        assert Service().proposal(copy.proposal_id).status == "adopted"
        row = page.locator("#sec-copies-for-other-agents tr", has_text=copy.agent)
        assert "adopted" in row.inner_text()  # the copy's status now, not the night's

        # a rolled-back proposal adopts again from its page, as `adopt ID` does
        nav(page, "button:text-is('Adopt again')")
        assert f"adopted {pid}" in page.locator(".flash.ok").inner_text()
        assert memory.read_bytes() == staged[pid]
        assert Service().proposal(pid).status == "adopted"

        # rolled back with its copy: every file
        nav(page, "button:text-is('Roll back with the copies for other agents')")
        flash = page.locator(".flash.ok").inner_text()
        assert f"rolled back {pid}" in flash and f"rolled back {copy.proposal_id}" in flash
        assert "still adopted" not in flash

        # the refusal taken back: staged again, and adopted with the page's "Adopt"
        nav(page, "button:text-is('Take back the refusal')")
        assert f"lifted the refusal of {pid}: now staged" in page.locator(".flash.ok").inner_text()
        nav(page, "button:text-is('Adopt')")
        assert memory.read_bytes() == staged[pid]
        nav(page, "button:text-is('Roll back')")
        assert f"rolled back {pid}" in page.locator(".flash.ok").inner_text()
    assert {k: p.read_bytes() if p.exists() else None for k, p in live.items()} == before
    assert {Service().proposal(k).status for k in live} == {"rolled_back"}


def test_a_port_in_use_is_a_one_line_error(isolated_home: Path) -> None:
    import socket
    import subprocess
    import sys

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "skillopt_sleep", "ui", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        taken.close()
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use; choose another "
        "port (--port, or ui.port in the config; 0 = any free port)"
    ]
