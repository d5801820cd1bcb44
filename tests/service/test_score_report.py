"""``/report`` of a numeric project (docs/method.md §2b, §3d, §7): the decisions and the judge-human agreement
on §3d's four check items by hand, as JSON, CSV and HTML, cached by ETag; label options are a 422."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

RATERS = [("j", "judge"), ("h1", "primary"), ("h2", "human"), ("h3", "human")]
CHECK = [[1, 1, 2, 1], [3, 2, 3, 3], [5, 4, 5, 5], [2, 2, 1, 2]]  # docs/method.md §3d: judge, h1, h2, h3


def ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r


@pytest.fixture
def pid(client: TestClient) -> str:
    body = {
        "name": "r",
        "scale": "numeric",
        "value_range": {"min": 1, "max": 5, "step": 1},
        "decision": {"rule": "margin"},
        "allow_abstain": True,
    }
    pid: str = ok(client.post("/projects", json=body), 201).json()["id"]
    for ext, kind in RATERS:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{n}"} for n in range(4)]))
    rows = [
        {"item": f"i{n}", "rater": ext, "value": v}
        for n, row in enumerate(CHECK)
        for (ext, _), v in zip(RATERS, row, strict=True)
    ]
    ok(client.post(f"/projects/{pid}/labels", json=rows))
    abstain = [{"item": "i0", "rater": "h2", "value": "CANNOT_ASSESS"}]  # supersedes h2's 2 on item 0
    ok(client.post(f"/projects/{pid}/labels", json=abstain))
    return pid


def test_the_report_by_hand(client: TestClient, pid: str) -> None:
    """Judge [1, 3, 5, 2] against h1 [1, 2, 4, 2]: differences [0, 1, 1, 0], bias .5, SD sqrt(1/3), limits
    .5 -+ 1.96 SD, MAE .5, RMSE sqrt(.5); Lin's CCC 2 s_jh / (s_j^2 + s_h^2 + (mean_j - mean_h)^2) with 1/n
    moments: 2 (1.5625) / (2.1875 + 1.1875 + .25) = .8621. h2's CANNOT_ASSESS leaves item 0 out of its pair."""
    report = ok(client.get(f"/projects/{pid}/report")).json()
    assert report["scale"] == "numeric" and report["protocol"]["rule"] == "margin"
    assert report["protocol"]["value_range"] == {"min": 1.0, "max": 5.0, "step": 1.0}
    (criterion,) = report["criteria"]
    assert criterion["n_special"] == 1 and criterion["n_items"] == 4
    (judge,) = criterion["judges"]
    assert judge["judge"] == "j" and judge["decision"] in ("pass", "reject")
    pairs = {p["human"]: p for p in criterion["pairs"]}
    h1 = pairs["h1"]
    sd = math.sqrt(1 / 3)
    assert h1["n_items"] == 4 and h1["bias"] == pytest.approx(0.5) and h1["sd"] == pytest.approx(sd)
    assert (h1["lower"], h1["upper"]) == (
        pytest.approx(0.5 - 1.96 * sd, abs=1e-3),
        pytest.approx(0.5 + 1.96 * sd, abs=1e-3),
    )
    assert h1["mae"] == pytest.approx(0.5) and h1["rmse"] == pytest.approx(math.sqrt(0.5))
    assert h1["ccc"] == pytest.approx(3.125 / 3.625)
    assert pairs["h2"]["n_items"] == 3


def test_csv_html_and_etag(client: TestClient, pid: str) -> None:
    r = ok(client.get(f"/projects/{pid}/report", params={"format": "csv"}))
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [(row["judge"], row["human"]) for row in rows] == [("j", "h1"), ("j", "h2"), ("j", "h3")]
    assert float(rows[0]["bias"]) == pytest.approx(0.5) and rows[0]["criterion"] == "default"
    html = ok(client.get(f"/projects/{pid}/report", params={"format": "html"})).text
    assert html.startswith("<!doctype html>") and "Criterion default" in html and "limits of agreement" in html
    first = ok(client.get(f"/projects/{pid}/report"))
    again = client.get(f"/projects/{pid}/report", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304


@pytest.mark.parametrize(
    "params",
    [{"handling": "recode", "recode_to": "1"}, {"positive": "5"}, {"costs": "linear"}, {"aggregation": "macro"}],
)
def test_label_options_are_422(client: TestClient, pid: str, params: dict[str, str]) -> None:
    r = client.get(f"/projects/{pid}/report", params=params)
    assert r.status_code == 422 and "label scales only" in r.text, r.text
    assert client.get(f"/projects/{pid}/report", params={"criterion": "nope"}).status_code == 422
