"""Charts as inline SVG rendered on the server (no JavaScript).

Every point is a ``<circle class="pt">`` (every bar a ``<rect class="bar">``) carrying its
series, x label and exact value as ``data-series`` / ``data-x`` / ``data-y``, with a
``<title>`` tooltip, so what a chart shows can be read back (and is, by the browser tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from skillopt_sleep.ui.html import Html, esc

WIDTH, HEIGHT = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 28


@dataclass
class Series:
    """One line: a value (or None: not measured) per x label of the chart."""

    name: str
    values: list[float | None] = field(default_factory=list)


def _fmt(v: float) -> str:
    return f"{v:.3g}" if isinstance(v, float) and not v.is_integer() else f"{int(v):,}"


def _tick(v: float) -> str:
    """A y-axis label short enough for the room left of the axis (``4.92k``, ``1.2M``; never
    ``4.92e+03``, which the svg's edge clipped)."""
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.3g}{unit}"
    return _fmt(v)


def _ticks(y_max: float) -> list[float]:
    return [y_max * i / 4 for i in range(5)]


def _frame(y_max: float) -> list[str]:
    parts = []
    for t in _ticks(y_max):
        y = _y(t, y_max)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{esc(_tick(t))}</text>')
    parts.append(
        f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}"/>'
        f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" '
        f'y2="{HEIGHT - BOTTOM}"/>'
    )
    return parts


def _y(v: float, y_max: float) -> float:
    span = HEIGHT - TOP - BOTTOM
    return round(HEIGHT - BOTTOM - (v / y_max) * span, 1) if y_max else HEIGHT - BOTTOM


def _x(i: int, n: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return round(LEFT + span * (i + 0.5) / max(n, 1), 1)


def _labels(xs: Sequence[str]) -> list[str]:
    """The x labels, thinned to about a dozen (every point keeps its own in ``data-x``)."""
    n = len(xs)
    step = max(1, -(-n // 12))
    return [
        f'<text x="{_x(i, n)}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{esc(label)}</text>'
        for i, label in enumerate(xs)
        if i % step == 0
    ]


def _legend(names: Sequence[str]) -> str:
    return (
        '<div class="legend">'
        + "".join(f'<span><i class="s{i % 4}"></i>{esc(n)}</span>' for i, n in enumerate(names))
        + "</div>"
    )


def _figure(chart_id: str, title: str, svg: str, names: Sequence[str]) -> Html:
    return Html(
        f'<figure class="chart" id="{esc(chart_id)}"><figcaption>{esc(title)}</figcaption>'
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{esc(title)}">{svg}</svg>{_legend(names)}</figure>'
    )


def line_chart(
    chart_id: str, title: str, xs: Sequence[str], series: Sequence[Series], *, y_max: float = 0
) -> Html:
    """A line chart of ``series`` over the x labels ``xs`` (a None value is a gap); the y axis
    runs from 0 to ``y_max`` (0: the largest value)."""
    values = [v for s in series for v in s.values if v is not None]
    top = y_max or max(values, default=0) or 1
    parts = _frame(top)
    n = len(xs)
    parts += _labels(xs)
    for k, s in enumerate(series):
        cls = f"s{k % 4}"
        pts = [(i, v) for i, v in enumerate(s.values) if v is not None]
        if len(pts) > 1:
            line = " ".join(f"{_x(i, n)},{_y(v, top)}" for i, v in pts)
            parts.append(f'<polyline class="{cls}" points="{line}"/>')
        for i, v in pts:
            parts.append(
                f'<circle class="pt {cls}" r="4" cx="{_x(i, n)}" cy="{_y(v, top)}" '
                f'data-series="{esc(s.name)}" data-x="{esc(xs[i])}" data-y="{v!r}">'
                f"<title>{esc(s.name)} {esc(xs[i])}: {esc(_fmt(v))}</title></circle>"
            )
    return _figure(chart_id, title, "".join(parts), [s.name for s in series])


def bar_chart(
    chart_id: str, title: str, xs: Sequence[str], series: Sequence[Series], *, y_max: float = 0
) -> Html:
    """Grouped bars: for each x label one bar per series (None: no bar)."""
    values = [v for s in series for v in s.values if v is not None]
    top = y_max or max(values, default=0) or 1
    parts = _frame(top)
    n = len(xs)
    group = (WIDTH - LEFT - RIGHT) / max(n, 1)
    width = max(4.0, min(36.0, group * 0.8 / max(len(series), 1)))
    parts += _labels(xs)
    for i, label in enumerate(xs):
        start = _x(i, n) - width * len(series) / 2
        for k, s in enumerate(series):
            v = s.values[i] if i < len(s.values) else None
            if v is None:
                continue
            y = _y(v, top)
            parts.append(
                f'<rect class="bar s{k % 4}" x="{round(start + k * width, 1)}" y="{y}" '
                f'width="{round(width - 2, 1)}" height="{round(HEIGHT - BOTTOM - y, 1)}" '
                f'data-series="{esc(s.name)}" data-x="{esc(label)}" data-y="{v!r}">'
                f"<title>{esc(s.name)} {esc(label)}: {esc(_fmt(v))}</title></rect>"
            )
    return _figure(chart_id, title, "".join(parts), [s.name for s in series])
