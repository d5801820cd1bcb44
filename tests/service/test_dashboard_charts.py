"""Chart readability (issue 31): overlapping bands are faint tints between outlines of their own pattern,
the sequences are drawn against overlap items, and the reliability curve marks (and simulates) the plan's
own overlap."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from fastapi.testclient import TestClient

from service.dashboard.charts import dashboard_charts, sequences_chart
from service.dashboard.svg import PLANE, WIDTH, chart_svg
from service.schemas.documents import (
    BandPoint,
    JudgeValidation,
    Monitoring,
    PlanProgress,
    RaterMonitoring,
    ReliabilityDocument,
)

SVG = "{http://www.w3.org/2000/svg}"


def _validation(bands: dict[str, list[tuple[int, int, float, float]]]) -> JudgeValidation:
    """A monitored judge whose raters' bands are ``(label_seq, n, lower, upper)`` points."""
    raters = [
        RaterMonitoring.model_construct(
            rater=name, band=[BandPoint(label_seq=s, n=n, lower=lo, upper=hi) for s, n, lo, hi in points]
        )
        for name, points in bands.items()
    ]
    monitoring = Monitoring.model_construct(raters=raters)
    return JudgeValidation.model_construct(rule="margin", epsilon=0.1, judge="j", monitoring=monitoring)


def test_overlapping_bands_are_faint_tints_between_distinct_outlines() -> None:
    # Three raters whose bands coincide: opaque fills would stack into one block of mixed colour.
    same = [(10 * k, k, -0.5 / k, 0.5 / k) for k in range(1, 6)]
    svg = ET.fromstring(chart_svg(sequences_chart(_validation({"a": same, "b": same, "c": same}), 1)))
    fills = [p for p in svg.iter(f"{SVG}polygon") if p.get("class") == "band"]
    assert len(fills) == 3
    # Stacked, three tints still let more than 3/4 of the white through: 1 - (1 - a)^3 < 1/4.
    assert all(1 - (1 - float(p.get("fill-opacity"))) ** 3 < 0.25 for p in fills)
    edges = [e for e in svg.iter(f"{SVG}polyline") if e.get("class") == "band-edge"]
    assert len(edges) == 6  # upper and lower outline per band
    styles = {(e.get("stroke"), e.get("stroke-dasharray")) for e in edges}
    assert len(styles) == 3 and len({dash for _, dash in styles}) == 3  # told apart by pattern, not only colour
    legend = [r for r in svg.iter(f"{SVG}rect") if r.get("stroke-dasharray") is not None]
    assert {r.get("stroke-dasharray") for r in legend} <= {dash for _, dash in styles}


def test_sequences_are_drawn_against_overlap_items_not_label_seq() -> None:
    # Rater a's looks come late in the label sequence but early in its overlap: x must follow n.
    chart = sequences_chart(_validation({"a": [(900, 2, -0.9, 0.9), (990, 20, -0.2, 0.3)]}), 1)
    assert chart.columns[:3] == ("rater", "n", "label_seq") and "overlap items" in chart.x_label
    svg = ET.fromstring(chart_svg(chart))
    ticks = [float(t.text) for t in svg.iter(f"{SVG}text") if t.get("class") == "tick" and t.get("y") == "211"]
    assert ticks and min(ticks) >= 2 and max(ticks) <= 20  # the x axis spans n = 2 .. 20, not 900 .. 990
    (upper, _) = [e.get("points").split() for e in svg.iter(f"{SVG}polyline") if e.get("class") == "band-edge"]
    xs = [float(p.split(",")[0]) for p in upper]
    assert xs == pytest.approx([PLANE[1], WIDTH - 20])  # first look at the left edge, last at the right


def test_a_look_without_new_overlap_is_drawn_once() -> None:
    chart = sequences_chart(_validation({"a": [(5, 3, -0.8, 0.8), (6, 3, -0.7, 0.7), (9, 6, -0.4, 0.4)]}), 1)
    svg = ET.fromstring(chart_svg(chart))
    upper = next(e for e in svg.iter(f"{SVG}polyline") if e.get("class") == "band-edge").get("points").split()
    assert len(upper) == 2  # n = 3 twice: the later look (the narrower band) is the one drawn
    assert len(chart.rows) == 3  # the CSV keeps every look


def _curve_doc(m_target: int | None, n_items: int) -> ReliabilityDocument:
    plan = PlanProgress.model_construct(m_target=m_target, raters=[]) if m_target else None
    return ReliabilityDocument.model_construct(judges=[], plan=plan, n_items=n_items)


def test_the_curve_is_in_overlap_items_and_marks_the_plans_m() -> None:
    curve = [(0.1, 0.5), (0.25, 0.8), (0.5, 0.97)]
    chart = {c.id: c for c in dashboard_charts(_curve_doc(120, 400), [], curve)}["overlap-curve"]
    assert [row[0] for row in chart.rows] == [40, 100, 200]  # rho x 400 items
    assert chart.columns == ("overlap_items", "reliability", "rho")
    assert chart.marks == ((120.0, "plan: m = 120, rho = 0.30"),)
    svg = ET.fromstring(chart_svg(chart))
    (mark,) = [m for m in svg.iter(f"{SVG}line") if m.get("class") == "mark"]
    points = [tuple(map(float, p.split(","))) for p in svg.find(f"{SVG}polyline").get("points").split()]
    # m = 120 lies between the points at 100 and 200 items: its line sits at 1/5 of that gap.
    assert float(mark.get("x1")) == pytest.approx(points[1][0] + (points[2][0] - points[1][0]) / 5, abs=0.11)
    assert "plan: m = 120" in ET.tostring(svg, encoding="unicode")
    no_plan = {c.id: c for c in dashboard_charts(_curve_doc(None, 400), [], curve)}["overlap-curve"]
    assert no_plan.marks == ()


def test_the_curve_simulates_the_plans_own_rate(client: TestClient, project: dict) -> None:
    pid = project["id"]
    plan = client.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "m": 7, "seed": 3})
    assert plan.status_code == 201, plan.text
    csv = client.get(f"/projects/{pid}/dashboard/charts/overlap-curve.csv").text.splitlines()
    rows = [line.split(",") for line in csv[1:]]
    assert any(int(r[0]) == 7 and float(r[2]) == pytest.approx(7 / 20) and r[1] for r in rows), rows
    page = client.get(f"/projects/{pid}/dashboard").text
    curve = page[page.index('<svg id="overlap-curve"') :].split("</svg>")[0]
    assert re.search(r'class="mark"[^>]*>.*plan: m = 7, rho = 0.35', curve)


def test_a_replayed_history_spreads_its_points_where_the_score_is_defined(client: TestClient, project: dict) -> None:
    """The demo's order: judge and primary label the corpus first, then the secondaries their lists. Points
    at quantiles of all events put 6 of 8 before any secondary label: a sentence, not a line."""
    from service.core.db import session_scope
    from service.data.models import Project
    from service.documents.history_replays import REPLAY_POINTS, pool_history

    pid = project["id"]
    rows = [
        {"item": f"i{i}", "rater": k, "value": "pass" if (i + j) % 3 else "fail"}
        for j, k in enumerate(("judge", "prim"))
        for i in range(20)
    ]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    for k in ("h2", "h3"):
        rows = [{"item": f"i{i}", "rater": k, "value": "pass" if i % 4 else "fail"} for i in range(5)]
        assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    with session_scope(client.app.state.sessions) as session:
        history = pool_history(session, session.get(Project, pid), "default")
    assert min(seq for seq, _ in history) > 40  # every cut after the first secondary label (seq 41)
    assert len([y for _, y in history if y is not None]) >= REPLAY_POINTS - 1
    assert history[-1][0] == 50
