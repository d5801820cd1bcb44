"""Anytime-valid monitoring in the service (issue 12): decision settings, the monitoring block of
/reliability in the arrival order of §8.2, fixed mode reported provisional until the planned overlap."""

from __future__ import annotations

import re

import numpy as np
import pytest
from fastapi.testclient import TestClient

from planner.sequential import monitor_judge
from service.documents.monitoring import seeded_item_keys

LABELS = ["pass", "fail"]
RATERS = {
    "judge": ("judge", 0.95),
    "prim": ("primary", 0.85),
    "h2": ("human", 0.85),
    "h3": ("human", 0.85),
}


def interleaved_project(
    c: TestClient, n_items: int = 240, seed: int = 0, h3_items: int | None = None, look: bool = False
) -> tuple[str, np.ndarray]:
    """Every rater labels every item (h3 only the first ``h3_items``); labels arrive shuffled, in four writes
    (with ``look``, the decision read after each). The project's item-order seed is ``seed`` too: the monitor's
    e-values depend on the order it reads ties in, and a random seed left about 3 in 100 projects open."""
    pid = c.post("/projects", json={"name": "mon", "labels": LABELS, "order_seed": seed}).json()["id"]
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(n_items)])
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    columns, rows = [], []
    for ext, (kind, accuracy) in RATERS.items():
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
        codes = np.where(rng.random(n_items) < accuracy, truth, 1 - truth)
        if ext == "h3" and h3_items is not None:
            codes[h3_items:] = -1
        columns.append(codes)
        rows += [{"item": f"i{i}", "rater": ext, "value": LABELS[v]} for i, v in enumerate(codes) if v >= 0]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    for part in np.array_split(np.arange(len(rows)), 4):
        assert c.post(f"/projects/{pid}/labels", json=[rows[i] for i in part]).status_code == 200
        if look:
            assert c.get(f"/projects/{pid}/reliability").status_code == 200
            c.app.state.documents.settle()  # type: ignore[attr-defined]  # the opening is stored in the background
    return pid, np.column_stack(columns)


def label_seqs(c: TestClient, pid: str, shape: tuple[int, int]) -> np.ndarray:
    """Each current label's seq, read from the label export (not from the service's matrix)."""
    order = np.full(shape, -1, dtype=np.int64)
    col = {name: k for k, name in enumerate(RATERS)}
    cursor = None
    while True:
        params = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        page = c.get(f"/projects/{pid}/labels", params=params).json()
        for row in page["items"]:
            order[int(row["item"][1:]), col[row["rater"]]] = row["seq"]
        cursor = page["next_cursor"]
        if not cursor:
            return order


def arrival_ranks(c: TestClient, pid: str, seqs: np.ndarray) -> np.ndarray:
    """The service's arrival ranks (docs/method.md §8.2) from the labels' seqs: a label is ranked at the last seq
    of its write (``interleaved_project``'s four equal writes), the first write, read before any look, at its own."""
    ends = np.cumsum([part.size for part in np.array_split(np.arange(int((seqs >= 0).sum())), 4)])
    assert c.get(f"/projects/{pid}").json()["opening_seq"] == ends[0]
    return np.where(seqs >= 0, ends[np.searchsorted(ends, np.maximum(seqs, 1))], -1)


def test_anytime_is_the_default_and_the_block_follows_the_arrival_ranks(client):
    pid, codes = interleaved_project(client, look=True)
    doc = client.get(f"/projects/{pid}/reliability").json()
    assert doc["monitoring_mode"] == "anytime" and doc["provisional"] is False
    block = doc["monitoring"]
    ranks = arrival_ranks(client, pid, label_seqs(client, pid, codes.shape))
    rows = np.argsort(seeded_item_keys(codes.shape[0], client.get(f"/projects/{pid}").json()["order_seed"]))
    expected = monitor_judge(codes[rows], judge=0, humans=[1, 2, 3], n_labels=2, order=ranks[rows])
    assert doc["decision"] == block["decision"] == expected.decision == "pass"
    assert block["decided_at_label_seq"] == expected.decided_at
    assert block["looks"] == expected.looks
    assert doc["fixed_decision"] in {"pass", "reject", "inconclusive"}
    for got, want in zip(block["raters"], expected.raters, strict=True):
        assert got["status"] == want.status and got["n"] == want.n
        assert got["e_value"] == pytest.approx(want.e_value, rel=1e-9)
        assert got["cs"] == pytest.approx([want.cs.low, want.cs.high])
        band = got["band"]
        assert band[-1]["n"] == want.n and band[-1]["lower"] == pytest.approx(want.cs.low)
        assert all(a["label_seq"] <= b["label_seq"] for a, b in zip(band, band[1:], strict=False))
        assert all(p["lower"] <= p["upper"] for p in band)


def test_the_etag_scheme_is_unchanged(client):
    pid, _ = interleaved_project(client, n_items=60)
    first = client.get(f"/projects/{pid}/reliability")
    again = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    patch = {"decision": {"monitoring": "fixed"}}
    assert client.patch(f"/projects/{pid}", json=patch).status_code == 200
    fixed = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": first.headers["etag"]})
    assert fixed.status_code == 200 and fixed.json()["monitoring_mode"] == "fixed"


def test_fixed_mode_is_provisional_until_every_secondary_has_the_planned_m(client):
    pid, _ = interleaved_project(client, n_items=120, h3_items=80)
    assert client.patch(f"/projects/{pid}", json={"decision": {"monitoring": "fixed"}}).status_code == 200
    doc = client.get(f"/projects/{pid}/reliability").json()
    assert doc["provisional"] is True and "no plan" in doc["reason"]
    assert doc["decision"] == doc["fixed_decision"]
    assert doc["monitoring"]["mode"] == "fixed"  # still shown, for comparison
    body = {"source": "prior", "p_h": 0.85, "p_j": 0.95, "m": 100, "design": "strat"}
    assert client.post(f"/projects/{pid}/plan", json=body).status_code == 201
    doc = client.get(f"/projects/{pid}/reliability").json()
    assert doc["provisional"] is True and "80 of the planned 100" in doc["reason"]
    body["m"] = 80
    assert client.post(f"/projects/{pid}/plan", json=body).status_code == 201
    assert client.get(f"/projects/{pid}/reliability").json()["provisional"] is False


def test_ratio_coefficients_are_fixed_and_have_no_monitoring_block(client):
    pid, _ = interleaved_project(client, n_items=60)
    assert client.patch(f"/projects/{pid}", json={"decision": {"coefficient": "kappa"}}).status_code == 200
    doc = client.get(f"/projects/{pid}/reliability").json()
    assert doc["monitoring_mode"] == "fixed" and doc["monitoring"] is None and doc["provisional"]


def test_alt_test_is_monitored(client):
    pid, codes = interleaved_project(client, n_items=200, seed=3)
    patch = {"decision": {"rule": "alt-test", "multiplicity": "bonferroni"}}
    assert client.patch(f"/projects/{pid}", json=patch).status_code == 200
    block = client.get(f"/projects/{pid}/reliability").json()["monitoring"]
    expected = monitor_judge(
        codes,
        judge=0,
        humans=[1, 2, 3],
        n_labels=2,
        rule="alt-test",
        multiplicity="bonferroni",
        order=label_seqs(client, pid, codes.shape),
    )
    assert (block["decision"], block["multiplicity"]) == (expected.decision, "bonferroni")
    assert [r["status"] for r in block["raters"]] == [r.status for r in expected.raters]


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        ({"monitoring": "sometimes"}, "anytime"),
        ({"coefficient": "kappa", "monitoring": "anytime"}, "ratio"),
        ({"multiplicity": "holm"}, "e-bh"),
    ],
)
def test_bad_monitoring_settings_are_422_and_nothing_is_written(client, decision, message):
    pid = client.post("/projects", json={"name": "bad", "labels": LABELS}).json()["id"]
    before = client.get(f"/projects/{pid}").json()["decision"]
    r = client.patch(f"/projects/{pid}", json={"decision": decision})
    assert r.status_code == 422 and message in r.text
    assert client.get(f"/projects/{pid}").json()["decision"] == before
    created = client.post("/projects", json={"name": "bad2", "labels": LABELS, "decision": decision})
    assert created.status_code == 422 and message in created.text


def test_plans_report_the_monitoring_price_and_both_modes_errors(client):
    pid = client.post("/projects", json={"name": "plan", "labels": LABELS}).json()["id"]
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(2000)])
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    # random lists, which grow past m up to the budget (a shared panel's budget is its m)
    good = client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.90, "design": "random"})
    recipe = good.json()["recipe"]
    block, m = recipe["monitoring"], recipe["m_planned"]
    assert block["simulated"] and block["mode"] == "anytime" and block["m"] == m == block["m_anytime"]
    assert block["m_fixed"] == recipe["m_fixed"] == recipe["m"] < m  # the one-look m beside the monitor's
    assert m < block["budget"] and block["budget_extends_lists"]
    assert block["power_at_m"] >= 0.8 and block["fr"] <= 0.05 + 2 * block["mc_se_max"]
    assert block["fa"] <= 0.05 + 2 * block["mc_se_max"]
    # a judge worse than the margin, planned at a fixed m: no m passes it, and the monitor rarely does
    body = {"source": "prior", "p_h": 0.85, "p_j": 0.75, "m": 150}
    bad = client.post(f"/projects/{pid}/plan", json=body).json()["recipe"]["monitoring"]
    assert bad["judge_within_margin"] is False and bad["m_anytime"] is None and bad["budget"] == 150
    assert bad["fa"] <= 0.05 + 2 * bad["mc_se_max"]
    live = client.get(f"/projects/{pid}/reliability").json()["monitoring"]
    assert live["decision"] == "insufficient_data" and live["budget"] == bad["budget"]


def test_the_dashboard_draws_a_band_per_human_and_names_the_mode(client):
    from service.dashboard.charts import dashboard_charts
    from service.dashboard.notes import monitoring_note
    from service.dashboard.svg import chart_csv, chart_svg
    from service.schemas.documents import ReliabilityDocument

    pid, _ = interleaved_project(client, n_items=120)
    doc = client.get(f"/projects/{pid}/reliability").json()
    chart = {c.id: c for c in dashboard_charts(ReliabilityDocument.model_validate(doc), [], [])}["sequences-1"]
    svg = chart_svg(chart)
    assert svg.count('class="band"') == 3
    # each rater's legend entry lies under the x axis, off the bands (it was drawn over them)
    axis_y = max(float(y) for y in re.findall(r'class="axis"[^>]* y2="([\d.]+)"', svg))
    legend = re.findall(r'<g class="legend"><rect x="[\d.]+" y="([\d.]+)".*?>([^<]*)</text></g>', svg)
    assert sorted(name for _, name in legend) == ["h2", "h3", "prim"]
    assert all(float(y) > axis_y + 30 for y, _ in legend)
    rows = chart_csv(chart).splitlines()
    assert rows[0] == "rater,n,label_seq,lower,upper" and len(rows) == 1 + 3 * 60
    last = {r["rater"]: r for r in doc["monitoring"]["raters"]}
    assert rows[60].split(",")[:3] == ["prim", "120", str(last["prim"]["band"][-1]["label_seq"])]
    assert "anytime-valid" in monitoring_note(ReliabilityDocument.model_validate(doc))
    client.patch(f"/projects/{pid}", json={"decision": {"monitoring": "fixed"}})
    fixed = ReliabilityDocument.model_validate(client.get(f"/projects/{pid}/reliability").json())
    assert "fixed-sample" in monitoring_note(fixed) and "provisional" in monitoring_note(fixed)
