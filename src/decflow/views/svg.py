"""Inline SVG plots for the HTML report: plain markup strings, no script, no external resource.

Every mark carries the numbers it was drawn from as `data-*` attributes (exact `repr` of the
report's floats), so a reader or a test can check a plot against its report. Geometry is
linear in the value: a bar's height (or width) is value / axis maximum × plot size, and each
`<svg>` states its plot size in `data-plot-height` / `data-plot-width`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from decflow.gates.headline import number

COLORS = ("#3b6ea8", "#d9822b", "#5a9e5f", "#8e6bb3")
INK, GRID, MUTED, ALERT = "#222", "#d8d8d8", "#666", "#c23b3b"
CAUTION = "#b7791f"  # a gate not established (WARN), as the HTML pills show it
FONT = 'font-family="system-ui, sans-serif"'

# Vertical charts (reliability diagram, histogram).
WIDTH, HEIGHT = 440, 290
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 30, 46
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

# Horizontal bar charts.
H_LABEL, H_PLOT, H_NOTE = 170, 300, 110
BAR_H, ROW_GAP = 13, 10


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _n(value: float) -> str:
    """A coordinate, short and locale-free."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def data_attrs(values: Mapping[str, Any]) -> str:
    """`data-*` attributes; floats exact, None as empty."""
    parts = []
    for key, value in values.items():
        text = "" if value is None else repr(float(value)) if isinstance(value, float) else value
        parts.append(f'data-{key}="{esc(text)}"')
    return " ".join(parts)


def nice_max(value: float) -> float:
    """The smallest 1/2/5 × 10^k at or above `value` (1 for nothing to show)."""
    if not value or value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power + 1e-12:
            return step * power
    return 10 * power


def _open(width: int, height: int, title: str, kind: str, extra: str = "") -> str:
    return (
        f'<svg class="plot" data-plot="{esc(kind)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{esc(title)}" {extra}>'
        f"<title>{esc(title)}</title>"
        f'<text x="{LEFT}" y="18" {FONT} font-size="13" font-weight="600" fill="{INK}">'
        f"{esc(title)}</text>"
    )


def _text(x: float, y: float, body: str, *, size: int = 11, anchor: str = "start",
          fill: str = MUTED) -> str:
    return (
        f'<text x="{_n(x)}" y="{_n(y)}" {FONT} font-size="{size}" text-anchor="{anchor}" '
        f'fill="{fill}">{esc(body)}</text>'
    )


def _x(value: float) -> float:
    return LEFT + min(max(value, 0.0), 1.0) * PLOT_W


def _y(value: float, y_max: float) -> float:
    return TOP + PLOT_H * (1.0 - min(max(value / y_max, 0.0), 1.0))


def _frame(y_max: float, y_label: str, x_label: str, y_format: str = "g") -> str:
    """Axes, grid and tick labels of a vertical chart over confidence in [0, 1]."""
    parts = []
    for i in range(5):
        value = y_max * i / 4
        y = _y(value, y_max)
        parts.append(f'<line x1="{LEFT}" y1="{_n(y)}" x2="{LEFT + PLOT_W}" y2="{_n(y)}" '
                     f'stroke="{GRID}" stroke-width="1"/>')
        parts.append(_text(LEFT - 6, y + 4, format(value, y_format), anchor="end"))
    for i in range(6):
        x = _x(i / 5)
        parts.append(_text(x, TOP + PLOT_H + 15, f"{i / 5:g}", anchor="middle"))
    parts.append(f'<line x1="{LEFT}" y1="{TOP + PLOT_H}" x2="{LEFT + PLOT_W}" '
                 f'y2="{TOP + PLOT_H}" stroke="{INK}"/>')
    parts.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + PLOT_H}" '
                 f'stroke="{INK}"/>')
    parts.append(_text(LEFT + PLOT_W / 2, HEIGHT - 8, x_label, anchor="middle"))
    parts.append(
        f'<text transform="translate(12 {_n(TOP + PLOT_H / 2)}) rotate(-90)" {FONT} '
        f'font-size="11" text-anchor="middle" fill="{MUTED}">{esc(y_label)}</text>'
    )
    return "".join(parts)


def reliability_diagram(bins: Sequence[Mapping[str, Any]], title: str = "Reliability") -> str:
    """Accuracy per confidence bin (bars), the bin's mean confidence (tick) and the diagonal
    of perfect calibration; empty bins draw nothing."""
    parts = [
        _open(WIDTH, HEIGHT, title, "reliability", f'data-plot-height="{PLOT_H}"'),
        _frame(1.0, "accuracy", "confidence", ".2f"),
        f'<line x1="{_x(0)}" y1="{_n(_y(0, 1))}" x2="{_x(1)}" y2="{_n(_y(1, 1))}" '
        f'stroke="{MUTED}" stroke-dasharray="4 3"/>',
    ]
    for item in bins:
        if not item.get("count"):
            continue
        x0, x1 = _x(item["lower"]) + 1, _x(item["upper"]) - 1
        accuracy, confidence = item["accuracy"], item["mean_confidence"]
        height = PLOT_H * min(max(accuracy, 0.0), 1.0)
        attrs = data_attrs({"lower": item["lower"], "upper": item["upper"],
                            "count": item["count"], "accuracy": accuracy,
                            "mean-confidence": confidence})
        parts.append(
            f'<rect class="bar" {attrs} x="{_n(x0)}" y="{_n(TOP + PLOT_H - height)}" '
            f'width="{_n(x1 - x0)}" height="{_n(height)}" fill="{COLORS[0]}" '
            f'fill-opacity="0.8"/>'
        )
        y_conf = _y(confidence, 1.0)
        parts.append(f'<line class="mean-confidence" x1="{_n(x0)}" y1="{_n(y_conf)}" '
                     f'x2="{_n(x1)}" y2="{_n(y_conf)}" stroke="{ALERT}" stroke-width="2.5"/>')
        label_y = min(TOP + PLOT_H - height, y_conf) - 4
        parts.append(_text((x0 + x1) / 2, label_y, str(item["count"]), size=10, anchor="middle"))
    parts.append(_legend([(COLORS[0], "accuracy (bar; label = cases)"),
                          (ALERT, "mean confidence")], LEFT + 8, TOP + 12))
    parts.append("</svg>")
    return "".join(parts)


def histogram(
    counts: Sequence[int],
    edges: Sequence[tuple[float, float]],
    title: str = "Confidence histogram",
    threshold: float | None = None,
) -> str:
    """Cases per confidence bin; an optional dashed line at the confidence threshold."""
    # A multiple of 4 keeps the four grid steps on whole cases.
    y_max = float(4 * math.ceil(nice_max(max(counts, default=0)) / 4))
    parts = [
        _open(WIDTH, HEIGHT, title, "histogram",
              f'data-plot-height="{PLOT_H}" data-y-max="{esc(repr(float(y_max)))}"'),
        _frame(y_max, "cases", "confidence"),
    ]
    for count, (lower, upper) in zip(counts, edges, strict=True):
        x0, x1 = _x(lower) + 1, _x(upper) - 1
        height = PLOT_H * count / y_max
        attrs = data_attrs({"lower": lower, "upper": upper, "count": count})
        parts.append(
            f'<rect class="bar" {attrs} x="{_n(x0)}" y="{_n(TOP + PLOT_H - height)}" '
            f'width="{_n(x1 - x0)}" height="{_n(height)}" fill="{COLORS[2]}"/>'
        )
        if count:
            parts.append(_text((x0 + x1) / 2, TOP + PLOT_H - height - 4, str(count), size=10,
                               anchor="middle"))
    if threshold is not None:
        x = _x(threshold)
        parts.append(f'<line class="threshold" {data_attrs({"value": float(threshold)})} '
                     f'x1="{_n(x)}" y1="{TOP}" x2="{_n(x)}" y2="{TOP + PLOT_H}" '
                     f'stroke="{ALERT}" stroke-dasharray="4 3"/>')
        parts.append(_text(x - 4, TOP + 10, f"threshold {threshold:g}", anchor="end",
                           fill=ALERT))
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Bar:
    """One bar of a horizontal chart; `low`/`high` draw an interval whisker."""

    value: float | None
    low: float | None = None
    high: float | None = None
    note: str = ""


@dataclass(frozen=True)
class BarRow:
    label: str
    bars: tuple[Bar, ...]
    marker: float | None = None  # this row's own limit (e.g. a per-property threshold)


def hbar_chart(
    rows: Sequence[BarRow],
    series: Sequence[str],
    title: str,
    *,
    domain_max: float = 1.0,
    marker: float | None = None,
    marker_label: str = "",
    kind: str = "bars",
) -> str:
    """Horizontal bars, one group per row and one bar per series, on [0, domain_max].

    A value beyond the axis is drawn to the edge (its data attribute keeps the value);
    `marker` draws one dashed limit across all rows, `BarRow.marker` one per row.
    """
    group_h = BAR_H * len(series) + ROW_GAP
    legend_y = TOP + 8
    marker_y = legend_y + (18 if len(series) > 1 else 0)
    top = marker_y + (16 if marker is not None else 0) + 4
    height = top + group_h * len(rows) + 26
    width = H_LABEL + H_PLOT + H_NOTE
    extra = (f'data-plot-width="{H_PLOT}" '
             f'data-domain-max="{esc(repr(float(domain_max)))}"')
    parts = [_open(width, height, title, kind, extra)]
    if len(series) > 1:
        parts.append(_legend([(COLORS[i % len(COLORS)], name) for i, name in enumerate(series)],
                             LEFT, legend_y, horizontal=True))

    def x_of(value: float) -> float:
        return H_LABEL + H_PLOT * min(max(value / domain_max, 0.0), 1.0)

    bottom = top + group_h * len(rows)
    for i in range(5):
        value = domain_max * i / 4
        parts.append(f'<line x1="{_n(x_of(value))}" y1="{top - 4}" x2="{_n(x_of(value))}" '
                     f'y2="{bottom}" stroke="{GRID}"/>')
        parts.append(_text(x_of(value), bottom + 14, f"{value:.3g}", anchor="middle"))
    for r, row in enumerate(rows):
        y0 = top + r * group_h
        label = row.label if len(row.label) <= 26 else row.label[:25] + "…"
        parts.append(_text(H_LABEL - 8, y0 + BAR_H * len(series) / 2 + 4, label, size=11,
                           anchor="end", fill=INK))
        for s, (name, bar) in enumerate(zip(series, row.bars, strict=True)):
            parts.append(_hbar(bar, name, row.label, s, y0 + s * BAR_H, x_of))
        if row.marker is not None:
            x = x_of(row.marker)
            parts.append(f'<line class="row-marker" {data_attrs({"value": float(row.marker)})} '
                         f'x1="{_n(x)}" y1="{y0 - 2}" x2="{_n(x)}" '
                         f'y2="{_n(y0 + BAR_H * len(series) + 2)}" stroke="{ALERT}" '
                         f'stroke-width="2"/>')
    if marker is not None:
        x = x_of(marker)
        parts.append(f'<line class="marker" {data_attrs({"value": float(marker)})} '
                     f'x1="{_n(x)}" y1="{top - 6}" x2="{_n(x)}" y2="{bottom}" stroke="{ALERT}" '
                     f'stroke-dasharray="4 3" stroke-width="1.5"/>')
        parts.append(_text(x, marker_y + 8, marker_label, anchor="middle", fill=ALERT))
    parts.append(f'<line x1="{H_LABEL}" y1="{top - 4}" x2="{H_LABEL}" y2="{bottom}" '
                 f'stroke="{INK}"/>')
    parts.append("</svg>")
    return "".join(parts)


def _hbar(bar: Bar, series: str, row: str, index: int, y: float, x_of: Any) -> str:
    attrs = data_attrs({"series": series, "row": row, "value": bar.value, "low": bar.low,
                        "high": bar.high})
    color = COLORS[index % len(COLORS)]
    if bar.value is None:
        return (f'<rect class="bar" {attrs} x="{H_LABEL}" y="{_n(y + 1)}" width="0" '
                f'height="{BAR_H - 2}" fill="{color}"/>'
                + _text(H_LABEL + 4, y + BAR_H - 3, "n/a", size=10))
    x1 = x_of(bar.value)
    parts = [f'<rect class="bar" {attrs} x="{H_LABEL}" y="{_n(y + 1)}" '
             f'width="{_n(x1 - H_LABEL)}" height="{BAR_H - 2}" fill="{color}"/>']
    end = x1
    if bar.low is not None and bar.high is not None:
        lo, hi, mid = x_of(bar.low), x_of(bar.high), y + BAR_H / 2
        parts.append(
            f'<path class="interval" d="M{_n(lo)} {_n(mid)}H{_n(hi)}M{_n(lo)} {_n(mid - 4)}'
            f'V{_n(mid + 4)}M{_n(hi)} {_n(mid - 4)}V{_n(mid + 4)}" stroke="{INK}" '
            f'stroke-width="1.3" fill="none"/>'
        )
        end = max(end, hi)
    note = bar.note or number(bar.value)
    parts.append(_text(end + 5, y + BAR_H - 3, note, size=10))
    return "".join(parts)


def _legend(items: Sequence[tuple[str, str]], x: float, y: float, *,
            horizontal: bool = False) -> str:
    parts = []
    for color, label in items:
        parts.append(f'<rect x="{_n(x)}" y="{_n(y - 8)}" width="10" height="10" '
                     f'fill="{color}"/>')
        parts.append(_text(x + 14, y + 1, label, size=10))
        if horizontal:
            x += 24 + 6.2 * len(label)
        else:
            y += 14
    return "".join(parts)


@dataclass(frozen=True)
class SeriesPoint:
    """One window of a time-series chart: its value, band (`low`/`high`), status."""

    window: str
    value: float | None
    low: float | None = None
    high: float | None = None
    status: str = "pass"


SERIES_W, SERIES_H = 560, 220


def window_series(points: Sequence[SeriesPoint], title: str, *, limit: float | None = None,
                  alarm_from: str | None = None, alarm_label: str = "") -> str:
    """A gated metric window by window: a dot per window (amber where its gate was not
    established, red where it failed), its band as a whisker, the gate's limit as a dashed
    red line, and the windows from `alarm_from` on shaded (the alarm)."""
    plot_w, plot_h = SERIES_W - LEFT - RIGHT, SERIES_H - TOP - BOTTOM
    found = [v for p in points for v in (p.value, p.high) if v is not None]
    y_max = nice_max(max([*found, *([limit] if limit is not None else [])], default=0.0))
    step = plot_w / max(len(points), 1)

    def x_at(index: int) -> float:
        return LEFT + step * (index + 0.5)

    def y_at(value: float) -> float:
        return TOP + plot_h * (1.0 - min(max(value / y_max, 0.0), 1.0))

    parts = [_open(SERIES_W, SERIES_H, title, "window-series",
                   f'data-plot-height="{plot_h}" data-y-max="{esc(repr(float(y_max)))}"')]
    names = [p.window for p in points]
    if alarm_from in names:
        start = LEFT + step * names.index(alarm_from)
        parts.append(f'<rect class="alarm" {data_attrs({"since": alarm_from})} '
                     f'x="{_n(start)}" y="{TOP}" width="{_n(LEFT + plot_w - start)}" '
                     f'height="{plot_h}" fill="{ALERT}" fill-opacity="0.08"/>')
        parts.append(_text(start + 4, TOP + 12, alarm_label, fill=ALERT))
    for i in range(5):
        y = y_at(y_max * i / 4)
        parts.append(f'<line x1="{LEFT}" y1="{_n(y)}" x2="{LEFT + plot_w}" y2="{_n(y)}" '
                     f'stroke="{GRID}" stroke-width="1"/>')
        parts.append(_text(LEFT - 6, y + 4, f"{y_max * i / 4:g}", anchor="end"))
    if limit is not None:
        y = y_at(limit)
        parts.append(f'<line class="limit" {data_attrs({"value": float(limit)})} '
                     f'x1="{LEFT}" y1="{_n(y)}" x2="{LEFT + plot_w}" y2="{_n(y)}" '
                     f'stroke="{ALERT}" stroke-dasharray="4 3"/>')
    every = max(1, math.ceil(len(points) / 8))  # at most 8 window names under the axis
    for index, point in enumerate(points):
        x = x_at(index)
        if index % every == 0:
            parts.append(_text(x, TOP + plot_h + 15, point.window, size=9, anchor="middle"))
        if point.value is None:
            continue
        if point.low is not None and point.high is not None:
            parts.append(f'<line class="band" x1="{_n(x)}" y1="{_n(y_at(point.low))}" '
                         f'x2="{_n(x)}" y2="{_n(y_at(point.high))}" stroke="{MUTED}"/>')
        # red only where the gate failed: an undecided window is not a failing one
        color = {"pass": COLORS[0], "warn": CAUTION, "not_established": CAUTION}.get(
            point.status, ALERT)
        attrs = data_attrs({"window": point.window, "value": point.value, "low": point.low,
                            "high": point.high, "status": point.status})
        parts.append(f'<circle class="point" {attrs} cx="{_n(x)}" cy="{_n(y_at(point.value))}" '
                     f'r="3.5" fill="{color}"/>')
    parts.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" '
                 f'y2="{TOP + plot_h}" stroke="{INK}"/></svg>')
    return "".join(parts)
