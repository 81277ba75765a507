"""The dashboard's Jinja templates without a server: every template renders (each page on a
stand-in of the service with every kind of row), the user's text is escaped wherever it shows
(a ``<script>`` in a task's intent is text on the page), and no template marks data ``|safe``."""

from __future__ import annotations

import re
from importlib import resources
from types import SimpleNamespace
from typing import Any

import pytest

from skillopt_sleep.ui import pages

EVIL = "<script>alert('x')</script>"
SHOWN = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"


def ns(**kw: Any) -> SimpleNamespace:
    return SimpleNamespace(**kw)


SCORES: dict[str, Any] = {
    "val_before": 0.5,
    "val_after": 0.75,
    "test_before": None,
    "test_after": 0.6,
}
SUMMARY = ns(
    reason=EVIL, warning=EVIL, test_note=None, unverified=None, stopped=None, copy_for=None,
    copy_of=None, section=EVIL, block_hash="h", copies=[], tasks=3, scorable=2, train=1, val=1,
    test=0, edits=ns(applied=1, rejected=0, unmatched=0, unverified=0),
    delivery=ns(mode="block", rules=2, block_tokens=50, budget=400, per_turn_tokens=5),
    blocks=[ns(section=EVIL, status="succeeded", proposal_id="p1", scorable=2, train=1, val=1,
               test=0, reason=EVIL, **SCORES)],
)  # fmt: skip
NIGHT = ns(
    id=1, status="running", dry_run=False, target_path=EVIL, project=EVIL, calls=3,
    cached_calls=1, input_tokens=10, output_tokens=20, seconds=1.5, trigger="manual",
    started_at="s", finished_at=None, proposal_id="p1", error=EVIL, summary=SUMMARY, **SCORES,
)  # fmt: skip
PROPOSAL = ns(
    id="p1", status="staged", created_at="c", target_path=EVIL, target=EVIL, reason=EVIL,
    night_id=1, folder=EVIL, cost=ns(calls=1, cached_calls=0, input_tokens=1, output_tokens=1),
    summary=ns(**{**vars(SUMMARY), "copies": [
        ns(agent="codex", proposal_id="p2", status="staged", target=EVIL, backend="b",
           before=0.1, after=0.2, certified_on="x", tasks=1, reason=EVIL)]}),
    diff=f"@@ -1 +1 @@\n-{EVIL}\n+new\n",
    val_tasks=[ns(task_id="t1", intent=EVIL, before=0.1, after=0.2)], test_tasks=[],
    edits=[ns(op="add", text=EVIL, old=None, status="applied", reason=EVIL, origin="o",
              rationale=EVIL, val_before=0.1, val_after=0.2)],
    rules=[ns(n=n, change="adds", rule=EVIL, scope=EVIL, val_before=0.1, val_after=0.2,
              tokens=5, status=st, reason=EVIL,
              evidence=[ns(task_id="t1", intent=EVIL, words=[EVIL], sessions=["claude:1"])])
           for n, st in ((1, "proposed"), (2, "refused"))],
    **SCORES,
)  # fmt: skip
WILD = ns(proposal_id="p1", target_path=EVIL, mode="file", adopted_at="a", sessions=2, reached=1,
          pass_rate=0.5, before_pass_rate=None, flag=EVIL,
          rules=[ns(rule=EVIL, verdict="hurt", why=EVIL, own_before=1, own_before_passed=1,
                    own_after=2, own_after_passed=0, other_before=0, other_before_bad=0,
                    other_after=3, other_after_bad=3, rollback="p2")])  # fmt: skip
TASK = ns(
    id="t1", split="val", intent=EVIL, corrections=[EVIL], project=EVIL, synthetic=False,
    checks=[{"kind": "contains", "value": EVIL, "origin": "correction", "evidence": EVIL}],
    occurrences=[{"session_id": "claude:1", "agent": "claude", "message_id": 3, "when": "w",
                  "split": "val", "note": None, "project": EVIL, "prompt": EVIL}],
)  # fmt: skip


class FakeService:
    """What the pages read of :class:`~skillopt_sleep.service.Service`, every text ``EVIL``."""

    def status(self, **_: Any) -> Any:
        daemon = ns(running=False)
        counts = ns(sessions=1, messages=2, tasks=1)
        return ns(
            counts=counts, config_error=EVIL, sessions_by_source={EVIL: 1}, harvest={},
            database=EVIL, daemon=daemon, night_running=False, in_the_wild=[WILD],
            pending_proposals=[PROPOSAL], last_night=NIGHT,
        )  # fmt: skip

    def settings(self) -> Any:
        return ns(sources={"claude": ns(enabled=True)}, schedule=EVIL)

    def night_running(self) -> bool:
        return True

    def nights(self, _limit: int) -> list[Any]:
        return [NIGHT]

    def night(self, _nid: int) -> Any:
        return NIGHT

    def progress(self, _nid: int) -> list[str]:
        return [EVIL]

    def night_log(self, night_id: int) -> str:
        return EVIL

    def proposals(self) -> list[Any]:
        return [PROPOSAL]

    def proposal(self, _pid: str) -> Any:
        return PROPOSAL

    def agent_copies(self, _pid: str) -> list[str]:
        return ["codex"]

    def copy_statuses(self, _pid: str) -> dict[str, str]:
        return {"p2": "staged"}

    def proposal_markdown(self, _pid: str) -> str:
        return EVIL

    def in_the_wild(self) -> list[Any]:
        return [WILD]

    def stored_tasks(self, limit: int) -> Any:
        return ns(tasks=[TASK], total=1)

    def search(self, _query: str, **_: Any) -> Any:
        hit = ns(session_id="claude:1", message_id=3, agent="claude", role="user",
                 timestamp=None, snippet=f"a [{EVIL}] b", project=EVIL)  # fmt: skip
        return ns(hits=[hit])

    def session(self, sid: str) -> Any:
        message = ns(id=1, seq=0, role="user", kind=None, timestamp=None, tool_names=[EVIL],
                     text=EVIL)  # fmt: skip
        return ns(id=sid, title=EVIL, agent="claude", project=EVIL, started_at=None,
                  updated_at=None, model=None, messages=[message])  # fmt: skip


svc: Any = FakeService()
#: every page template and the page that renders it (layout.html and macros.html: all of them)
PAGES = {
    "overview.html": lambda: pages.overview(svc, "csrf", ("ok", EVIL)),
    "history.html": lambda: pages.history(svc),
    "proposals.html": lambda: pages.proposals(svc),
    "proposal.html": lambda: pages.proposal(svc, "p1", "csrf"),
    "tasks.html": lambda: pages.tasks(svc),
    "search.html": lambda: pages.search(svc, EVIL, EVIL),
    "session.html": lambda: pages.session(svc, "claude:1"),
    "nights.html": lambda: pages.nights(svc, "csrf"),
    "night.html": lambda: pages.night(svc, 1),
    "error.html": lambda: pages.error("Error", EVIL),
}
TEMPLATES = resources.files("skillopt_sleep.ui").joinpath("templates")


def test_every_template_is_a_page_or_the_layout_or_the_macros() -> None:
    names = {p.name for p in TEMPLATES.iterdir() if p.name.endswith(".html")}
    assert names == {*PAGES, "layout.html", "macros.html"}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_page_renders_and_shows_the_users_text_as_text(name: str) -> None:
    html = PAGES[name]()
    assert html.startswith("<!doctype html><html lang=en>") and html.endswith("</html>")
    assert "<script" not in html  # no page has a script of its own; EVIL never becomes one
    assert SHOWN in html, "the user's text is shown, escaped"


def test_a_script_in_a_task_intent_shows_as_text_on_the_tasks_page() -> None:
    html = pages.tasks(svc)
    assert f"<td>{SHOWN}</td>" in html
    assert EVIL not in html


@pytest.mark.parametrize("name", sorted(p.name for p in TEMPLATES.iterdir()))
def test_no_template_marks_data_safe_or_turns_escaping_off(name: str) -> None:
    text = TEMPLATES.joinpath(name).read_text()
    assert not re.search(r"\|\s*safe\b|autoescape\s+false|Markup\(", text), name
