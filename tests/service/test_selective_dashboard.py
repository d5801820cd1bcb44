"""The dashboard's selective coverage curve (issue 35, docs/method.md §3c): the calibration at the defaults."""

from __future__ import annotations

import csv
import io

from fastapi.testclient import TestClient

WORDS = ("pass", "fail")


def _project(client: TestClient) -> str:
    """300 items; the humans agree; the judge is right wherever its confidence is >= .5, wrong on every
    other item below (so the calibrated threshold exists)."""
    pid: str = client.post("/projects", json={"name": "sure", "labels": list(WORDS)}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human")]:
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(300)])
    rows = [{"item": f"i{i}", "rater": r, "value": WORDS[i % 2]} for r in ("prim", "h2") for i in range(300)]
    for i in range(300):
        conf = i / 300
        wrong = conf < 0.5 and i % 2 == 0
        rows.append({"item": f"i{i}", "rater": "judge", "value": WORDS[(i + wrong) % 2], "confidence": conf})
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def test_the_dashboard_draws_the_first_judges_coverage_curve_with_its_threshold(client: TestClient) -> None:
    pid = _project(client)
    doc = client.post(f"/projects/{pid}/selective", json={}).json()  # the defaults: alpha .1, delta .1
    page = client.get(f"/projects/{pid}/dashboard").text
    assert '<div id="selective">' in page and "<h2>Selective evaluation</h2>" in page
    threshold = doc["stages"][0]["threshold"]
    assert threshold is not None and f"calibrated lambda = {threshold:.3f}" in page
    shown = client.get(f"/projects/{pid}/dashboard/charts/selective-coverage.csv")
    assert shown.status_code == 200
    rows = list(csv.DictReader(io.StringIO(shown.text)))
    assert [float(r["threshold"]) for r in rows] == doc["curve"]["thresholds"]
    assert [float(r["coverage"]) for r in rows] == doc["curve"]["coverage"]
    assert all(float(a["coverage"]) >= float(b["coverage"]) for a, b in zip(rows, rows[1:], strict=False))


def test_no_curve_without_a_confident_judge_label(client: TestClient) -> None:
    pid = client.post("/projects", json={"name": "plain", "labels": ["pass", "fail"]}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human")]:
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(40)])
    rows = [{"item": f"i{i}", "rater": r, "value": "pass"} for r in ("judge", "prim", "h2") for i in range(40)]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    page = client.get(f"/projects/{pid}/dashboard").text
    assert 'id="selective"' not in page and "<h1>plain</h1>" in page
