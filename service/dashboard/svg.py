"""The dashboard's charts: what each plots (a :class:`Chart`), as server-rendered SVG or CSV.

Every chart names its quantity and draws a numeric axis with ticks; no external assets.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from service.core.csv_safety import SafeWriter

WIDTH, ROW, PAD = 600, 26, 120
PLANE = (240, 60, 44)  # height, left margin, bottom margin of x-y charts


@dataclass(frozen=True)
class Chart:
    """One chart's data: ``rows`` are ``(label, estimate, low, high, ..., reason)`` (interval; the reason
    is shown where the estimate is undefined),
    ``(x, y)`` (line), ``(label, done, target)`` (bars) or ``(x, y, ...)`` (scatter: points, with ``marks`` as
    horizontal lines); ``columns`` name them in the CSV."""

    id: str
    kind: str
    title: str
    x_label: str
    y_label: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    marks: tuple[tuple[float, str], ...] = ()
    y_range: tuple[float, float] | None = None
    target: float | None = None


def ticks(low: float, high: float, *, count: int = 5) -> list[float]:
    """Round tick values covering ``[low, high]``: steps of 1, 2 or 5 times a power of ten."""
    if not high > low:
        return [low]
    raw = (high - low) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9)
    return [round(k * step, 12) for k in range(first, math.floor(high / step + 1e-9) + 1)]


def chart_svg(chart: Chart) -> str:
    """The chart as a standalone SVG element (its ``id`` is the chart's)."""
    if chart.kind == "interval":
        return _interval_svg(chart)
    if chart.kind == "line":
        return _line_svg(chart)
    if chart.kind == "band":
        return _band_svg(chart)
    if chart.kind == "scatter":
        return _scatter_svg(chart)
    return _bars_svg(chart)


def chart_csv(chart: Chart) -> str:
    """The chart's rows as CSV under its column names (undefined values empty; formulas neutralised)."""
    out = io.StringIO()
    writer = SafeWriter(out, lineterminator="\n")
    writer.writerow(chart.columns)
    writer.writerows(["" if v is None else v for v in row] for row in chart.rows)
    return out.getvalue()


def _open(chart: Chart, height: float) -> list[str]:
    return [
        f'<svg id="{escape(chart.id)}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" role="img" font-family="sans-serif">'
        f'<title>{escape(chart.title)}</title><rect width="100%" height="100%" fill="#fff"/>'
    ]


def _x_axis(
    parts: list[str],
    low: float,
    high: float,
    x: Callable[[float], float],
    y: float,
    label: str,
    *,
    integer: bool = False,
) -> None:
    parts.append(f'<line class="axis" x1="{x(low):.1f}" x2="{x(high):.1f}" y1="{y}" y2="{y}" stroke="#555"/>')
    for t in ticks(low, high):
        if integer and t != int(t):
            continue
        parts.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{y}" y2="{y + 4}" stroke="#555"/>'
            f'<text class="tick" x="{x(t):.1f}" y="{y + 15}" font-size="10" text-anchor="middle">{t:g}</text>'
        )
    parts.append(
        f'<text x="{(x(low) + x(high)) / 2:.1f}" y="{y + 30}" font-size="11" '
        f'text-anchor="middle">{escape(label)}</text>'
    )


def _interval_svg(chart: Chart) -> str:
    values = [v for row in chart.rows for v in row[1:4] if v is not None] + [m for m, _ in chart.marks]
    low, high = (min(values), max(values)) if values else (-1.0, 1.0)
    span = (high - low) or 1.0
    low, high = low - 0.08 * span, high + 0.08 * span
    top = 20  # the marks' labels
    axis_y = top + ROW * len(chart.rows) + 6
    height = axis_y + 40

    def x(value: float) -> float:
        return PAD + (value - low) / (high - low) * (WIDTH - PAD - 20)

    parts = _open(chart, height)
    for value, label in chart.marks:
        # Labels of negative marks sit left of their line, the others right: -epsilon and 0 never overlap.
        side, anchor = (-3, "end") if value < 0 else (3, "start")
        parts.append(
            f'<line class="mark" x1="{x(value):.1f}" x2="{x(value):.1f}" y1="{top - 4}" y2="{axis_y}" '
            f'stroke="#999" stroke-dasharray="4 3"/><text x="{x(value) + side:.1f}" y="{top - 6}" '
            f'font-size="10" fill="#555" text-anchor="{anchor}">{escape(label)}</text>'
        )
    for k, (label, est, lo, hi, *rest) in enumerate(chart.rows):
        y = top + ROW * k + ROW // 2
        parts.append(f'<text x="4" y="{y + 4}" font-size="12">{escape(str(label))[:18]}</text>')
        if lo is not None and hi is not None:
            parts.append(
                f'<line class="ci" x1="{x(lo):.1f}" x2="{x(hi):.1f}" y1="{y}" y2="{y}" '
                'stroke="#729fcf" stroke-width="4" stroke-linecap="round"/>'
            )
        if est is not None:
            parts.append(f'<circle class="estimate" cx="{x(est):.1f}" cy="{y}" r="5" fill="#204a87"/>')
        else:
            why = f": {rest[-1]}" if rest and rest[-1] else ""
            parts.append(
                f'<text x="{PAD}" y="{y + 4}" font-size="10" fill="#a40000">{escape(("undefined" + why)[:80])}</text>'
            )
    _x_axis(parts, low, high, x, axis_y, chart.x_label)
    parts.append("</svg>")
    return "".join(parts)


def _plane(
    chart: Chart, xs: tuple[float, float], ys: tuple[float, float], *, integer_x: bool, below: float = 0
) -> tuple[list[str], Callable[[float], float], Callable[[float], float]]:
    """An x-y chart's opened SVG with both axes drawn (``below`` pixels left free under them), and its
    x and y pixel maps."""
    (x0, x1), (y0, y1) = xs, ys
    height, left, bottom = PLANE
    parts = _open(chart, height + below)

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (WIDTH - left - 20)

    def py(y: float) -> float:
        return height - bottom - (y - y0) / (y1 - y0) * (height - bottom - 10)

    parts.append(f'<line class="axis" x1="{left}" x2="{left}" y1="10" y2="{height - bottom}" stroke="#555"/>')
    for t in ticks(y0, y1):
        parts.append(
            f'<line x1="{left - 4}" x2="{left}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#555"/>'
            f'<text class="tick" x="{left - 6}" y="{py(t) + 4:.1f}" font-size="10" text-anchor="end">{t:g}</text>'
        )
    parts.append(
        f'<text x="12" y="{(height - bottom) / 2:.0f}" font-size="11" '
        f'transform="rotate(-90 12 {(height - bottom) / 2:.0f})" text-anchor="middle">{escape(chart.y_label)}</text>'
    )
    _x_axis(parts, x0, x1, px, height - bottom, chart.x_label, integer=integer_x)
    return parts, px, py


def _line_svg(chart: Chart) -> str:
    left = PLANE[1]
    shown = [(row[0], row[1]) for row in chart.rows if row[1] is not None]
    if not shown:
        return "".join(_open(chart, 30)) + '<text x="4" y="20" font-size="12">no data yet</text></svg>'
    xs = [x for x, _ in shown] + [m for m, _ in chart.marks]
    ys = [y for _, y in shown] + ([chart.target] if chart.target is not None else [])
    x0, x1 = min(xs), max(xs)
    if x1 <= x0:
        x0, x1 = x0 - 1, x1 + 1
    if chart.marks:  # room right of a mark at the last point for its line to show
        x1 += 0.03 * (x1 - x0)
    y0, y1 = chart.y_range or (min(ys), max(ys))
    if y1 <= y0:
        y0, y1 = y0 - 0.05, y1 + 0.05
    parts, px, py = _plane(chart, (x0, x1), (y0, y1), integer_x=all(float(x).is_integer() for x in xs))
    if chart.target is not None:
        parts.append(
            f'<line class="target" x1="{left}" x2="{WIDTH - 20}" y1="{py(chart.target):.1f}" '
            f'y2="{py(chart.target):.1f}" stroke="#cc0000" stroke-dasharray="5 3"/>'
            f'<text x="{left + 4}" y="{py(chart.target) - 4:.1f}" font-size="10" fill="#cc0000">'
            f"target {chart.target:g}</text>"
        )
    for value, label in chart.marks:  # vertical marks: the plan's overlap on the curve, say
        anchor, side = ("end", -3) if px(value) > (left + WIDTH) / 2 else ("start", 3)
        parts.append(
            f'<line class="mark" x1="{px(value):.1f}" x2="{px(value):.1f}" y1="10" y2="{PLANE[0] - PLANE[2]}" '
            f'stroke="#75507b" stroke-width="1.5" stroke-dasharray="6 3"/><text x="{px(value) + side:.1f}" '
            f'y="{PLANE[0] - PLANE[2] - 6}" font-size="10" fill="#75507b" text-anchor="{anchor}">{escape(label)}</text>'
        )
    path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in shown)
    parts.append(f'<polyline class="series" points="{path}" fill="none" stroke="#204a87" stroke-width="2"/>')
    parts.extend(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#204a87"/>' for x, y in shown)
    parts.append("</svg>")
    return "".join(parts)


def _bars_svg(chart: Chart) -> str:
    rows: Sequence[tuple[str, int, int]] = chart.rows
    high = max([t for _, _, t in rows] + [d for _, d, _ in rows] + [1])
    axis_y = ROW * (len(rows) + 1)
    height = axis_y + 40

    def x(value: float) -> float:
        return PAD + value / high * (WIDTH - PAD - 80)

    parts = _open(chart, height)
    for k, (label, done, target) in enumerate(rows):
        y = ROW * (k + 1)
        parts.append(
            f'<text x="4" y="{y + 4}" font-size="12">{escape(str(label))[:18]}</text>'
            f'<rect x="{PAD}" y="{y - 8}" width="{x(target) - PAD:.1f}" height="16" fill="#eee"/>'
            f'<rect class="done" x="{PAD}" y="{y - 8}" width="{x(min(done, high)) - PAD:.1f}" height="16" '
            f'fill="#4e9a06"/><text x="{x(target) + 4:.1f}" y="{y + 4}" font-size="11">{done} / {target}</text>'
        )
    _x_axis(parts, 0, high, x, axis_y, chart.x_label, integer=True)
    parts.append("</svg>")
    return "".join(parts)


BAND_COLOURS = ("#3465a4", "#cc0000", "#4e9a06", "#75507b", "#c17d11", "#555753")
BAND_DASHES = ("", "7 3", "2 2", "9 3 2 3", "4 4", "1 3")
"""Each band's outline pattern (with its colour): overlapping bands stay apart where their tints mix."""
LEGEND_PER_ROW, LEGEND_ROW = 4, 16  # a band chart's legend entries per row, and a row's height in pixels


def _band_svg(chart: Chart) -> str:
    """One band per series: rows ``(series, x, ..., low, high)`` in x order, with marks; each drawn as a faint
    tint between its two outlines (a looks at the same x keeps the last), so overlapping bands stay readable."""
    left = PLANE[1]
    if not chart.rows:
        return "".join(_open(chart, 30)) + '<text x="4" y="20" font-size="12">no data yet</text></svg>'
    xs = [row[1] for row in chart.rows]
    ys = [v for row in chart.rows for v in row[3:5]] + [m for m, _ in chart.marks]
    x0, x1 = min(xs), max(xs)
    if x1 <= x0:
        x0, x1 = x0 - 1, x1 + 1
    series = list(dict.fromkeys(row[0] for row in chart.rows))
    legend_rows = -(-len(series) // LEGEND_PER_ROW)
    parts, px, py = _plane(chart, (x0, x1), (min(ys), max(ys)), integer_x=True, below=LEGEND_ROW * legend_rows)
    parts.extend(
        f'<line class="mark" x1="{left}" x2="{WIDTH - 20}" y1="{py(value):.1f}" y2="{py(value):.1f}" '
        'stroke="#999" stroke-dasharray="4 3"/>'
        for value, _ in chart.marks
    )
    for k, name in enumerate(series):
        band = list({row[1]: row for row in chart.rows if row[0] == name}.values())
        colour, dash = BAND_COLOURS[k % len(BAND_COLOURS)], BAND_DASHES[k % len(BAND_DASHES)]
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        upper = " ".join(f"{px(r[1]):.1f},{py(r[4]):.1f}" for r in band)
        lower = " ".join(f"{px(r[1]):.1f},{py(r[3]):.1f}" for r in band)
        edge = " ".join(f"{px(r[1]):.1f},{py(r[3]):.1f}" for r in reversed(band))
        parts.append(
            f'<polygon class="band" points="{upper} {edge}" fill="{colour}" fill-opacity="0.05" stroke="none">'
            f"<title>{escape(str(name))}</title></polygon>"
        )
        parts.extend(
            f'<polyline class="band-edge" points="{points}" fill="none" stroke="{colour}" stroke-width="1.8"{dashed}/>'
            for points in (upper, lower)
        )
        # the legend sits under the x axis, where no band is drawn
        row, column = divmod(k, LEGEND_PER_ROW)
        x, y = left + column * (WIDTH - left) / LEGEND_PER_ROW, PLANE[0] + LEGEND_ROW * row + 4
        parts.append(
            f'<g class="legend"><rect x="{x:.0f}" y="{y:.0f}" width="18" height="10" fill="{colour}" '
            f'fill-opacity="0.05" stroke="{colour}" stroke-width="1.8"{dashed}/><text x="{x + 22:.0f}" '
            f'y="{y + 9:.0f}" font-size="11">{escape(str(name))[:18]}</text></g>'
        )
    # The marks' labels go at the left, where the sequences are widest (their edges converge on 0 to the right),
    # over the bands on a white halo. Labels of negative marks sit below their line, the others above: -epsilon
    # and 0 never overlap.
    parts.extend(
        f'<text class="mark-label" x="{left + 4}" y="{py(value) + (11 if value < 0 else -3):.1f}" font-size="10" '
        f'fill="#555" stroke="#fff" stroke-width="3" paint-order="stroke">{escape(label)}</text>'
        for value, label in chart.marks
    )
    parts.append("</svg>")
    return "".join(parts)


def _scatter_svg(chart: Chart) -> str:
    """Points ``(x, y)`` and each mark as a labelled horizontal line across the plane (a Bland-Altman plot: the
    bias and the limits of agreement); the y range covers the points and the marks."""
    left = PLANE[1]
    if not chart.rows:
        return "".join(_open(chart, 30)) + '<text x="4" y="20" font-size="12">no data yet</text></svg>'
    xs, ys = [row[0] for row in chart.rows], [row[1] for row in chart.rows] + [m for m, _ in chart.marks]
    x0, x1 = min(xs), max(xs)
    if x1 <= x0:
        x0, x1 = x0 - 1, x1 + 1
    y0, y1 = min(ys), max(ys)
    if y1 <= y0:
        y0, y1 = y0 - 1, y1 + 1
    pad_x, pad_y = 0.04 * (x1 - x0), 0.08 * (y1 - y0)
    parts, px, py = _plane(chart, (x0 - pad_x, x1 + pad_x), (y0 - pad_y, y1 + pad_y), integer_x=False)
    parts.extend(
        f'<circle class="point" cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="#204a87" fill-opacity="0.45"/>'
        for x, y, *_ in chart.rows
    )
    for value, label in chart.marks:
        bias = label.startswith("bias")
        colour, dash = ("#cc0000", "") if bias else ("#75507b", ' stroke-dasharray="6 3"')
        parts.append(
            f'<line class="mark" x1="{left}" x2="{WIDTH - 20}" y1="{py(value):.1f}" y2="{py(value):.1f}" '
            f'stroke="{colour}" stroke-width="1.5"{dash}/><text x="{WIDTH - 22}" y="{py(value) - 4:.1f}" '
            f'font-size="10" fill="{colour}" text-anchor="end">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
