"""A sliced project's certificate carries the slices' headline, recomputed by verification (§3b, §10)."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from planner.certificate import certified_result, label_snapshot, verify_certificate
from tests.service.test_certificates import history
from tests.service.test_reliability_slices import _project


def test_the_certificate_leads_with_the_failing_slice_as_the_document_does(client: TestClient) -> None:
    pid = _project(client, monitoring="fixed", slices="feature:language", slice_epsilon={"en": 0.1})
    s = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 100}).json()
    frozen = s["predicate"]["slices"]
    assert frozen["by"] == "feature:language" and frozen["slice_epsilon"] == {"en": 0.1}
    rows = history(client, pid)
    items = sorted({r["item"] for r in rows if r["value"] not in (None, "")})  # the certified items, by place
    by_item = {items[place]: value for place, value in frozen["values"]}
    assert len(by_item) == 120 and by_item["i0"] == "en" and by_item["i90"] == "de"
    assert not any(f'"{item}"' in json.dumps(s) for item in items)  # places, no item id: viewers read it
    result = s["predicate"]["result"]["slices"]
    doc = client.get(f"/projects/{pid}/reliability", params={"by": "feature:language"}).json()["slices"]
    assert result["headline"] == doc["headline"] == "passes overall; fails on slice de (omega 0.00, d -0.17)"
    assert result["failing"] == ["de"] and result["n_items_without"] == 0  # "bare" has no label
    assert [(x["value"], x["n_items"], x["epsilon"], x["decision"]) for x in result["slices"]] == [
        ("de", 30, 0.08, "reject"),
        ("en", 90, 0.1, "pass"),
    ]
    assert [x["omega"] for x in result["slices"]] == [x["omega"] for x in doc["slices"]]
    assert verify_certificate(s, rows).match
    moved = json.loads(json.dumps(s))
    assert moved["predicate"]["slices"]["values"][0] == [items.index("i0"), "en"]
    moved["predicate"]["slices"]["values"][0][1] = "de"  # one item moved to the failing slice
    found = {m.field for m in verify_certificate(moved, rows).mismatches}
    assert "report" in found and "result.slices.slices[0].n_items" in found
    earlier = json.loads(json.dumps(s["predicate"]))  # certificates before places named items by id
    earlier["slices"]["values"] = by_item
    snapshot = label_snapshot(rows, label_seq=s["predicate"]["label_seq"])
    assert certified_result(snapshot, earlier)["slices"] == result


def test_a_project_without_slices_certifies_as_before(client: TestClient) -> None:
    pid = _project(client, monitoring="fixed")
    p = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()["predicate"]
    assert "slices" not in p and "slices" not in p["result"]


def test_the_work_bound_counts_each_slice_as_a_decision(client: TestClient) -> None:
    pid = _project(client, monitoring="fixed", slices="feature:language")
    limit = 480 * 100 * 2  # 480 label rows, 100 resamples: room for two decisions, not the judge's and two slices'
    client.app.state.settings = client.app.state.settings.model_copy(update={"certificate_max_work": limit})
    r = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 100})
    assert r.status_code == 413 and "480 label rows x 100 resamples x 3 decisions" in r.json()["detail"], r.text
    plain = _project(client, monitoring="fixed")
    assert client.post(f"/projects/{plain}/certificates", json={"n_resamples": 100}).status_code == 201
