"""Issue 6 item 5: the stateless ``POST /agreement``.

Figures are checked against docs/method.md §2's worked example (by hand), against the
``krippendorff`` package (independent), and against ``planner.rater_pairs.summary_table``
on the same codes and seed (the route must pass labels, scale, values and options through).
"""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from planner.rater_pairs import summary_table
from service.routes import agreement as agreement_route

SPEC_EXAMPLE = [["1", "1", "1"], ["1", "2", None], ["2", "2", "2"], ["1", "2", "2"]]


def post(client, **body):
    return client.post("/agreement", json={"labels": ["1", "2"], "matrix": SPEC_EXAMPLE, **body})


def random_matrix(rng: np.random.Generator, labels: list[str], n_items: int, n_raters: int) -> list[list[str | None]]:
    codes = rng.integers(0, len(labels), (n_items, n_raters))
    codes[rng.random(codes.shape) < 0.3] = -1
    return [[labels[c] if c >= 0 else None for c in row] for row in codes]


def as_codes(matrix: list[list[str | None]], labels: list[str]) -> np.ndarray:
    return np.array([[labels.index(v) if v is not None else -1 for v in row] for row in matrix])


def test_spec_worked_example(client):
    r = post(client, n_resamples=200, seed=0)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["n_items"], body["n_raters"], body["scale"]) == (4, 3, "nominal")
    alpha = body["coefficients"]["alpha"]
    assert alpha["statistic"] == pytest.approx(1 / 3, abs=1e-12) and alpha["defined"] is True
    assert alpha["n_items"] == 4 and alpha["interval_method"] == "bca" and alpha["approximate"] is True
    low, high = alpha["interval"]
    assert low <= high
    # the missing rating restored as "1": alpha = 7/18 (docs/method.md §2)
    full = [row if None not in row else ["1", "2", "1"] for row in SPEC_EXAMPLE]
    restored = client.post("/agreement", json={"labels": ["1", "2"], "matrix": full, "n_resamples": 50}).json()
    assert restored["coefficients"]["alpha"]["statistic"] == pytest.approx(7 / 18, abs=1e-12)
    assert set(body["coefficients"]) == {"po", "kappa", "alpha", "ac1"}


@pytest.mark.parametrize("scale", ["nominal", "ordinal", "interval"])
def test_equals_summary_table_on_the_same_codes(client, scale):
    labels = ["none", "low", "mid", "high"]
    matrix = random_matrix(np.random.default_rng(5), labels, 60, 4)
    values = [0.0, 1.0, 2.5, 7.0] if scale == "interval" else None
    r = client.post(
        "/agreement",
        json={
            "labels": labels,
            "scale": scale,
            "matrix": matrix,
            "values": values,
            "confidence_level": 0.9,
            "n_resamples": 300,
            "seed": 11,
        },
    )
    assert r.status_code == 200, r.text
    expected = summary_table(
        as_codes(matrix, labels), n_labels=4, scale=scale, values=values, confidence_level=0.9, n_resamples=300, rng=11
    )
    assert r.json()["coefficients"] == {k: e.as_dict() for k, e in expected.items()}
    assert (r.json()["confidence_level"], r.json()["n_resamples"]) == (0.9, 300)
    assert "Deprecation" not in r.headers


def test_the_deprecated_level_is_accepted_for_one_release_with_a_deprecation_header(client):
    """``level`` was /agreement's name for the confidence level; it still works, and says it is deprecated."""
    body = {"labels": ["a", "b"], "matrix": [["a", "b"], ["a", "a"], ["b", "b"]], "n_resamples": 50, "seed": 3}
    new = client.post("/agreement", json={**body, "confidence_level": 0.8})
    old = client.post("/agreement", json={**body, "level": 0.8})
    assert (new.status_code, old.status_code) == (200, 200), old.text
    assert old.json() == new.json() and new.json()["confidence_level"] == new.json()["level"] == 0.8
    assert old.headers["Deprecation"].startswith("@") and "level" in old.headers["X-Deprecated-Names"]
    assert "Deprecation" not in new.headers
    both = client.post("/agreement", json={**body, "level": 0.8, "confidence_level": 0.9})
    assert both.status_code == 422 and "confidence_level" in both.text


@pytest.mark.parametrize("scale", ["nominal", "ordinal", "interval"])
def test_alpha_equals_the_krippendorff_package(client, scale):
    labels = ["a", "b", "c"]
    matrix = random_matrix(np.random.default_rng(8), labels, 40, 5)
    r = client.post("/agreement", json={"labels": labels, "scale": scale, "matrix": matrix, "n_resamples": 20})
    data = as_codes(matrix, labels).T.astype(float)
    data[data < 0] = np.nan
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement=scale, value_domain=[0, 1, 2])
    assert r.json()["coefficients"]["alpha"]["statistic"] == pytest.approx(expected, abs=1e-9)


def test_undefined_is_null_with_a_reason_not_zero(client):
    r = client.post("/agreement", json={"labels": ["x", "y"], "matrix": [["x", "x"], ["x", "x"], ["x", None]]})
    assert r.status_code == 200, r.text
    coefficients = r.json()["coefficients"]
    assert coefficients["po"]["statistic"] == 1.0
    alpha = coefficients["alpha"]
    assert alpha["defined"] is False and alpha["statistic"] is None and alpha["reason"]
    assert alpha["interval"] == [None, None]


def test_unknown_label_is_422_naming_row_and_column(client):
    matrix = [["1", "2"], ["2", "1"], ["1", "3"]]
    r = client.post("/agreement", json={"labels": ["1", "2"], "matrix": matrix})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "unknown_label"
    assert "matrix[2][1]" in body["detail"] and "'3'" in body["detail"]
    assert body["fields"][0]["loc"] == ["body", "matrix", 2, 1]


BAD = {
    "ragged rows": ({"matrix": [["1", "2"], ["1"]]}, "ragged_matrix", "row 1 has 1"),
    "one rater": ({"matrix": [["1"], ["2"]]}, "invalid", "two columns"),
    "empty matrix": ({"matrix": []}, "validation_error", "matrix"),
    "number as a label": ({"matrix": [["1", 2]]}, "validation_error", "matrix"),
    "too many resamples": ({"n_resamples": 10_001}, "validation_error", "n_resamples"),
    "level of 1": ({"level": 1.0}, "validation_error", "level"),
    "confidence level of 1": ({"confidence_level": 1.0}, "validation_error", "confidence_level"),
    "unknown scale": ({"scale": "ratio"}, "validation_error", "scale"),
    "duplicate labels": ({"labels": ["1", "1"]}, "validation_error", "distinct"),
    "values on a nominal scale": ({"values": [1.0, 2.0]}, "invalid", "interval"),
    "values of the wrong length": ({"scale": "interval", "values": [1.0, 2.0, 3.0]}, "invalid", "one number per label"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_bodies_are_422(client, case):
    change, code, mentioned = BAD[case]
    r = post(client, **change)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == code and mentioned in r.text


def test_matrix_over_the_cell_limit_is_413(client, monkeypatch):
    monkeypatch.setattr(agreement_route, "MAX_CELLS", 11)
    r = post(client)  # 4 rows x 3 columns = 12 cells
    assert r.status_code == 413, r.text
    assert r.json()["error"] == "matrix_too_large"
    monkeypatch.setattr(agreement_route, "MAX_CELLS", 12)
    assert post(client, n_resamples=10).status_code == 200


def test_any_valid_key_and_no_key(client, project):
    viewer = client.post(f"/projects/{project['id']}/keys", json={"role": "viewer"}).json()["key"]
    r = client.post(
        "/agreement",
        json={"labels": ["1", "2"], "matrix": SPEC_EXAMPLE, "n_resamples": 10},
        headers={"Authorization": f"Bearer {viewer}"},
    )
    assert r.status_code == 200, r.text
    r = client.post("/agreement", json={"labels": ["1", "2"], "matrix": SPEC_EXAMPLE}, headers={"Authorization": ""})
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"


def test_openapi_documents_the_endpoint(client):
    op = client.get("/openapi.json").json()["paths"]["/agreement"]["post"]
    assert {"200", "401", "413", "422"} <= set(op["responses"])
    assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/AgreementRead")
