"""Small server-rendered SVG charts for the dashboard (no external assets)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, ROW, PAD = 560, 26, 110


def _x(value: float, low: float, high: float, width: int = WIDTH - PAD - 20) -> float:
    return PAD + (value - low) / (high - low) * width if high > low else PAD


def interval_chart(
    chart_id: str, rows: Sequence[tuple[str, float | None, float | None, float | None]], *, marks: Sequence[tuple[float, str]]
) -> str:
    """Horizontal point-and-interval rows ``(label, estimate, low, high)`` with vertical reference marks."""
    values = [v for _, e, lo, hi in rows for v in (e, lo, hi) if v is not None] + [m for m, _ in marks]
    low, high = (min(values), max(values)) if values else (-1.0, 1.0)
    span = (high - low) or 1.0
    low, high = low - 0.1 * span, high + 0.1 * span
    height = ROW * (len(rows) + 1) + 10
    parts = [f'<svg id="{chart_id}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" role="img">']
    for value, label in marks:
        x = _x(value, low, high)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="4" y2="{height - 14}" stroke="#999" stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - 2}" font-size="10" text-anchor="middle">{escape(label)}</text>')
    for k, (label, est, lo, hi) in enumerate(rows):
        y = ROW * (k + 1)
        parts.append(f'<text x="4" y="{y + 4}" font-size="12">{escape(label)}</text>')
        if lo is not None and hi is not None:
            parts.append(f'<line class="ci" x1="{_x(lo, low, high):.1f}" x2="{_x(hi, low, high):.1f}" y1="{y}" y2="{y}" '
                         'stroke="#3465a4" stroke-width="3"/>')
        if est is not None:
            parts.append(f'<circle class="estimate" cx="{_x(est, low, high):.1f}" cy="{y}" r="5" fill="#204a87"/>')
        else:
            parts.append(f'<text x="{PAD}" y="{y + 4}" font-size="11" fill="#a40000">undefined</text>')
    parts.append("</svg>")
    return "".join(parts)


def line_chart(
    chart_id: str, points: Sequence[tuple[float, float | None]], *, x_label: str, y_label: str,
    y_range: tuple[float, float] | None = None, target: float | None = None,
) -> str:
    """A polyline of ``(x, y)`` points (undefined ``y`` skipped), with an optional horizontal target."""
    height, left, bottom = 220, 50, 30
    shown = [(x, y) for x, y in points if y is not None]
    parts = [f'<svg id="{chart_id}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" role="img">']
    if not shown:
        parts.append(f'<text x="{left}" y="{height / 2}" font-size="12">no data yet</text></svg>')
        return "".join(parts)
    xs = [x for x, _ in shown]
    ys = [y for _, y in shown] + ([target] if target is not None else [])
    x0, x1 = min(xs), max(xs)
    y0, y1 = y_range or (min(ys), max(ys))
    if y1 <= y0:
        y0, y1 = y0 - 0.05, y1 + 0.05

    def px(x: float) -> float:
        return left + ((x - x0) / (x1 - x0) if x1 > x0 else 0.5) * (WIDTH - left - 20)

    def py(y: float) -> float:
        return height - bottom - (y - y0) / (y1 - y0) * (height - bottom - 10)

    parts.append(f'<line x1="{left}" x2="{left}" y1="10" y2="{height - bottom}" stroke="#555"/>')
    parts.append(f'<line x1="{left}" x2="{WIDTH - 20}" y1="{height - bottom}" y2="{height - bottom}" stroke="#555"/>')
    for v in (y0, y1):
        parts.append(f'<text x="{left - 4}" y="{py(v) + 4:.1f}" font-size="10" text-anchor="end">{v:.2f}</text>')
    for v in (x0, x1):
        parts.append(f'<text x="{px(v):.1f}" y="{height - bottom + 14}" font-size="10" text-anchor="middle">{v:g}</text>')
    parts.append(f'<text x="{WIDTH / 2}" y="{height - 2}" font-size="11" text-anchor="middle">{escape(x_label)}</text>')
    parts.append(f'<text x="12" y="{height / 2}" font-size="11" transform="rotate(-90 12 {height / 2})" '
                 f'text-anchor="middle">{escape(y_label)}</text>')
    if target is not None:
        parts.append(f'<line x1="{left}" x2="{WIDTH - 20}" y1="{py(target):.1f}" y2="{py(target):.1f}" '
                     'stroke="#cc0000" stroke-dasharray="5 3"/>')
    path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in shown)
    parts.append(f'<polyline class="series" points="{path}" fill="none" stroke="#204a87" stroke-width="2"/>')
    parts.extend(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#204a87"/>' for x, y in shown)
    parts.append("</svg>")
    return "".join(parts)


def progress_bar(chart_id: str, done: int, target: int) -> str:
    """A labelled bar of ``done`` out of ``target``."""
    share = min(done / target, 1.0) if target else 0.0
    return (f'<svg id="{chart_id}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="28" role="img">'
            f'<rect x="0" y="4" width="{WIDTH - 120}" height="18" fill="#eee"/>'
            f'<rect x="0" y="4" width="{(WIDTH - 120) * share:.1f}" height="18" fill="#4e9a06"/>'
            f'<text x="{WIDTH - 112}" y="18" font-size="12">{done} / {target}</text></svg>')
