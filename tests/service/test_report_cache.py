"""GET /report is computed once per labels, raters, settings and query in a worker (issue 37): a
second poll reads the key and computes nothing; a new label, another query or changed settings
compute it afresh; its ETag answers If-None-Match with a 304."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.reporting import report as report_module
from tests.factories import create_project

VALUES = ["yes", "no"]


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times the report's statistics and its label reads ran."""
    counts = {"statistics": 0, "matrices": 0}

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return original(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(report_module, "judge_reports", counting("statistics", report_module.judge_reports))
    monkeypatch.setattr(report_module, "current_matrix", counting("matrices", report_module.current_matrix))
    return counts


def _project(client: TestClient) -> str:
    pid = create_project(client, labels=VALUES, raters=(("judge", "judge"), ("prim", "primary")))
    items = [{"external_id": f"i{i}"} for i in range(12)]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    rows = [
        {"item": f"i{i}", "rater": rater, "value": VALUES[(i + (rater == "judge" and i % 5 == 0)) % 2]}
        for i in range(10)
        for rater in ("judge", "prim")
    ]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def test_a_second_poll_computes_nothing_and_a_new_label_invalidates(
    client: TestClient, computed: dict[str, int]
) -> None:
    pid = _project(client)
    first = client.get(f"/projects/{pid}/report")
    assert first.status_code == 200, first.text
    assert computed == {"statistics": 1, "matrices": 1}

    second = client.get(f"/projects/{pid}/report")
    assert second.status_code == 200
    assert second.json() == first.json() and second.headers["ETag"] == first.headers["ETag"]
    assert computed == {"statistics": 1, "matrices": 1}  # nothing read or computed again

    assert client.get(f"/projects/{pid}/report", headers={"If-None-Match": first.headers["ETag"]}).status_code == 304
    assert computed["statistics"] == 1

    rows = [{"item": "i10", "rater": r, "value": "yes"} for r in ("judge", "prim")]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    third = client.get(f"/projects/{pid}/report", headers={"If-None-Match": first.headers["ETag"]})
    assert third.status_code == 200 and third.headers["ETag"] != first.headers["ETag"]
    assert computed == {"statistics": 2, "matrices": 2}
    assert third.json()["label_seq"] == first.json()["label_seq"] + 2
    n_first = first.json()["judges"][0]["criteria"][0]["table"]["n"]
    assert third.json()["judges"][0]["criteria"][0]["table"]["n"] == n_first + 1


def test_a_correction_another_query_or_new_settings_compute_afresh(
    client: TestClient, computed: dict[str, int]
) -> None:
    pid = _project(client)
    assert client.get(f"/projects/{pid}/report").status_code == 200
    assert client.get(f"/projects/{pid}/report?costs=linear").status_code == 200  # another query
    assert computed["statistics"] == 2
    assert client.get(f"/projects/{pid}/report?format=csv").status_code == 200  # same statistics, other body
    assert computed["statistics"] == 2

    correction = [{"item": "i0", "rater": "judge", "value": "yes"}]  # it said "no" (every fifth item differs)
    written = client.post(f"/projects/{pid}/labels", json=correction)
    assert written.status_code == 200 and written.json()["accepted"] == 1, written.text
    corrected = client.get(f"/projects/{pid}/report")
    assert corrected.status_code == 200 and computed["statistics"] == 3
    assert corrected.json()["protocol"]["positive"] == "yes"  # a MET word, by default

    patched = client.patch(f"/projects/{pid}", json={"decision": {"positive_label": "no"}})
    assert patched.status_code == 200, patched.text
    again = client.get(f"/projects/{pid}/report")
    assert again.status_code == 200 and computed["statistics"] == 4
    assert again.json()["protocol"]["positive"] == "no"
