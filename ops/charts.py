"""Charts drawn on the server as SVG: nothing for a browser to fetch, nothing that
needs the network, crisp at any size on a wall screen. Each point of a chart is an
element with the class ``point`` and a ``<title>`` (the browser's tooltip)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 44, 10, 12, 26


@dataclass(frozen=True)
class Series:
    name: str
    css: str  # a class that gives the colour (dashboard.css), light and dark alike
    values: Sequence[float | None]  # one per bucket; None: no data there


def nice_ceiling(value: float) -> float:
    """The axis' top: 1, 2 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)


def _number(value: float) -> str:
    if value >= 10 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _frame(ident: str, top: float, labels: Sequence[tuple[float, str]], unit: str) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg class="chart" data-chart="{escape(ident)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'preserveAspectRatio="none" role="img" aria-label="{escape(unit)}">'
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - fraction)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_number(top * fraction)}</text>'
        )
    for x, text in labels:
        parts.append(f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="middle">{escape(text)}</text>')
    return parts


def _time_labels(buckets: Sequence[dt.datetime], every: int, step: float, fmt: str) -> list[tuple[float, str]]:
    return [
        (LEFT + step * (index + 0.5), moment.strftime(fmt))
        for index, moment in enumerate(buckets)
        if index % every == 0
    ]


def stacked_bars(
    *,
    ident: str,
    buckets: Sequence[dt.datetime],
    series: Sequence[Series],
    label_every: int,
    label_format: str = "%H:%M",
    unit: str = "jobs per minute",
    bucket_text: str = "%H:%M",
) -> SafeString:
    """One stacked bar per bucket (a ``point``), the series stacked in order."""
    totals = [sum(s.values[i] or 0 for s in series) for i in range(len(buckets))]
    top = nice_ceiling(max(totals, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(1, len(buckets))
    gap = min(2.0, step * 0.2)
    parts = _frame(ident, top, _time_labels(buckets, label_every, step, label_format), unit)
    for index, moment in enumerate(buckets):
        x = LEFT + index * step
        tip = ", ".join(f"{_number(s.values[index] or 0)} {s.name}" for s in series)
        parts.append(
            f'<g class="point" data-total="{totals[index]:g}"><title>{escape(moment.strftime(bucket_text))} UTC: '
            f"{escape(tip)} ({escape(unit)})</title>"
        )
        parts.append(
            f'<rect class="hit" x="{x:.2f}" y="{TOP}" width="{step:.2f}" height="{plot_h}"/>'
        )  # the whole column answers the pointer
        base = 0.0
        for s in series:
            value = s.values[index] or 0
            if value <= 0:
                continue
            height = plot_h * value / top
            y = TOP + plot_h * (1 - (base + value) / top)
            parts.append(
                f'<rect class="{s.css}" x="{x + gap / 2:.2f}" y="{y:.2f}" width="{max(0.5, step - gap):.2f}" '
                f'height="{height:.2f}"/>'
            )
            base += value
        parts.append("</g>")
    parts.append("</svg>")
    return mark_safe("".join(parts))


def lines(
    *,
    ident: str,
    buckets: Sequence[dt.datetime],
    series: Sequence[Series],
    label_every: int,
    label_format: str = "%H:%M",
    unit: str = "jobs",
) -> SafeString:
    """A line per series over the buckets; a bucket with no data breaks the line.
    Each bucket that has data is a ``point``."""
    values = [v for s in series for v in s.values if v is not None]
    top = nice_ceiling(max(values, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(1, len(buckets))
    parts = _frame(ident, top, _time_labels(buckets, label_every, step, label_format), unit)
    for s in series:
        path, pen_down = [], False
        for index, value in enumerate(s.values):
            if value is None:
                pen_down = False
                continue
            x, y = LEFT + step * (index + 0.5), TOP + plot_h * (1 - value / top)
            path.append(f"{'L' if pen_down else 'M'}{x:.2f},{y:.2f}")
            pen_down = True
        if path:
            parts.append(f'<path class="line {s.css}" d="{" ".join(path)}"/>')
    for index, moment in enumerate(buckets):
        present = [(s, s.values[index]) for s in series if s.values[index] is not None]
        if not present:
            continue
        x = LEFT + step * (index + 0.5)
        tip = ", ".join(f"{_number(v or 0)} {s.name}" for s, v in present)
        parts.append(f'<g class="point"><title>{escape(moment.strftime("%H:%M"))} UTC: {escape(tip)}</title>')
        parts.append(f'<rect class="hit" x="{x - step / 2:.2f}" y="{TOP}" width="{step:.2f}" height="{plot_h}"/>')
        for s, v in present:
            y = TOP + plot_h * (1 - (v or 0) / top)
            parts.append(f'<circle class="dot {s.css}" cx="{x:.2f}" cy="{y:.2f}" r="2.2"/>')
        parts.append("</g>")
    parts.append("</svg>")
    return mark_safe("".join(parts))
