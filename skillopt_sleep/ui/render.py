"""The dashboard's one Jinja environment: the templates in ``templates/`` (shipped in the wheel)
rendered with autoescaping.

Every ``{{ … }}`` is escaped by :func:`~skillopt_sleep.ui.html.esc` (``None`` shows as nothing;
markup a macro, a chart or the diff built passes through), so a session's text, a task's intent
or a file path cannot inject into a page; no template marks data ``|safe``.

A template's lines are joined without their leading indentation when it loads (the markup can be
laid out on lines there, the page is sent as one line as before): text that runs on must stay on
one line.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from jinja2.ext import Extension

from skillopt_sleep.results import night_label
from skillopt_sleep.ui.html import NAV, esc, number, score, side_by_side, url


class _JoinLines(Extension):
    """Each template line without its indentation, the lines joined with nothing."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return "".join(line.strip() for line in source.splitlines())


def section_id(title: str) -> str:
    """A card's id: ``sec-`` and its title, lower-cased, dashed."""
    return "sec-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def change(before: float | None, after: float | None) -> str:
    """``0.500 → 0.750`` (``—`` for a score not measured)."""
    return f"{score(before)} → {score(after)}"


def delta(before: float | None, after: float | None) -> str:
    return "—" if before is None or after is None else f"{after - before:+.3f}"


def percent(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def marks(snippet: str) -> list[str]:
    """A search snippet split at its ``[match]`` marks: every odd piece is a match."""
    return re.split(r"\[([^\[\]]*)\]", snippet)


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("skillopt_sleep.ui", "templates"),
        autoescape=True,
        finalize=esc,
        undefined=StrictUndefined,
        extensions=[_JoinLines],
    )
    env.globals.update(
        nav=NAV,
        url=url,
        score=score,
        number=number,
        change=change,
        delta=delta,
        percent=percent,
        marks=marks,
        section_id=section_id,
        night_label=night_label,
        side_by_side=side_by_side,
    )
    return env


def render(template: str, **context: Any) -> str:
    """The page ``template`` for ``context`` (``title``, ``active``, ``flash``, ``refresh`` for
    the layout, the page's own data)."""
    context = {"active": "", "flash": None, "refresh": None, **context}
    return environment().get_template(template).render(**context)
