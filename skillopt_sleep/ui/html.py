"""HTML building blocks the templates call: escaping, URLs, numbers, the side-by-side diff.

Every value from the service is escaped with :func:`esc` (the templates' ``finalize``); markup
built here is a :class:`Html` (a ``str`` that :func:`esc` passes through), so a page cannot be
injected into by a session's text, a task's intent or a file path.
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote

NAV = [
    ("/", "Overview"),
    ("/history", "Score history"),
    ("/proposals", "Proposals"),
    ("/tasks", "Tasks"),
    ("/search", "Search"),
    ("/nights", "Nights"),
]


class Html(str):
    """Markup that is already safe (built here from escaped parts); the templates pass it
    through (``__html__``)."""

    def __html__(self) -> str:
        return self


def esc(value: Any) -> Html:
    """``value`` as HTML text (``None`` is empty); :class:`Html` (and any markup with
    ``__html__``: a template's macro) passes through."""
    if isinstance(value, Html):
        return value
    if hasattr(value, "__html__"):
        return Html(value.__html__())
    return Html(html.escape("" if value is None else str(value), quote=True))


def url(*segments: str, **query: Any) -> Html:
    """A path from URL-quoted ``segments`` and a query (None values left out), escaped."""
    path = "/" + "/".join(quote(str(s), safe="") for s in segments)
    q = "&".join(f"{quote(k)}={quote(str(v), safe='')}" for k, v in query.items() if v is not None)
    return esc(path + ("?" + q if q else ""))


def score(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def number(x: float | None) -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:,.2f}"
    return f"{int(x):,}"


# ------------------------------------------------------------------------------ the diff
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def side_by_side(diff: str) -> Html:
    """A unified diff as a two-column table: removed lines left (red), added right (green),
    context on both sides, with line numbers; a run of removals is paired with the run of
    additions that follows it."""
    rows: list[str] = []
    old_no = new_no = 0
    dels: list[tuple[int, str]] = []
    adds: list[tuple[int, str]] = []

    def side(no: int | None, text: str | None, kind: str) -> str:
        if text is None:
            return '<td class="ln"></td><td class="empty"></td>'
        return f'<td class="ln">{no}</td><td class="{kind}">{esc(text)}</td>'

    def flush() -> None:
        for i in range(max(len(dels), len(adds))):
            d = dels[i] if i < len(dels) else None
            a = adds[i] if i < len(adds) else None
            rows.append(
                "<tr>"
                + side(d[0] if d else None, d[1] if d else None, "del")
                + side(a[0] if a else None, a[1] if a else None, "add")
                + "</tr>"
            )
        dels.clear()
        adds.clear()

    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ")) and not (dels or adds) and not rows:
            continue
        m = _HUNK.match(line)
        if m:
            flush()
            old_no, new_no = int(m.group(1)), int(m.group(2))
            rows.append(f'<tr class="hunk"><td colspan="4">{esc(line)}</td></tr>')
        elif line.startswith("\\"):
            continue  # "\ No newline at end of file"
        elif line.startswith("-"):
            dels.append((old_no, line[1:]))
            old_no += 1
        elif line.startswith("+"):
            adds.append((new_no, line[1:]))
            new_no += 1
        else:
            flush()
            text = line[1:] if line.startswith(" ") else line
            rows.append("<tr>" + side(old_no, text, "ctx") + side(new_no, text, "ctx") + "</tr>")
            old_no += 1
            new_no += 1
    flush()
    if not rows:
        return Html('<p class="muted">no difference</p>')
    return Html(
        '<table class="diff"><thead><tr><th class="ln"></th><th>live file</th><th class="ln"></th><th>proposed</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )
