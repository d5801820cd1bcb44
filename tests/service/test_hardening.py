"""Regression tests of the outside attack (issue 16), in process: each failed before its fix."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service.errors import ECHO_CHARS


def small_planned_project(client: TestClient, n_items: int = 3) -> str:
    """The README's quickstart shape: a judge, a primary, one secondary, a few items, a prior plan."""
    pid = client.post("/projects", json={"name": "small", "labels": ["pass", "fail"]}).json()["id"]
    for ext, kind in [("judge", "judge"), ("a1", "primary"), ("a2", "human")]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(n_items)]).status_code == 200
    assert client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9}).status_code == 201
    return pid


# --- 3. dashboard of small projects ---------------------------------------------------------


@pytest.mark.parametrize("n_items", [1, 3, 24])
def test_dashboard_of_a_small_planned_project_renders(client: TestClient, n_items: int) -> None:
    pid = small_planned_project(client, n_items)
    r = client.get(f"/projects/{pid}/dashboard")
    assert r.status_code == 200, r.text
    assert 'id="overlap-curve"' in r.text


# --- 7. non-finite numbers ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e308"])
def test_agreement_refuses_non_finite_interval_values(client: TestClient, value: str) -> None:
    body = '{"labels": ["a", "b"], "scale": "interval", "values": [%s, 1], "matrix": [["a", "b"], ["a", "a"]]}' % value
    r = client.post("/agreement", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["fields"][0]["loc"] == ["body", "values", 0]


def test_non_finite_numbers_are_refused_in_every_request_body(client: TestClient) -> None:
    body = '{"name": "x", "labels": ["a", "b"], "decision": {"epsilon": NaN}}'
    r = client.post("/projects", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text


# --- 13. echoed values are truncated ----------------------------------------------------------


def _assert_short_echo(detail: str, long_value: str) -> None:
    assert long_value[: ECHO_CHARS + 10] not in detail
    assert len(detail) < 3 * ECHO_CHARS + 200, detail


def test_errors_echo_at_most_a_hundred_characters_of_an_input(client: TestClient, project: dict) -> None:
    pid = project["id"]
    long_value = "x" * 5000
    r = client.get(f"/projects/{long_value}")
    assert r.status_code == 404
    _assert_short_echo(r.json()["detail"], long_value)
    assert "5,002 characters" in r.json()["detail"]  # the repr's length, quotes included
    r = client.post(f"/projects/{pid}/labels", json=[{"item": "i0", "rater": "judge", "value": long_value}])
    assert r.status_code == 422
    _assert_short_echo(r.json()["detail"], long_value)
    r = client.get(f"/projects/{pid}/labels", params={"rater": long_value})
    assert r.status_code == 422
    _assert_short_echo(r.json()["detail"], long_value)
    r = client.post("/agreement", json={"labels": ["a", "b"], "matrix": [[long_value, "a"]]})
    assert r.status_code == 422
    _assert_short_echo(r.json()["detail"], long_value)
    assert all(len(f["value"]) < 2 * ECHO_CHARS for f in r.json()["fields"])


def test_validation_errors_cut_long_field_names(client: TestClient, project: dict) -> None:
    long_key = "k" * 5000
    r = client.post(f"/projects/{project['id']}/raters", json={"external_id": "z", "kind": "human", long_key: 1})
    assert r.status_code == 422
    body = r.text
    assert long_key[: ECHO_CHARS + 10] not in body
