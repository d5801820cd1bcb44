"""A numeric project's dashboard (docs/method.md §2b): a Bland-Altman plot per judge against the human pool,
its points, bias and limits by hand, drawn as SVG inside the plane, downloadable as CSV and SVG."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.dashboard.scores import MAX_POINTS, bland_altman_chart, pool_differences
from service.matrices.matrix import RaterColumn
from service.matrices.ratings import RatingsMatrix

SVG = "{http://www.w3.org/2000/svg}"
RATERS = [("j", "judge"), ("h1", "primary"), ("h2", "human"), ("h3", "human")]
RATINGS = [[1, 1, 2, 1], [3, 2, 3, 3], [5, 4, 5, 5], [2, 2, 1, 2]]  # docs/method.md §3d: judge, h1, h2, h3


def ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r


def _project(client: TestClient) -> str:
    body = {"name": "ba", "scale": "numeric", "value_range": {"min": 1, "max": 5, "step": 1}}
    pid: str = ok(client.post("/projects", json=body), 201).json()["id"]
    for ext, kind in RATERS:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{n}"} for n in range(4)]))
    rows = [
        {"item": f"i{n}", "rater": e, "value": v} for n, row in enumerate(RATINGS) for (e, _), v in zip(RATERS, row)
    ]
    ok(client.post(f"/projects/{pid}/labels", json=rows))
    return pid


def test_points_bias_and_limits_by_hand() -> None:
    """Human pool per item (1+2+1)/3, 8/3, 14/3, 5/3; judge minus pool -1/3, 1/3, 1/3, 1/3: bias 1/6, SD 1/3,
    limits 1/6 -+ 1.96/3; an item no human rated has no point."""
    values = np.array([*RATINGS, [4, np.nan, np.nan, np.nan]], dtype=float)
    points, ba = pool_differences(values, 0, [1, 2, 3])
    pool = np.array([4, 8, 14, 5]) / 3
    assert points[:, 1] == pytest.approx(np.array([1, 3, 5, 2]) - pool)
    assert points[:, 0] == pytest.approx((np.array([1, 3, 5, 2]) + pool) / 2)
    assert (ba.bias, ba.sd, ba.n_items) == (pytest.approx(1 / 6), pytest.approx(1 / 3), 4)
    assert (ba.lower, ba.upper) == (pytest.approx(1 / 6 - 1.96 / 3), pytest.approx(1 / 6 + 1.96 / 3))


def test_the_page_draws_each_point_and_the_three_lines(client: TestClient) -> None:
    pid = _project(client)
    page = ok(client.get(f"/projects/{pid}/dashboard")).text
    assert "Judge j against the human pool" in page and "numeric ratings in [1, 5]" in page
    start = page.index('<svg id="bland-altman-1"')
    svg = ET.fromstring(page[start : page.index("</svg>", start) + 6])
    assert "Bland-Altman plot of j" in svg.find(f"{SVG}title").text
    points = [(float(c.get("cx")), float(c.get("cy"))) for c in svg.iter(f"{SVG}circle") if c.get("class") == "point"]
    marks = [float(m.get("y1")) for m in svg.iter(f"{SVG}line") if m.get("class") == "mark"]
    assert len(points) == 4 and len(marks) == 3
    upper, bias, lower = marks
    assert upper < bias < lower  # SVG y grows downwards
    # three points at difference +1/3 sit above the bias line (1/6), the one at -1/3 below it
    assert sorted(y < bias for _, y in points) == [False, True, True, True]
    labels = [t.text for t in svg.iter(f"{SVG}text")]
    assert "bias 0.167" in labels and any(t.startswith("lower limit") for t in labels)
    rows = list(
        csv.DictReader(io.StringIO(ok(client.get(f"/projects/{pid}/dashboard/charts/bland-altman-1.csv")).text))
    )
    assert [float(r["difference"]) for r in rows] == pytest.approx([-1 / 3, 1 / 3, 1 / 3, 1 / 3])
    svg_file = ok(client.get(f"/projects/{pid}/dashboard/charts/bland-altman-1.svg")).text
    assert svg_file.startswith("<?xml") and 'id="bland-altman-1"' in svg_file
    assert client.get(f"/projects/{pid}/dashboard/charts/margins-1.csv").status_code == 404


def test_a_large_project_draws_a_bounded_sample_and_its_lines_use_every_item() -> None:
    values = np.random.default_rng(0).integers(1, 6, (MAX_POINTS + 500, 3)).astype(float)
    raters = [
        RaterColumn(k, name, kind) for k, (name, kind) in enumerate([("j", "judge"), ("a", "primary"), ("b", "human")])
    ]
    matrix = RatingsMatrix(values, np.arange(values.shape[0]), raters, "c", 0, 0, np.zeros(values.shape))
    chart = bland_altman_chart(matrix, 0, [1, 2], 1)
    assert len(chart.rows) == MAX_POINTS and f"{MAX_POINTS:,} of them drawn" in chart.title
    _, ba = pool_differences(values, 0, [1, 2])
    assert ba.n_items == MAX_POINTS + 500 and {label.split()[0]: v for v, label in chart.marks}["bias"] == ba.bias


def test_the_projects_index_lists_a_numeric_project(client: TestClient) -> None:
    pid = _project(client)
    index = ok(client.get("/dashboard")).text
    assert f"/projects/{pid}/dashboard" in index
