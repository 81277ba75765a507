"""The dashboard's pages: each reads the application service and renders its template.

They are plain functions of a :class:`~skillopt_sleep.service.Service` (and the request's
parameters), run in a worker thread by :mod:`.app`; a :class:`~skillopt_sleep.errors.
SkilloptError` they raise becomes an error page there. The markup is in ``templates/``
(:mod:`.render`); here is what a page shows, gathered from the service.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from skillopt_sleep.errors import ConfigError
from skillopt_sleep.mining.split import HELD_OUT
from skillopt_sleep.results import night_label
from skillopt_sleep.ui.charts import Series, bar_chart, line_chart
from skillopt_sleep.ui.html import Html, number
from skillopt_sleep.ui.render import render

if TYPE_CHECKING:
    from skillopt_sleep.service import Service

Flash = tuple[str, str] | None
#: nights the history charts and the nights page read at most
HISTORY_NIGHTS = 200


def _running(svc: Service) -> list[Any] | None:
    """For the "Start a night" button: None when no night runs, else the nights running now."""
    if not svc.night_running():
        return None
    return [n for n in svc.nights(5) if n.status == "running"]


# ---------------------------------------------------------------------------- overview
def _harvest_rows(st: Any, enabled: set[str]) -> list[list[Any]]:
    """A row per agent (stored, harvested or enabled): its sessions and the last harvest."""
    rows = []
    for name in sorted(set(st.sessions_by_source) | set(st.harvest) | enabled):
        h = st.harvest.get(name)
        skipped = {**(h.files_skipped if h else {}), **(h.sessions_filtered if h else {})}
        rows.append(
            [
                name,
                "yes" if name in enabled else "no",
                number(st.sessions_by_source.get(name, 0)),
                number(h.files_seen) if h else "—",
                number(h.files_read) if h else "—",
                number(h.bytes_read) if h else "—",
                number(h.sessions_new) if h else "—",
                number(h.sessions_updated) if h else "—",
                ", ".join(f"{k} {v}" for k, v in skipped.items()) or "—",
                (h.at if h else None) or "—",
            ]
        )
    return rows


def _daemon(d: Any, schedule: str | None, night_running: bool) -> list[tuple[str, Any]]:
    """The daemon's card: what it runs and when (or that it does not run, or not answer)."""
    if d.running and d.responding is not False:
        nxt = d.next_night
        when = "now (due)" if nxt and nxt.pending else ((nxt.at if nxt else "") or "—")
        if nxt and nxt.waiting:
            when += f" — {nxt.waiting}"
        return [
            ("daemon", f"running (pid {d.pid}), up {int(d.uptime_seconds or 0)} s"),
            ("schedule", d.schedule or "—"),
            ("next night", when),
            ("night running", "yes" if d.night.running else "no"),
            ("last ingest", (d.last_ingest or {}).get("at") or "—"),
            ("log", d.log or "—"),
            ("dashboard", d.ui or "not served by the daemon (config ui.serve)"),
        ]
    if d.running:
        return [("daemon", f"running (pid {d.pid}) but not answering")]
    return [
        ("daemon", "not running (start it with `skillopt-sleep start`)"),
        ("schedule", f"{schedule} (when the daemon runs)" if schedule else "—"),
        ("night running", "yes" if night_running else "no"),
    ]


def overview(svc: Service, csrf: str = "", flash: Flash = None) -> str:
    st = svc.status(nights=5, daemon_timeout=1.5)
    try:
        settings = svc.settings()
        enabled = {n for n, cfg in settings.sources.items() if cfg.enabled}
        schedule: str | None = settings.schedule
    except ConfigError:
        enabled, schedule = set(), None
    return render(
        "overview.html",
        title="Overview",
        active="/",
        flash=flash,
        st=st,
        harvest=_harvest_rows(st, enabled),
        daemon=_daemon(st.daemon, schedule, st.night_running),
        csrf=csrf,
        running=_running(svc) if csrf else None,
    )


# ---------------------------------------------------------------------------- history
def _doc_charts(path: str, rows: list[tuple[str, Any]]) -> tuple[str, Html, Html]:
    """The val and test charts of one document; ``rows``: (x label, a night or proposal with
    ``val_before`` … ``test_after``)."""
    doc_id = "doc-" + re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-")[-60:]
    xs = [x for x, _ in rows]

    def chart(split: str, title: str) -> Html:
        return line_chart(
            f"{doc_id}-{split}",
            title,
            xs,
            [
                Series(f"{split} before", [getattr(r, f"{split}_before") for _, r in rows]),
                Series(f"{split} after", [getattr(r, f"{split}_after") for _, r in rows]),
            ],
            y_max=1.0,
        )

    return (
        path,
        chart("val", "val score per night"),
        chart("test", "test score per night (held out)"),
    )


def _scored_documents(svc: Service, scored: list[Any]) -> list[tuple[str, Html, Html]]:
    """The charts of every document a night scored (the managed one from its nights, the other
    agents' documents from their copies' proposals, which carry the scores)."""
    by_doc: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for n in scored:
        if n.target_path and (n.val_before is not None or n.val_after is not None):
            by_doc[n.target_path].append((f"#{n.id}", n))
    copies: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for p in sorted(svc.proposals(), key=lambda p: (p.night_id or 0, p.id)):
        if p.night_id is not None and p.target_path not in by_doc:
            copies[p.target_path].append((f"#{p.night_id}", p))
    return [_doc_charts(path, rows) for path, rows in [*by_doc.items(), *copies.items()]]


def _wild_chart(svc: Service) -> Html | None:
    wild = svc.in_the_wild()
    if not wild:
        return None
    return bar_chart(
        "wild",
        "pass rate in real sessions",
        [w.proposal_id for w in wild],
        [
            Series("before adopt", [w.before_pass_rate for w in wild]),
            Series("since adopt", [w.pass_rate for w in wild]),
        ],
        y_max=1.0,
    )


def _cost_charts(scored: list[Any]) -> tuple[Html, Html] | None:
    costly = [n for n in scored if n.calls is not None]
    if not costly:
        return None
    xs = [f"#{n.id}" for n in costly]
    calls = [
        Series("calls", [n.calls for n in costly]),
        Series("cached", [n.cached_calls for n in costly]),
    ]
    tokens = [
        Series("input", [n.input_tokens for n in costly]),
        Series("output", [n.output_tokens for n in costly]),
    ]
    return bar_chart("calls", "model calls", xs, calls), bar_chart("tokens", "tokens", xs, tokens)


def history(svc: Service) -> str:
    nights = sorted(svc.nights(HISTORY_NIGHTS), key=lambda n: n.id)
    scored = [n for n in nights if not n.dry_run]
    docs = _scored_documents(svc, scored)
    return render(
        "history.html",
        title="Score history",
        active="/history",
        docs=docs,
        wild=_wild_chart(svc),
        costs=_cost_charts(scored),
    )


# ---------------------------------------------------------------------------- proposals
def proposals(svc: Service) -> str:
    return render(
        "proposals.html", title="Proposals", active="/proposals", proposals=svc.proposals()
    )


def proposal(svc: Service, proposal_id: str, csrf: str, flash: Flash = None) -> str:
    d = svc.proposal(proposal_id)
    has_copies = d.status == "staged" and bool(svc.agent_copies(d.id))
    others = svc.copy_statuses(d.id)
    return render(
        "proposal.html",
        title=f"Proposal {d.id}",
        active="/proposals",
        flash=flash,
        d=d,
        csrf=csrf,
        has_copies=has_copies,
        others=others,
        adopted=[k for k, v in others.items() if v == "adopted"],
        report=svc.proposal_markdown(d.id),
    )


# ---------------------------------------------------------------------------- tasks
#: what each of a check's controls checked (see :class:`~skillopt_sleep.models.Check`)
CONTROLS = {
    "negative": "fails the corrected answer",
    "positive": "passes the accepted answer",
    "anti_gaming": "its own words alone do not pass",
}


def _check(c: dict[str, Any]) -> str:
    """A check as a sentence: ``contains 'pnpm' — from a correction: "no, use pnpm";
    fails the corrected answer: pass; …`` (never a Python dict)."""
    text = str(c.get("kind", "?")) + (f" {c['value']!r}" if c.get("value") else "")
    parts = []
    if c.get("origin"):
        evidence = " ".join(str(c.get("evidence") or "").split())
        parts.append(f"from a {c['origin']}" + (f': "{evidence}"' if evidence else ""))
    for k, v in (c.get("controls") or {}).items():
        parts.append(f"{CONTROLS.get(k, k.replace('_', ' '))}: {v}")
    if c.get("context"):
        parts.append("needs the occurrence's context")
    return text + (" — " + "; ".join(parts) if parts else "")


#: the occurrence roles in the order the tasks page counts them
ROLES = ("train", "val", "test", "withheld", "unscored")


def _role(task: Any, occ: dict[str, Any]) -> str:
    """An occurrence's role: its split, ``withheld`` (a note says why) or ``unscored`` (the
    task is not scorable, so no occurrence has a role)."""
    if occ.get("split"):
        return str(occ["split"])
    return "withheld" if task.split and occ.get("note") else "unscored"


def _roles(task: Any) -> str:
    """``3: train 1, val 1, test 1`` (the split of a task without occurrences: synthetic)."""
    occs = task.occurrences
    if not occs:
        return task.split or "—"
    counts: dict[str, int] = defaultdict(int)
    for o in occs:
        counts[_role(task, o)] += 1
    return f"{len(occs)}: " + ", ".join(f"{r} {counts[r]}" for r in ROLES if counts[r])


def _split_summary(listed: Any) -> str:
    """``12 tasks; by task: train 6, val 3; 20 occurrences: train 10, …``."""
    by_task: dict[str, int] = defaultdict(int)
    by_occurrence: dict[str, int] = defaultdict(int)
    for t in listed.tasks:
        by_task[t.split or "unscored"] += 1
        for o in t.occurrences:
            by_occurrence[_role(t, o)] += 1
    shown = f"{listed.total} tasks" + (
        f" (the first {len(listed.tasks)} shown)" if listed.total > len(listed.tasks) else ""
    )
    return (
        f"{shown}; by task: "
        + (", ".join(f"{k} {v}" for k, v in sorted(by_task.items())) or "none")
        + f"; {sum(by_occurrence.values())} occurrences: "
        + (", ".join(f"{r} {by_occurrence[r]}" for r in ROLES if by_occurrence[r]) or "none")
    )


def tasks(svc: Service) -> str:
    listed = svc.stored_tasks(limit=1000)
    return render(
        "tasks.html",
        title="Tasks",
        active="/tasks",
        summary=_split_summary(listed),
        held_out=HELD_OUT,
        tasks=listed.tasks,
        occurrences=[(t, i == 0, o) for t in listed.tasks for i, o in enumerate(t.occurrences)],
        roles=_roles,
        role=_role,
        check=_check,
    )


# ---------------------------------------------------------------------------- search
def search(svc: Service, query: str, agent: str | None) -> str:
    from skillopt_sleep.config import KNOWN_SOURCES

    hits = svc.search(query, agent=agent or None, limit=100).hits if query.strip() else None
    return render(
        "search.html",
        title="Search",
        active="/search",
        query=query,
        agent=agent,
        agents=KNOWN_SOURCES,
        hits=hits,
    )


def session(svc: Service, session_id: str) -> str:
    s = svc.session(session_id)
    return render("session.html", title=f"Session {s.title or s.id}", active="/search", s=s)


# ---------------------------------------------------------------------------- nights
def nights(svc: Service, csrf: str = "", flash: Flash = None) -> str:
    listed = svc.nights(HISTORY_NIGHTS)
    return render(
        "nights.html",
        title="Nights",
        active="/nights",
        flash=flash,
        nights=listed,
        csrf=csrf,
        running=_running(svc) if csrf else None,
    )


#: seconds between reloads of a running night's page
RUNNING_REFRESH = 2


def night(svc: Service, night_id: int, flash: Flash = None) -> str:
    n = svc.night(night_id)
    return render(
        "night.html",
        title=f"Night #{night_label(n.id)}",
        active="/nights",
        flash=flash,
        refresh=RUNNING_REFRESH if n.status == "running" else None,
        n=n,
        progress=svc.progress(night_id),
        log=svc.night_log(night_id=night_id),
    )


def error(title: str, message: str) -> str:
    """A page that says what went wrong, in one line."""
    return render("error.html", title=title, active="", message=message)
