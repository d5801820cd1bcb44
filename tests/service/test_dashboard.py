"""The dashboard: the pool-score history replays the events; each chart names and plots one quantity
consistently, with a numeric axis and downloads; infeasible plans are said plainly; the projects index."""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from planner.decision import validate_judge
from planner.recipes import certify_recipe
from planner.xi_moments import xi_lattice
from service.core.db import session_scope
from service.dashboard.svg import ticks
from service.data.models import Project
from service.documents.history_replays import pool_history
from tests.conftest import ADMIN_KEY

SVG = "{http://www.w3.org/2000/svg}"


def _labels(client: TestClient, pid: str, rows: list[tuple[str, str, str]]) -> None:
    r = client.post(f"/projects/{pid}/labels", json=[{"item": i, "rater": k, "value": v} for i, k, v in rows])
    assert r.status_code == 200, r.text


def test_pool_history_replays_events_with_corrections(client: TestClient, project: dict) -> None:
    pid = project["id"]
    rng = np.random.default_rng(3)
    first = [(f"i{i}", k, ["pass", "fail"][rng.integers(2)]) for k in ("judge", "prim", "h2", "h3") for i in range(20)]
    _labels(client, pid, first)
    # Corrections: h2 flips its first eight labels; only the newest value may count afterwards.
    flips = {"pass": "fail", "fail": "pass"}
    _labels(client, pid, [(i, k, flips[v]) for i, k, v in first if k == "h2"][:8])
    with session_scope(client.app.state.sessions) as session:
        history = pool_history(session, session.get(Project, pid), "default")
    assert [seq for seq, _ in history][-1] == 88
    # Independent replay at each cut: the matrix of the newest value per cell among events <= cut.
    events = client.get(f"/projects/{pid}/labels", params={"history": "true", "limit": 1000}).json()["items"]
    columns = {"judge": 0, "prim": 1, "h2": 2, "h3": 3}
    for seq, score in history:
        codes = np.full((20, 4), -1)
        for e in sorted(events, key=lambda e: e["seq"]):
            if e["seq"] <= seq:
                codes[int(e["item"][1:]), columns[e["rater"]]] = ["pass", "fail"].index(e["value"])
        expected = validate_judge(codes, judge=0, humans=[1, 2, 3], n_labels=2, n_resamples=20, rng=0)
        want = expected.human_pool.estimate
        assert (score is None and not np.isfinite(want)) or score == want, (seq, score, want)
    final = client.get(f"/projects/{pid}/reliability").json()["human_pool"]["estimate"]
    assert history[-1][1] == final


# --------------------------------------------------------------------------- pages and charts


def _alt_test_two_judges(client: TestClient) -> str:
    """60 items, three humans and two judges of different quality, decided by the alt-test."""
    pid = client.post(
        "/projects",
        json={"name": "two judges", "labels": ["no", "yes"], "decision": {"rule": "alt-test", "epsilon": 0.2}},
    ).json()["id"]
    for ext, kind in [
        ("good-judge", "judge"),
        ("weak-judge", "judge"),
        ("prim", "primary"),
        ("h2", "human"),
        ("h3", "human"),
    ]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(60)]).status_code == 200
    rng = np.random.default_rng(11)
    truth = rng.integers(2, size=60)
    flip = {"good-judge": 0.05, "weak-judge": 0.35, "prim": 0.1, "h2": 0.15, "h3": 0.15}
    rows = [(f"i{i}", k, ["no", "yes"][truth[i] ^ int(rng.random() < p)]) for k, p in flip.items() for i in range(60)]
    _labels(client, pid, rows)
    return pid


def _svg(page: str, chart_id: str) -> ET.Element:
    start = page.index(f'<svg id="{chart_id}"')
    return ET.fromstring(page[start : page.index("</svg>", start) + 6])


def test_alt_test_panels_plot_rho_f_minus_rho_h_inside_its_interval(client: TestClient) -> None:
    """Fixed-sample mode: the margins chart draws rho_f - rho_h and its fixed interval (in anytime mode it
    draws each rater's confidence sequence: tests/service/test_one_story.py)."""
    pid = _alt_test_two_judges(client)
    fixed = {"rule": "alt-test", "epsilon": 0.2, "monitoring": "fixed"}
    assert client.patch(f"/projects/{pid}", json={"decision": fixed}).status_code == 200
    doc = client.get(f"/projects/{pid}/reliability").json()
    page = client.get(f"/projects/{pid}/dashboard").text
    assert [v["judge"] for v in doc["judges"]] == ["good-judge", "weak-judge"]
    for k, judge in enumerate(doc["judges"], start=1):
        assert f"Judge {judge['judge']}" in page
        svg = _svg(page, f"margins-{k}")
        assert "rho_f - rho_h" in svg.find(f"{SVG}title").text
        assert "confidence sequence of rho_f - rho_h" in _svg(page, f"sequences-{k}").find(f"{SVG}title").text
        dots = [float(c.get("cx")) for c in svg.iter(f"{SVG}circle")]
        bars = [(float(b.get("x1")), float(b.get("x2"))) for b in svg.iter(f"{SVG}line") if b.get("class") == "ci"]
        assert len(dots) == len(bars) == 3
        assert all(lo <= x <= hi for x, (lo, hi) in zip(dots, bars, strict=True)), (dots, bars)
        assert [float(t.text) for t in svg.iter(f"{SVG}text") if t.get("class") == "tick"], "a numeric axis"
        # The downloaded CSV holds the same quantity, computed here from the document's rho_f and rho_h.
        csv_rows = list(
            csv.DictReader(io.StringIO(client.get(f"/projects/{pid}/dashboard/charts/margins-{k}.csv").text))
        )
        for row, rater in zip(csv_rows, judge["raters"], strict=True):
            assert row["rater"] == rater["rater"]
            assert float(row["estimate"]) == pytest.approx(rater["rho_f"] - rater["rho_h"])
            assert [float(row["ci_low"]), float(row["ci_high"])] == pytest.approx(rater["ci"])
            assert float(row["ci_low"]) <= float(row["estimate"]) <= float(row["ci_high"])


def test_chart_downloads_are_csv_and_standalone_svg(client: TestClient, project: dict) -> None:
    pid = project["id"]
    _labels(
        client,
        pid,
        [
            (f"i{i}", k, "pass" if (i + j) % 3 else "fail")
            for j, k in enumerate(("judge", "prim", "h2", "h3"))
            for i in range(20)
        ],
    )
    for chart in ("margins-1", "pool-history", "progress", "overlap-curve"):
        r = client.get(f"/projects/{pid}/dashboard/charts/{chart}.svg")
        assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
        assert ET.fromstring(r.content).get("id") == chart
        r = client.get(f"/projects/{pid}/dashboard/charts/{chart}.csv")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    history = list(csv.reader(io.StringIO(client.get(f"/projects/{pid}/dashboard/charts/pool-history.csv").text)))
    assert history[0] == ["label_seq", "pool_score"] and history[-1][0] == "80"
    r = client.get(f"/projects/{pid}/dashboard/charts/margins-9.csv")
    assert r.status_code == 404 and "margins-1" in r.json()["detail"]


def test_pool_score_with_one_point_is_a_value_not_a_chart(client: TestClient, project: dict) -> None:
    pid = project["id"]
    # The second human's only label comes last: the pool score is defined at label_seq 7 only.
    _labels(client, pid, [(f"i{i}", k, "pass" if i else "fail") for k in ("judge", "prim") for i in range(3)])
    _labels(client, pid, [("i0", "h2", "fail")])
    page = client.get(f"/projects/{pid}/dashboard").text
    history = list(csv.reader(io.StringIO(client.get(f"/projects/{pid}/dashboard/charts/pool-history.csv").text)))
    assert len([row for row in history[1:] if row[1]]) == 1  # one defined point: at the last label
    assert '<svg id="pool-history"' not in page
    assert 'id="pool-history" class="note">human-pool score 1.000 at label_seq 7' in page


def test_infeasible_plan_says_so_and_what_would_make_it_feasible(client: TestClient, project: dict) -> None:
    pid = project["id"]
    r = client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.84})
    recipe = r.json()
    assert r.status_code == 201 and not recipe["recipe"]["feasible"], r.text
    m = recipe["recipe"]["m"]
    page = client.get(f"/projects/{pid}/dashboard").text
    verdict = page[page.index('id="plan-verdict"') :].split("</p>")[0]
    assert 'class="infeasible"' in verdict
    assert f"infeasible: the recipe needs {m} items per annotator, the corpus has 20" in verdict
    assert f"a corpus of at least {m} items" in verdict and "a pilot" in verdict
    # The epsilon offered is the smallest step of 0.01 whose recipe from the moments fits the 20 items:
    # checked with the planner on the plan's own prior (its moments for the design's held-in pool).
    epsilon = float(verdict.split("raise epsilon to ")[1].split(" ")[0])
    pool_size = recipe["recipe"]["moments"]["pool_size"]
    lattice = xi_lattice(0.85, 0.84, n_labels=2, pool_size=pool_size)

    def fits(e: float) -> bool:
        return certify_recipe(
            lattice.mu_d, lattice.variance, n_items=20, n_humans=3, epsilon=e, pool_size=pool_size
        ).feasible

    assert fits(epsilon) and not fits(round(epsilon - 0.01, 2)), epsilon
    # Deciding by another rule now: the page says the recipe was for the margin rule.
    assert client.patch(f"/projects/{pid}", json={"decision": {"rule": "alt-test"}}).status_code == 200
    page = client.get(f"/projects/{pid}/dashboard").text
    assert "computed for the margin rule, but the project now decides by the alt-test rule" in page


def test_projects_index_lists_what_the_key_sees_and_login_goes_there(client: TestClient, project: dict) -> None:
    pid = project["id"]
    other = client.post("/projects", json={"name": "second <b>", "labels": ["a", "b"]}).json()["id"]
    _labels(client, pid, [(f"i{i}", k, "pass") for k in ("judge", "prim", "h2") for i in range(4)])
    page = client.get("/dashboard").text
    assert page.count("<tr>") == 3  # header and two projects
    assert f'href="/projects/{pid}/dashboard">demo</a>' in page and "second &lt;b&gt;" in page
    assert "judge: " in page and "no label yet" in page and "no plan" in page
    viewer = client.post(f"/projects/{other}/keys", json={"role": "viewer"}).json()["key"]
    for key, landing in [(ADMIN_KEY, "/dashboard"), (viewer, f"/projects/{other}/dashboard")]:
        token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
        r = client.post(
            "/login",
            content=f"key={key}&csrf={token}",
            follow_redirects=False,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert (r.status_code, r.headers["location"]) == (303, landing)
    client.cookies.clear()
    page = client.get("/dashboard", headers={"Authorization": f"Bearer {viewer}"}).text
    assert other in page and pid not in page
    anonymous = client.get("/dashboard", headers={"Authorization": ""}, follow_redirects=False)
    assert anonymous.headers["location"] == "/login"


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.0, 1.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (-0.23, 0.11, [-0.2, -0.1, 0.0, 0.1]),
        (0.0, 246.0, [0.0, 50.0, 100.0, 150.0, 200.0]),
        (3.0, 3.0, [3.0]),
    ],
)
def test_ticks_are_round_numbers_inside_the_range(low: float, high: float, expected: list[float]) -> None:
    assert ticks(low, high) == pytest.approx(expected)


@given(st.floats(-1e6, 1e6), st.floats(1e-6, 1e6))
def test_ticks_cover_any_range_evenly(low: float, span: float) -> None:
    high = low + span
    t = np.array(ticks(low, high))
    assert 2 <= t.size <= 11
    assert np.all(t >= low - 1e-9 * span) and np.all(t <= high + 1e-9 * span)
    assert np.allclose(np.diff(t), np.diff(t)[0], rtol=1e-6)


def test_projects_index_rows_agree_with_each_reliability_document_and_page_on(client: TestClient) -> None:
    pid = _alt_test_two_judges(client)
    for k in range(25):  # 26 projects: the first page holds 25 and links to the next
        client.post("/projects", json={"name": f"extra-{k:02d}", "labels": ["a", "b"]})
    doc = client.get(f"/projects/{pid}/reliability").json()
    page = client.get("/dashboard").text
    row = page[page.index(f'href="/projects/{pid}/dashboard"') :].split("</tr>")[0]
    cells = re.findall(r"<td>([^<]*)</td>", row)
    assert cells[0] == "; ".join(f"{v['judge']}: {v['decision']}" for v in doc["judges"])
    assert cells[1] == "; ".join(f"{v['omega']:.2f}" for v in doc["judges"])
    assert "extra-23" in page and "extra-24" not in page
    more = re.search(r'id="next" href="([^"]+)"', page).group(1)
    rest = client.get(more.replace("&amp;", "&")).text
    assert "extra-24" in rest and "extra-23" not in rest and 'id="next"' not in rest


@pytest.mark.parametrize(("looks", "said"), [(1, "after 1 look ("), (2, "after 2 looks (")])
def test_the_monitoring_note_counts_its_looks_in_words(monkeypatch: pytest.MonkeyPatch, looks: int, said: str) -> None:
    from service.dashboard import pages
    from service.dashboard.svg import Chart
    from service.schemas.documents import JudgeValidation, Monitoring, RaterMonitoring

    monkeypatch.setattr(pages, "_figure", lambda project, chart: "")
    raters = [RaterMonitoring.model_construct(rater="h2", status="open")]
    monitoring = Monitoring.model_construct(mode="anytime", decision="continue", looks=looks, raters=raters)
    chart = Chart("sequences", "line", "Monitoring", "labels", "d", ("x", "y"), ())
    validation = JudgeValidation.model_construct(monitoring=monitoring)
    assert said in pages._sequences(Project(name="p"), validation, chart)
