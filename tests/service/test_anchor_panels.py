"""A judge's anchor panel (issue 34, docs/method.md §12): sized by Connor's formula, drawn by Strat over the
primary's labels among the items the judge and the primary share, frozen, and followed as versions re-label it."""

from __future__ import annotations

import math

import numpy as np
from fastapi.testclient import TestClient
from scipy.stats import norm
from sqlalchemy import Engine, text

from tests.service.test_judge_versions import _label, _project

N = 400


def _panel_project(client: TestClient) -> tuple[str, np.ndarray]:
    """400 items, the primary's fail on 30% of them; the judge agrees with it on exactly 90%."""
    pid = _project(client, N)
    primary = (np.arange(N) % 10 < 3).astype(np.int64)  # 120 "fail"
    judge = np.where(np.arange(N) % 10 == 9, 1 - primary, primary)
    _label(client, pid, "prim", primary)
    _label(client, pid, "judge", judge)
    return pid, primary


def test_the_panel_has_connors_size_at_the_independent_discordance_and_strat_proportions(client: TestClient) -> None:
    pid, primary = _panel_project(client)
    r = client.post(f"/projects/{pid}/raters/judge/anchor-panel", json={"drop": 0.1, "seed": 7})
    assert r.status_code == 201, r.text
    panel = r.json()
    # by hand: p0 = .9, p1 = .8, psi = .9 * .2 + .8 * .1 = .26; Connor's n at power .8, level .05
    psi = 0.9 * 0.2 + 0.8 * 0.1
    root = norm.ppf(0.975) * math.sqrt(psi) + norm.ppf(0.8) * math.sqrt(psi - 0.01)
    assert panel["baseline"] == 0.9 and math.isclose(panel["discordance"], psi)
    assert panel["n_items"] == math.ceil(root**2 / 0.01) == 202 == len(set(panel["items"]))
    drawn = primary[[int(x[1:]) for x in panel["items"]]]
    assert abs(int(drawn.sum()) - round(202 * 0.3)) <= 1  # Strat: the primary's fail share, to one item
    assert panel["relabelled"] == {}
    again = client.post(f"/projects/{pid}/raters/judge/anchor-panel", json={"drop": 0.1, "seed": 8})
    assert again.status_code == 409 and again.json()["error"] == "panel_exists"
    assert client.post(f"/projects/{pid}/raters/judge/versions", json={"name": "v2"}).status_code == 201
    relabel = np.full(N, -1)
    anchors = [int(x[1:]) for x in panel["items"][:50]]
    relabel[anchors] = primary[anchors]
    _label(client, pid, "judge@v2", relabel)
    shown = client.get(f"/projects/{pid}/raters/judge/anchor-panel").json()
    assert shown["items"] == panel["items"] and shown["relabelled"] == {"v2": 50}


def test_a_given_discordance_sizes_the_panel_and_a_seed_repeats_the_draw(client: TestClient) -> None:
    pid, _ = _panel_project(client)
    other, _ = _panel_project(client)
    body = {"drop": 0.1, "discordance": 0.2, "power": 0.9, "seed": 3}
    a = client.post(f"/projects/{pid}/raters/judge/anchor-panel", json=body).json()
    b = client.post(f"/projects/{other}/raters/judge/anchor-panel", json=body).json()
    root = norm.ppf(0.975) * math.sqrt(0.2) + norm.ppf(0.9) * math.sqrt(0.2 - 0.01)
    assert a["n_items"] == math.ceil(root**2 / 0.01) and a["baseline"] is None
    assert a["items"] == b["items"]


def test_bad_input_is_422_or_409_and_nothing_is_written(client: TestClient, engine: Engine) -> None:
    pid, _ = _panel_project(client)
    url = f"/projects/{pid}/raters/{{}}/anchor-panel"
    cases = [
        ("prim", {"drop": 0.1}, 422),  # not a judge
        ("judge", {"drop": 0.1, "discordance": 0.05}, 422),  # psi below the drop
        ("judge", {"drop": 1.5}, 422),
        ("judge", {"drop": 0.1, "power": 0}, 422),
        ("judge", {"drop": 0.02}, 409),  # thousands of anchors: the pair shares 400 items
        ("judge", {"drop": 0.1, "criterion": "nope"}, 422),
        ("nobody", {"drop": 0.1}, 404),
    ]
    for rid, body, status in cases:
        r = client.post(url.format(rid), json=body)
        assert r.status_code == status, (rid, body, r.text)
    assert client.post(f"/projects/{pid}/raters/judge/versions", json={"name": "v2"}).status_code == 201
    assert client.post(url.format("judge@v2"), json={"drop": 0.1}).status_code == 422  # a version
    bare = _project(client, 5)  # no shared label: the default discordance is unknown
    r = client.post(f"/projects/{bare}/raters/judge/anchor-panel", json={"drop": 0.1})
    assert r.status_code == 422 and "give discordance" in r.json()["detail"]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM anchor_panels")).scalar() == 0
    assert client.get(url.format("judge")).status_code == 404
