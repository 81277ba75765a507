"""The dashboard's pages: each reads the application service and returns a whole HTML page.

They are plain functions of a :class:`~skillopt_sleep.service.Service` (and the request's
parameters), run in a worker thread by :mod:`.app`; a :class:`~skillopt_sleep.errors.
SkilloptError` they raise becomes an error page there.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from skillopt_sleep.errors import ConfigError
from skillopt_sleep.mining.split import HELD_OUT
from skillopt_sleep.results import night_label
from skillopt_sleep.ui.charts import Series, bar_chart, line_chart
from skillopt_sleep.ui.html import (
    Html,
    csrf_form,
    esc,
    kv,
    link,
    number,
    page,
    score,
    side_by_side,
    status,
    table,
    url,
)

if TYPE_CHECKING:
    from skillopt_sleep.service import Service

Flash = tuple[str, str] | None
#: nights the history charts and the nights page read at most
HISTORY_NIGHTS = 200


def _path(text: Any) -> Html:
    return Html(f'<span class="path">{esc(text)}</span>')


def _section(title: str, body: str) -> str:
    """A card with a heading; its id is ``sec-`` and the title, lower-cased, dashed."""
    sid = "sec-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return f'<section class="card" id="{esc(sid)}"><h2>{esc(title)}</h2>{body}</section>'


def _proposal_link(pid: str | None) -> Html:
    return link(url("proposals", pid), pid) if pid else esc("—")


# ---------------------------------------------------------------------------- overview
def start_night_form(svc: Service, csrf: str) -> Html:
    """The "Start a night" button, or which night runs now (one night at a time)."""
    if svc.night_running():
        running = [n for n in svc.nights(5) if n.status == "running"]
        which = (
            link(url("nights", night_label(running[0].id)), f"#{night_label(running[0].id)}")
            if running
            else ""
        )
        return Html(
            f'<p class="muted" id="night-running">A night is running {which}: the next can '
            "start when it has finished.</p>"
        )
    return csrf_form(url("nights", "start"), csrf, "Start a night", cls="primary")


def overview(svc: Service, csrf: str = "", flash: Flash = None) -> str:
    st = svc.status(nights=5, daemon_timeout=1.5)
    c = st.counts
    parts = []
    if st.config_error:
        parts.append(f'<div class="flash bad">config: {esc(st.config_error)}</div>')
    try:
        settings = svc.settings()
        enabled = {n for n, cfg in settings.sources.items() if cfg.enabled}
        schedule: str | None = settings.schedule
    except ConfigError:
        enabled, schedule = set(), None
    sources = sorted(set(st.sessions_by_source) | set(st.harvest) | enabled)
    rows = []
    for name in sources:
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
    parts.append(
        _section(
            "Agents and harvest",
            f"<p>store {_path(st.database)}: {number(c.sessions)} sessions, "
            f"{number(c.messages)} messages, {number(c.tasks)} tasks</p>"
            + table(
                [
                    "source",
                    "enabled",
                    "sessions",
                    "files seen",
                    "read",
                    "bytes",
                    "new",
                    "updated",
                    "skipped / filtered",
                    "last harvest",
                ],
                rows,
                num=range(2, 8),
            ),
        )
    )
    d = st.daemon
    if d.running and d.responding is not False:
        nxt = d.next_night or {}
        when = "now (due)" if nxt.get("pending") else (nxt.get("at") or "—")
        if nxt.get("waiting"):
            when += f" — {nxt['waiting']}"
        daemon = kv(
            [
                ("daemon", f"running (pid {d.pid}), up {int(d.uptime_seconds or 0)} s"),
                ("schedule", d.schedule or "—"),
                ("next night", when),
                ("night running", "yes" if d.night.running else "no"),
                ("last ingest", (d.last_ingest or {}).get("at") or "—"),
                ("log", d.log or "—"),
                ("dashboard", d.ui or "not served by the daemon (config ui.serve)"),
            ]
        )
    elif d.running:
        daemon = kv([("daemon", f"running (pid {d.pid}) but not answering")])
    else:
        daemon = kv(
            [
                ("daemon", "not running (start it with `skillopt-sleep start`)"),
                ("schedule", f"{schedule} (when the daemon runs)" if schedule else "—"),
                ("night running", "yes" if st.night_running else "no"),
            ]
        )
    parts.append(_section("Daemon", daemon))
    adopted = [
        [
            _proposal_link(w.proposal_id),
            _path(w.target_path),
            w.mode,
            w.adopted_at,
            number(w.sessions),
            number(w.reached),
            f"{w.pass_rate:.0%}" if w.pass_rate is not None else "—",
            f"{w.before_pass_rate:.0%}" if w.before_pass_rate is not None else "—",
            w.flag or "",
        ]
        for w in st.in_the_wild
    ]
    parts.append(
        _section(
            "Adopted where",
            table(
                [
                    "proposal",
                    "live file",
                    "mode",
                    "adopted",
                    "sessions since",
                    "reached",
                    "passed",
                    "passed before",
                    "warning",
                ],
                adopted,
                num=(4, 5, 6, 7),
            ),
        )
    )
    pending = [
        [
            _proposal_link(p.id),
            _path(p.target),
            p.created_at,
            f"{score(p.val_before)} → {score(p.val_after)}",
            f"{score(p.test_before)} → {score(p.test_after)}",
        ]
        for p in st.pending_proposals
    ]
    parts.append(
        _section("Staged proposals", table(["id", "target", "created", "val", "test"], pending))
    )
    n = st.last_night
    if n is not None:
        last = kv(
            [
                ("night", link(url("nights", night_label(n.id)), f"#{night_label(n.id)}")),
                ("status", status(n.status)),
                ("started", n.started_at),
                ("val", f"{score(n.val_before)} → {score(n.val_after)}"),
                ("test", f"{score(n.test_before)} → {score(n.test_after)}"),
                ("why", n.error or n.summary.reason or "—"),
            ]
        )
    else:
        last = Html("<p>No night has run yet (<code>skillopt-sleep run</code>).</p>")
    if csrf:
        last = Html(last + start_night_form(svc, csrf))
    parts.append(_section("Last night", last))
    return page("Overview", "".join(parts), active="/", flash=flash)


# ---------------------------------------------------------------------------- history
def _doc_id(path: str) -> str:
    return "doc-" + re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-")[-60:]


def _doc_charts(path: str, rows: list[tuple[str, Any]]) -> str:
    """The val and test charts of one document; ``rows``: (x label, a night or proposal with
    ``val_before`` … ``test_after``)."""
    xs = [x for x, _ in rows]
    return (
        f"<h2>{_path(path)}</h2>"
        '<div class="charts">'
        + line_chart(
            f"{_doc_id(path)}-val",
            "val score per night",
            xs,
            [
                Series("val before", [r.val_before for _, r in rows]),
                Series("val after", [r.val_after for _, r in rows]),
            ],
            y_max=1.0,
        )
        + line_chart(
            f"{_doc_id(path)}-test",
            "test score per night (held out)",
            xs,
            [
                Series("test before", [r.test_before for _, r in rows]),
                Series("test after", [r.test_after for _, r in rows]),
            ],
            y_max=1.0,
        )
        + "</div>"
    )


def history(svc: Service) -> str:
    nights = sorted(svc.nights(HISTORY_NIGHTS), key=lambda n: n.id)
    scored = [n for n in nights if not n.dry_run]
    parts = []
    by_doc: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for n in scored:
        if n.target_path and (n.val_before is not None or n.val_after is not None):
            by_doc[n.target_path].append((f"#{n.id}", n))
    # the other agents' documents: their copies' proposals carry the scores
    copies: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for p in sorted(svc.proposals(), key=lambda p: (p.night_id or 0, p.id)):
        if p.night_id is not None and p.target_path not in by_doc:
            copies[p.target_path].append((f"#{p.night_id}", p))
    if not by_doc and not copies:
        parts.append("<p class=muted>No scored night yet.</p>")
    for path, rows in [*by_doc.items(), *copies.items()]:
        parts.append(_doc_charts(path, rows))
    wild = svc.in_the_wild()
    parts.append("<h2>In the wild: first-answer pass rate before and after adopt</h2>")
    if wild:
        xs = [w.proposal_id for w in wild]
        parts.append(
            bar_chart(
                "wild",
                "pass rate in real sessions",
                xs,
                [
                    Series("before adopt", [w.before_pass_rate for w in wild]),
                    Series("since adopt", [w.pass_rate for w in wild]),
                ],
                y_max=1.0,
            )
        )
    else:
        parts.append("<p class=muted>Nothing adopted yet.</p>")
    costly = [n for n in scored if n.calls is not None]
    parts.append("<h2>Model calls and tokens per night</h2>")
    if costly:
        xs = [f"#{n.id}" for n in costly]
        parts.append(
            '<div class="charts">'
            + bar_chart(
                "calls",
                "model calls",
                xs,
                [
                    Series("calls", [n.calls for n in costly]),
                    Series("cached", [n.cached_calls for n in costly]),
                ],
            )
            + bar_chart(
                "tokens",
                "tokens",
                xs,
                [
                    Series("input", [n.input_tokens for n in costly]),
                    Series("output", [n.output_tokens for n in costly]),
                ],
            )
            + "</div>"
        )
    else:
        parts.append("<p class=muted>No night has made model calls yet.</p>")
    return page("Score history", "".join(parts), active="/history")


# ---------------------------------------------------------------------------- proposals
def proposals(svc: Service) -> str:
    rows = [
        [
            _proposal_link(p.id),
            status(p.status),
            p.created_at,
            f"{score(p.val_before)} → {score(p.val_after)}",
            f"{score(p.test_before)} → {score(p.test_after)}",
            _path(p.target_path),
            p.reason or "",
        ]
        for p in svc.proposals()
    ]
    body = table(["id", "status", "created", "val", "test", "target", "reason"], rows)
    return page("Proposals", body, active="/proposals")


def _tasks_table(tasks: list[Any]) -> Html:
    def delta(t: Any) -> str:
        if t.before is None or t.after is None:
            return "—"
        d = t.after - t.before
        return f"{d:+.3f}"

    return table(
        ["task", "intent", "before", "after", "change"],
        [[t.task_id, t.intent, score(t.before), score(t.after), delta(t)] for t in tasks],
        num=(2, 3, 4),
    )


def proposal(svc: Service, proposal_id: str, csrf: str, flash: Flash = None) -> str:
    d = svc.proposal(proposal_id)
    s = d.summary
    parts = []
    info = [
        ("status", status(d.status)),
        ("target", _path(d.target_path)),
        ("night", link(url("nights", str(d.night_id)), f"#{d.night_id}") if d.night_id else "—"),
        ("created", d.created_at),
        ("val", f"{score(d.val_before)} → {score(d.val_after)}"),
        ("test", f"{score(d.test_before)} → {score(d.test_after)}"),
        (
            "model calls",
            f"{number(d.cost.calls)} (+{number(d.cost.cached_calls)} cached), "
            f"{number(d.cost.input_tokens)} in / {number(d.cost.output_tokens)} out tokens",
        ),
        ("folder", _path(d.folder)),
    ]
    if s.copy_for:
        info.append(("copy for", f"{s.copy_for} (rules of {s.copy_of or 'the document'})"))
    if d.reason:
        info.append(("reason", d.reason))
    if s.section is not None:  # one project's block of a memory file every project shares
        info.append(("block", f"the rules for project {s.section}"))
    elif s.block_hash is not None:
        info.append(("block", "the rules for every project"))
    for label, text in (
        ("why", s.reason),
        ("warning", s.warning),
        ("test", s.test_note),
        ("unverified", s.unverified),
        ("stopped", s.stopped),
    ):
        if text:
            info.append((label, text))
    if s.delivery:
        info.append(
            (
                "delivery",
                f"{s.delivery.mode}: {s.delivery.rules} rules, {s.delivery.block_tokens} of "
                f"{s.delivery.budget} tokens, ~{s.delivery.per_turn_tokens} tokens per turn",
            )
        )
    parts.append(_section("Report", kv(info)))
    actions = []
    pid = d.id
    if d.status == "staged":
        actions.append(csrf_form(url("proposals", pid, "adopt"), csrf, "Adopt", cls="primary"))
        if svc.agent_copies(pid):
            actions.append(
                csrf_form(
                    url("proposals", pid, "adopt"),
                    csrf,
                    "Adopt with the copies for other agents",
                    fields='<input type="hidden" name="all_agents" value="1">',
                )
            )
        actions.append(
            csrf_form(
                url("proposals", pid, "reject"),
                csrf,
                "Reject",
                cls="danger",
                fields='<input type="text" name="reason" placeholder="why (kept, and never '
                'proposed again)" aria-label="reason" size="40">',
            )
        )
    others = svc.copy_statuses(pid)
    if d.status == "adopted":
        actions.append(
            csrf_form(url("proposals", pid, "rollback"), csrf, "Roll back", cls="danger")
        )
        adopted = [k for k, v in others.items() if v == "adopted"]
        if adopted:
            actions.append(
                csrf_form(
                    url("proposals", pid, "rollback"),
                    csrf,
                    "Roll back with the copies for other agents",
                    cls="danger",
                    fields='<input type="hidden" name="all_agents" value="1">',
                )
            )
            actions.append(
                Html(
                    f"<p class=muted>Also adopted for other agents: {esc(', '.join(adopted))}. "
                    "“Roll back” restores this file only; each copy stays adopted in its own "
                    "file until you roll it back.</p>"
                )
            )
    elif d.status in ("rejected", "rolled_back"):
        if d.status == "rolled_back":  # as `adopt ID` does: a rolled-back proposal adopts again
            actions.append(
                csrf_form(url("proposals", pid, "adopt"), csrf, "Adopt again", cls="primary")
            )
        actions.append(
            csrf_form(
                url("proposals", pid, "unrefuse"),
                csrf,
                "Take back the refusal",
            )
        )
    if actions:
        parts.append(_section("Actions", "".join(actions)))
    copies = [
        [
            c.agent,
            status(
                others.get(c.proposal_id or "", "")
                or ("staged-copy" if c.status == "staged" else c.status)
            ),
            _proposal_link(c.proposal_id),
            _path(c.target),
            c.backend,
            f"{score(c.before)} → {score(c.after)}"
            + (f" ({c.certified_on}, {c.tasks} tasks)" if c.certified_on else ""),
            c.reason,
        ]
        for c in s.copies
    ]
    if copies:
        parts.append(
            _section(
                "Copies for other agents",
                table(
                    ["agent", "status", "proposal", "document", "backend", "score", "reason"],
                    copies,
                ),
            )
        )
    parts.append(_section("Diff", side_by_side(d.diff)))
    parts.append(
        _section(
            "Per-task evidence",
            "<h3>val</h3>"
            + _tasks_table(d.val_tasks)
            + "<h3>test (held out)</h3>"
            + _tasks_table(d.test_tasks),
        )
    )
    edits = [
        [
            e.op,
            e.text or e.old,
            status(e.status),
            e.reason,
            f"{score(e.val_before)} → {score(e.val_after)}",
            e.origin,
            e.rationale,
        ]
        for e in d.edits
    ]
    parts.append(
        _section(
            "Edits and the gate's verdicts",
            table(["op", "text", "verdict", "reason", "val", "origin", "rationale"], edits),
        )
    )
    report = svc.proposal_markdown(pid)
    parts.append(
        _section(
            "report.md",
            f'<details><summary>show</summary><pre class="block">{esc(report)}</pre></details>',
        )
    )
    return page(f"Proposal {pid}", "".join(parts), active="/proposals", flash=flash)


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


def tasks(svc: Service) -> str:
    listed = svc.stored_tasks(limit=1000)
    rows = [
        [
            Html(f'<a id="task-{esc(t.id)}" href="#occ-{esc(t.id)}">{esc(t.id)}</a>'),
            t.split or "unscored",
            _roles(t),
            t.intent,
            Html("<br>".join(esc(_check(c)) for c in t.checks)) if t.checks else "none",
            "; ".join(t.corrections) or "—",
            _path(t.project or "—"),
            "yes" if t.synthetic else "",
        ]
        for t in listed.tasks
    ]
    by_task: dict[str, int] = defaultdict(int)
    by_occurrence: dict[str, int] = defaultdict(int)
    for t in listed.tasks:
        by_task[t.split or "unscored"] += 1
        for o in t.occurrences:
            by_occurrence[_role(t, o)] += 1
    shown = f"{listed.total} tasks" + (
        f" (the first {len(listed.tasks)} shown)" if listed.total > len(listed.tasks) else ""
    )
    head = (
        '<p id="split-summary">'
        + esc(
            f"{shown}; by task: "
            + (", ".join(f"{k} {v}" for k, v in sorted(by_task.items())) or "none")
            + f"; {sum(by_occurrence.values())} occurrences: "
            + (", ".join(f"{r} {by_occurrence[r]}" for r in ROLES if by_occurrence[r]) or "none")
        )
        + "</p><p class=muted>"
        + esc(HELD_OUT)
        + ".</p>"
    )
    occurrences = []
    for t in listed.tasks:
        for i, o in enumerate(t.occurrences):
            sid = o.get("session_id") or ""
            if o.get("agent") is None:
                session: Any = f"{sid} (no longer stored)"
            else:
                anchor = f"#m{o['message_id']}" if o.get("message_id") is not None else ""
                session = link(Html(f"{url('sessions', sid)}{anchor}"), sid)
            occurrences.append(
                [
                    Html(f'<a id="occ-{esc(t.id)}" href="#task-{esc(t.id)}">{esc(t.id)}</a>')
                    if i == 0
                    else link(Html(f"#task-{esc(t.id)}"), t.id),
                    o.get("when") or "—",
                    status(_role(t, o)),
                    session,
                    o.get("agent") or "—",
                    _path(o.get("project") or "—"),
                    "yes" if o.get("corrected") else "",
                    o.get("prompt") or "",
                    o.get("note") or "",
                ]
            )
    body = (
        head
        + _section(
            "Tasks",
            table(
                [
                    "id",
                    "split",
                    "occurrences",
                    "intent",
                    "checks",
                    "corrections",
                    "project",
                    "synthetic",
                ],
                rows,
            ),
        )
        + _section(
            "Occurrences",
            table(
                [
                    "task",
                    "when",
                    "split",
                    "session",
                    "agent",
                    "project",
                    "corrected",
                    "prompt",
                    "note",
                ],
                occurrences,
            ),
        )
    )
    return page("Tasks", body, active="/tasks")


# ---------------------------------------------------------------------------- search
def _snippet(text: str) -> Html:
    """A search snippet with its ``[match]`` marks as ``<mark>``."""
    out = []
    for i, piece in enumerate(re.split(r"\[([^\[\]]*)\]", text)):
        out.append(f"<mark>{esc(piece)}</mark>" if i % 2 else str(esc(piece)))
    return Html("".join(out))


def search(svc: Service, query: str, agent: str | None) -> str:
    from skillopt_sleep.config import KNOWN_SOURCES

    options = '<option value="">every agent</option>' + "".join(
        f'<option value="{esc(a)}"{" selected" if a == agent else ""}>{esc(a)}</option>'
        for a in KNOWN_SOURCES
    )
    form = (
        '<form method="get" action="/search" class="inline">'
        f'<input type="search" name="q" value="{esc(query)}" placeholder="words in your sessions" '
        f'aria-label="query"><select name="agent" aria-label="agent">{options}</select>'
        '<button type="submit">Search</button></form>'
    )
    body = form
    if query.strip():
        result = svc.search(query, agent=agent or None, limit=100)
        rows = [
            [
                link(Html(f"{url('sessions', h.session_id)}#m{h.message_id}"), h.session_id),
                h.agent,
                h.role,
                h.timestamp or "—",
                _snippet(h.snippet),
                _path(h.project or "—"),
            ]
            for h in result.hits
        ]
        body += f"<p>{len(rows)} matches</p>" + table(
            ["session", "agent", "role", "when", "match", "project"], rows
        )
    return page("Search", body, active="/search")


def session(svc: Service, session_id: str) -> str:
    s = svc.session(session_id)
    head = kv(
        [
            ("agent", s.agent),
            ("project", _path(s.project or "—")),
            ("started", s.started_at or "—"),
            ("updated", s.updated_at or "—"),
            ("model", s.model or "—"),
            ("messages", len(s.messages)),
        ]
    )
    msgs = "".join(
        f'<div class="msg {esc(m.role)}" id="m{m.id}"><div class="head">#{m.seq} {esc(m.role)}'
        f"{' · ' + esc(m.kind) if m.kind else ''}{' · ' + esc(m.timestamp) if m.timestamp else ''}"
        f"{' · tools: ' + esc(', '.join(m.tool_names)) if m.tool_names else ''}</div>"
        f"<pre>{esc(m.text)}</pre></div>"
        for m in s.messages
    )
    return page(f"Session {s.title or s.id}", _section("Session", head) + msgs, active="/search")


# ---------------------------------------------------------------------------- nights
def nights(svc: Service, csrf: str = "", flash: Flash = None) -> str:
    rows = [
        [
            link(url("nights", night_label(n.id)), f"#{night_label(n.id)}"),
            status(n.status),
            n.trigger or "—",
            n.started_at or "—",
            n.finished_at or "—",
            f"{score(n.val_before)} → {score(n.val_after)}",
            f"{score(n.test_before)} → {score(n.test_after)}",
            number(n.calls),
            _proposal_link(n.proposal_id),
            n.error or n.summary.reason or "",
        ]
        for n in svc.nights(HISTORY_NIGHTS)
    ]
    body = table(
        [
            "night",
            "status",
            "trigger",
            "started",
            "finished",
            "val",
            "test",
            "calls",
            "proposal",
            "why",
        ],
        rows,
        num=(7,),
    )
    if csrf:
        body = Html(start_night_form(svc, csrf) + body)
    return page("Nights", body, active="/nights", flash=flash)


#: seconds between reloads of a running night's page
RUNNING_REFRESH = 2


def night(svc: Service, night_id: int, flash: Flash = None) -> str:
    n = svc.night(night_id)
    s = n.summary
    info: list[tuple[str, Any]] = [
        ("status", status(n.status)),
        ("trigger", n.trigger or "—"),
        ("started", n.started_at or "—"),
        ("finished", n.finished_at or "—"),
        ("dry run", "yes" if n.dry_run else "no"),
        ("project", _path(n.project or "every project")),
        ("document", _path(n.target_path or "—")),
        (
            "tasks",
            f"{s.tasks} mined, {s.scorable} scorable: train {s.train}, val {s.val}, test {s.test}",
        ),
        ("val", f"{score(n.val_before)} → {score(n.val_after)}"),
        ("test", f"{score(n.test_before)} → {score(n.test_after)}"),
        (
            "model calls",
            f"{number(n.calls)} (+{number(n.cached_calls)} cached), {number(n.input_tokens)} in / "
            f"{number(n.output_tokens)} out tokens, {number(n.seconds)} s",
        ),
        ("proposal", _proposal_link(n.proposal_id)),
    ]
    if s.edits:
        e = s.edits
        info.append(
            (
                "edits",
                f"{e.applied} applied, {e.rejected} rejected, {e.unmatched} unmatched, "
                f"{e.unverified} unverified",
            )
        )
    for label, text in (
        ("error", n.error),
        ("why", s.reason),
        ("warning", s.warning),
        ("test", s.test_note),
        ("unverified", s.unverified),
        ("stopped", s.stopped),
    ):
        if text:
            info.append((label, text))
    parts = [_section("Night", kv(info))]
    if s.blocks:  # the default night over a shared memory file: a block (a proposal) each
        parts.append(
            _section(
                "Blocks",
                table(
                    ["block", "status", "proposal", "occurrences", "val", "test", "why"],
                    [
                        [
                            _path(b.section) if b.section else "every project",
                            status(b.status),
                            _proposal_link(b.proposal_id),
                            f"{b.scorable} tasks: train {b.train}, val {b.val}, test {b.test}",
                            f"{score(b.val_before)} → {score(b.val_after)}",
                            f"{score(b.test_before)} → {score(b.test_after)}",
                            b.reason or "",
                        ]
                        for b in s.blocks
                    ],
                ),
            )
        )
    progress = svc.progress(night_id)
    if progress:
        parts.append(
            _section("Progress", f'<pre class="block">{esc(chr(10).join(progress))}</pre>')
        )
    log = svc.night_log(night_id=night_id)
    parts.append(
        _section(
            "Night log",
            f'<pre class="block" id="night-log">{esc(log)}</pre>'
            if log
            else "<p class=muted>no log for this night (nights before logs were kept have "
            "none; the daemon's shared log: <code>skillopt-sleep logs</code>)</p>",
        )
    )
    return page(
        f"Night #{night_label(n.id)}",
        "".join(parts),
        active="/nights",
        flash=flash,
        refresh=RUNNING_REFRESH if n.status == "running" else None,
    )


def error(title: str, message: str) -> str:
    """A page that says what went wrong, in one line."""
    return page(title, f'<div class="flash bad" role="alert">{esc(message)}</div>')
