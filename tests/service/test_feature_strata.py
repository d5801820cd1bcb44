"""Neyman plans stratified on a supplied item feature (docs/method.md §9): items carry
``features`` on upload, ``strata: "feature:<name>"`` allocates the overlap across its values
with ``S_h`` from the prior or the pilot, assignments store inclusion probabilities, and the
reliability document weights by their inverse."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.decision import validate_judge
from planner.neyman import neyman_allocation
from service.schemas.documents import ReliabilityDocument
from tests.service.test_neyman_plans import stored_inclusion
from tests.service.test_plans import PRIOR, full_list, make_plan, post_labels

N_ITEMS = 300
DOMAINS = np.array(["news"] * 180 + ["legal"] * 80 + ["medical"] * 40)
JUDGE_ACCURACY = {"news": 0.95, "legal": 0.85, "medical": 0.6}


def _labels(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, N_ITEMS)
    judge_p = np.array([JUDGE_ACCURACY[d] for d in DOMAINS])

    def rater(p: float | np.ndarray) -> np.ndarray:
        return np.where(rng.random(N_ITEMS) < p, truth, 1 - truth)

    return {"prim": rater(0.85), "judge": rater(judge_p), "h2": rater(0.85), "h3": rater(0.85)}


def _words(codes: np.ndarray, items) -> dict[str, str]:
    return {f"i{i}": ("pass", "fail")[int(codes[i])] for i in items}


def _project(client, features) -> str:
    pid = client.post("/projects", json={"name": "features", "labels": ["pass", "fail"]}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{i}", "features": features(i)} for i in range(N_ITEMS)]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    return pid


def _features(i: int) -> dict:
    return {
        "domain": str(DOMAINS[i]),
        "length": i,  # one item per value
        "rare": "odd" if i == 7 else "common",  # one value with a single item
        "partial": "x" if i % 3 else None,  # a third of the items without a value
        "flag": [True, 1][i % 2],  # true and 1 are different values
    }


def test_feature_strata_that_cannot_stratify_are_422_and_nothing_is_planned(client):
    pid = _project(client, _features)
    cases = {
        "feature:topic": "no item has the feature 'topic'",
        "feature:length": "has 300 distinct values",
        "feature:rare": "hold a single item ('\"odd\"')",
        "feature:partial": "100 of 300 items have no value for the feature 'partial' (e.g. 'i0', 'i3'",
        "feature:": "strata must be 'agreement', 'labels' or 'feature:<name>'",
        "domain": "strata must be 'agreement', 'labels' or 'feature:<name>'",
        "feature:" + "z" * 300: "at most 200 characters",
    }
    for strata, message in cases.items():
        r = client.post(f"/projects/{pid}/plan", json={"design": "neyman", "strata": strata, "m": 40, **PRIOR})
        assert r.status_code == 422, (strata, r.text)
        assert message in r.json()["detail"] + str(r.json().get("fields")), (strata, r.text)
        assert len(r.text) < 2000
    for design in ("strat", "auto"):
        r = client.post(f"/projects/{pid}/plan", json={"design": design, "strata": "feature:domain", **PRIOR})
        assert r.status_code == 422 and f"design '{design}' has none" in r.text, r.text
    assert client.get(f"/projects/{pid}/plan").status_code == 404
    # true and 1 are two strata of 150 items each
    plan = make_plan(client, pid, design="neyman", strata="feature:flag", m=40, seed=1, **PRIOR)
    assert plan["recipe"]["neyman"]["strata"] == ["flag = 1", "flag = True"]
    assert plan["recipe"]["neyman"]["stratum_sizes"] == [150, 150]


def _hand_prior_sd(agree_share: float) -> float:
    """P(r_k = primary | stratum) from the channel (p_h .85, p_j .90, two labels), by hand."""
    given_agree = (0.85 * 0.9 * 0.85 + 0.15 * 0.1 * 0.15) / (0.85 * 0.9 + 0.15 * 0.1)
    given_disagree = (0.85 * 0.1 * 0.85 + 0.15 * 0.9 * 0.15) / (0.85 * 0.1 + 0.15 * 0.9)
    p = agree_share * given_agree + (1 - agree_share) * given_disagree
    return math.sqrt(p * (1 - p))


def test_neyman_by_feature_end_to_end(client, engine):
    pid = _project(client, _features)
    labels = _labels(3)
    post_labels(client, pid, "prim", _words(labels["prim"], range(N_ITEMS)))
    post_labels(client, pid, "judge", _words(labels["judge"], range(N_ITEMS)))
    plan = make_plan(client, pid, purpose="certify", design="neyman", strata="feature:domain", m=90, seed=4, **PRIOR)
    summary = plan["recipe"]["neyman"]
    order = ["legal", "medical", "news"]  # values in sorted order
    assert summary["strata"] == [f"domain = '{d}'" for d in order]
    assert summary["feature"] == "domain" and summary["weighting"] == "ht"
    sizes = [int((DOMAINS == d).sum()) for d in order]
    assert summary["stratum_sizes"] == sizes
    agree = labels["judge"] == labels["prim"]
    sds = [_hand_prior_sd(float(agree[DOMAINS == d].mean())) for d in order]
    assert summary["stratum_sd"] == pytest.approx(sds, abs=1e-12)
    allocation = summary["allocation"]
    assert allocation == neyman_allocation(sizes, sds, 90).tolist() and sum(allocation) == 90
    # The judge is weakest on medical items: that stratum's spread is largest and it gets more than its share.
    assert allocation[1] / 90 > sizes[1] / N_ITEMS

    panel = [int(i[1:]) for i in full_list(client, pid, "h2")]
    assert [int(i[1:]) for i in full_list(client, pid, "h3")] == panel
    assert [int((DOMAINS[panel] == d).sum()) for d in order] == allocation
    stored = stored_inclusion(engine, pid, "h2")
    share = {d: a / s for d, a, s in zip(order, allocation, sizes, strict=True)}
    prob = np.array([share[d] for d in DOMAINS])
    assert [stored[f"i{i}"] for i in panel] == pytest.approx(prob[panel].tolist())

    for rater in ("h2", "h3"):
        post_labels(client, pid, rater, _words(labels[rater], panel))
    doc = client.get(f"/projects/{pid}/reliability").json()
    ReliabilityDocument.model_validate(doc)
    assert doc["weighting"] == "ht" and doc["monitoring"]["weighting"] == "ht"
    codes = np.full((N_ITEMS, 4), -1)
    codes[:, 0], codes[:, 3] = labels["prim"], labels["judge"]
    for column, rater in ((1, "h2"), (2, "h3")):
        codes[panel, column] = labels[rater][panel]
    weighted = validate_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, inclusion=prob, n_resamples=10)
    served = {r["rater"]: r["d"] for r in doc["raters"]}
    for r, name in zip(weighted.raters, ("prim", "h2", "h3"), strict=True):
        assert served[name] == pytest.approx(r.d, abs=1e-9)

    # A pilot plan takes each stratum's S_h from its pilot pairs (secondary vs primary), add-one smoothed.
    pilot = make_plan(
        client, pid, purpose="certify", design="neyman", strata="feature:domain", source="pilot", m=120, seed=5
    )["recipe"]["neyman"]
    expected = []
    for d in order:
        rows = [i for i in panel if DOMAINS[i] == d]
        agreeing = sum(int(labels[h][i] == labels["prim"][i]) for h in ("h2", "h3") for i in rows)
        rate = (agreeing + 1) / (2 * len(rows) + 2)
        expected.append(math.sqrt(rate * (1 - rate)))
    assert pilot["stratum_sd"] == pytest.approx(expected, abs=1e-12)
    assert "pilot" in pilot["sd_source"] and sum(pilot["allocation"]) == 120
