"""The dashboard as a user meets it: a real ``skillopt-sleep ui`` process and a real headless
Chromium (Debian's ``chromium``, installed by ``.ci/run``) driven by Playwright."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.helpers.procs import stop

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class UiProcess:
    proc: subprocess.Popen[str]
    login_url: str  # carries the token once
    base: str  # http://127.0.0.1:PORT (no trailing slash)
    stderr: list[str]


@contextmanager
def ui_process(*args: str, timeout: float = 30.0) -> Iterator[UiProcess]:
    """``skillopt-sleep ui --port 0`` in this test's environment (its HOME and state folder),
    until the block ends; yields once it printed its address."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillopt_sleep", "ui", "--port", "0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    lines: list[str] = []
    found = threading.Event()
    assert proc.stderr is not None
    stream = proc.stderr

    def read() -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))
            if line.startswith("dashboard: "):
                found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + timeout
        while not found.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("skillopt-sleep ui did not start:\n" + "\n".join(lines))
        login = next(x for x in lines if x.startswith("dashboard: ")).split(" ", 1)[1].strip()
        base = login.split("/?", 1)[0]
        yield UiProcess(proc, login, base, lines)
    finally:
        stop(proc)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser (Playwright's ``Browser``), offline, no sandbox."""
    from playwright.sync_api import sync_playwright

    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: .ci/run installs Debian's chromium"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def chart_points(page: Any, chart_id: str) -> dict[tuple[str, str], float]:
    """(series, x label) -> value of every point and bar of the chart ``chart_id``."""
    items = page.eval_on_selector_all(
        f"#{chart_id} [data-series]",
        "els => els.map(e => [e.dataset.series, e.dataset.x, e.dataset.y])",
    )
    return {(s, x): float(y) for s, x, y in items}


def nav(page: Any, selector: str) -> None:
    """Click ``selector`` and wait until the page it leads to has loaded (a click only starts
    the navigation: reading the page right after it may read the old one, or none)."""
    with page.expect_navigation():
        page.click(selector)
