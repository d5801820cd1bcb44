"""A numeric project's dashboard (docs/method.md §2b, §3d, §8b): each judge's decision on the numbers, a
Bland-Altman plot per judge against the human pool, and the progress through the plan."""

from __future__ import annotations

from html import escape

import numpy as np
from sqlalchemy.orm import Session

from planner.scores import BlandAltmanResult, bland_altman
from service.dashboard.glossary import GLOSSARY_PATH, term_link
from service.dashboard.pages import logout_form, slice_table
from service.dashboard.svg import Chart, chart_svg
from service.data.models import Project
from service.documents.scores import score_reliability_document
from service.matrices.ratings import RatingsMatrix, load_ratings
from service.schemas.documents import ScoreReliabilityDocument, Slices

MAX_POINTS = 2000
"""Points a Bland-Altman plot draws at most (a seeded draw of the items beyond it); its lines use every item."""
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:720px;color:#222}
.pass{background:#d7f5c8} .reject{background:#f8d0d0} .inconclusive,.insufficient_data{background:#fbeec0}
h2{font-size:1.15em;margin-top:1.8em} .note{color:#555;font-size:.9em} .downloads{font-size:.85em}
table{border-collapse:collapse} td,th{padding:.2em .6em;text-align:left;border-bottom:1px solid #ddd}"""


def pool_differences(values: np.ndarray, judge: int, humans: list[int]) -> tuple[np.ndarray, BlandAltmanResult]:
    """Per item the judge's number against the human pool's (the mean of the humans' numbers there): the points
    ``(mean, difference)`` of the items both have, and Bland-Altman's bias and limits over them (§2b)."""
    human = values[:, humans]
    rated = (~np.isnan(human)).sum(axis=1)
    pool = np.where(rated > 0, np.nansum(human, axis=1) / np.maximum(rated, 1), np.nan)
    a = values[:, judge]
    both = ~np.isnan(a) & ~np.isnan(pool)
    points = np.column_stack([(a[both] + pool[both]) / 2, a[both] - pool[both]])
    return points, bland_altman(a, pool)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.3g}"


def bland_altman_chart(matrix: RatingsMatrix, judge: int, humans: list[int], number: int) -> Chart:
    """The judge's Bland-Altman plot against the human pool: a point per item, the bias and the limits."""
    name = matrix.raters[judge].external_id
    points, ba = pool_differences(matrix.values, judge, humans)
    n = points.shape[0]
    drawn = ""
    if n > MAX_POINTS:
        points = points[np.sort(np.random.default_rng(number).choice(n, MAX_POINTS, replace=False))]
        drawn = f"; {MAX_POINTS:,} of them drawn"
    marks: tuple[tuple[float, str], ...] = ()
    if ba.defined:
        marks = (
            (ba.upper, f"upper limit {_fmt(ba.upper)}"),
            (ba.bias, f"bias {_fmt(ba.bias)}"),
            (ba.lower, f"lower limit {_fmt(ba.lower)}"),
        )
    return Chart(
        id=f"bland-altman-{number}",
        kind="scatter",
        title=f"Bland-Altman plot of {name} against the human pool (the mean of the humans' numbers on each item): "
        f"difference against mean, with the bias and the limits of agreement bias -+ {ba.multiplier:g} SD over "
        f"{n:,} items{drawn}",
        x_label="mean of the judge's and the human pool's numbers",
        y_label=f"{name} - human pool",
        columns=("mean", "difference"),
        rows=tuple((float(x), float(y)) for x, y in points),
        marks=marks,
    )


def score_dashboard(session: Session, project: Project) -> tuple[ScoreReliabilityDocument, tuple[Chart, ...]]:
    """The document a numeric project's dashboard shows and its charts: a Bland-Altman plot per judge, then the
    progress through the plan."""
    criterion = project.criteria[0]
    doc = score_reliability_document(session, project, criterion)
    matrix = load_ratings(session, project, criterion)
    humans = matrix.columns("primary", "human")
    judges = matrix.columns("judge") if humans else []
    charts = [bland_altman_chart(matrix, j, humans, k + 1) for k, j in enumerate(judges)]
    raters = doc.plan.raters if doc.plan else []
    charts.append(
        Chart(
            id="progress",
            kind="bars",
            title="planned overlap done per secondary annotator (items labeled of its list)",
            x_label="items labeled",
            y_label="secondary annotator",
            columns=("rater", "done", "listed"),
            rows=tuple((r.rater, r.done, r.listed) for r in raters),
        )
    )
    return doc, tuple(charts)


def _figure(project: Project, chart: Chart) -> str:
    base = f"/projects/{escape(project.id)}/dashboard/charts/{escape(chart.id)}"
    return (
        f'{chart_svg(chart)}<p class="downloads">download: <a href="{base}.csv" download>CSV</a> &middot; '
        f'<a href="{base}.svg" download>SVG</a> &middot; '
        f'<a class="png" href="#" data-chart="{escape(chart.id)}">PNG</a></p>'
    )


def score_dashboard_page(
    project: Project,
    doc: ScoreReliabilityDocument,
    charts: tuple[Chart, ...],
    *,
    slices: Slices | str | None = None,
    logout: str | None = None,
) -> str:
    """A numeric project's dashboard page: the decisions, the first judge's per slice of ``decision.slices``
    (docs/method.md §3d; None: the project does not slice; a string: why there are none yet), a Bland-Altman
    panel per judge, the plan's progress; ``logout``: the logout form's CSRF token when the page was opened by
    a login."""
    by_id = {c.id: c for c in charts}
    decisions = (
        "".join(
            f'<tr><td>{escape(v.judge)}</td><td class="{escape(v.decision)}">{escape(v.decision)}</td>'
            f"<td>{_fmt(v.omega)}</td><td>{escape(v.reason)}</td></tr>"
            for v in doc.judges
        )
        or f'<tr><td colspan="4">{escape(doc.decision)}: {escape(doc.reason)}</td></tr>'
    )
    monitored = "".join(
        f'<tr><td>{escape(m.judge)}</td><td class="{escape(m.decision)}">{escape(m.decision)}</td>'
        f"<td>{_fmt(m.omega)}</td><td>{escape(m.reason)}</td></tr>"
        for m in doc.monitoring or []
    )
    monitoring = (
        "<h2>Anytime-monitored decision</h2><table><tr><th>judge</th><th>decision</th><th>omega (certified won)</th>"
        f"<th>why</th></tr>{monitored}</table>"
        if doc.monitoring is not None
        else '<p class="note">Fixed mode: the decision is read once, at the planned overlap.</p>'
    )
    panels = "".join(
        f'<div class="judge"><h2>Judge {escape(v.judge)} against the human pool</h2>'
        f"{_figure(project, by_id[f'bland-altman-{k + 1}'])}</div>"
        for k, v in enumerate(doc.judges)
    )
    progress = (
        _figure(project, by_id["progress"])
        if doc.plan and by_id["progress"].rows
        else "<p>No plan yet.</p>"
        if not doc.plan
        else "<p>No secondary annotator yet.</p>"
    )
    value_range = doc.value_range
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>annoplan: {escape(project.name)}</title><style>{STYLE}</style>
</head><body><div class="note"><a href="/dashboard">all projects</a> &middot;
 <a href="{GLOSSARY_PATH}">glossary</a>{logout_form(logout)}</div>
<h1>{escape(project.name)}</h1>
<p>numeric ratings in [{_fmt(value_range.get("min"))}, {_fmt(value_range.get("max"))}] &middot;
 {term_link("label_seq", "label_seq")} {doc.label_seq} &middot; {doc.n_items} items &middot; criterion
 {escape(doc.criterion)} &middot; {term_link("rule", "Rule")} {escape(doc.rule)}, {term_link("epsilon", "Epsilon")}
 {doc.epsilon:g}, pass when {term_link("omega", "Omega")} &ge; {doc.omega_threshold:g}</p>
<h2>{term_link("Decision", "The decision")} (fixed-sample, at the planned overlap)</h2>
<div id="decision"><table><tr><th>judge</th><th>decision</th><th>omega (share of humans won)</th><th>why</th></tr>
{decisions}</table></div>{monitoring}{slice_table(slices)}{panels}
<h2>Progress of each {term_link("secondary annotator", "Secondary annotator")} through the plan</h2>{progress}
<script src="/static/chart_png.js"></script>
</body></html>"""
