"""Plans that use every label (issue 14): m for the paired, PPI and Neyman estimates, the
Neyman panel with stored inclusion probabilities, and a reliability document that weights
by their inverse (docs/method.md §9)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sqlalchemy import Engine, func, select

from planner.decision import validate_judge
from planner.neyman import neyman_allocation, prior_variances
from planner.sequential import monitor_judge
from service.data.models import Assignment, CurrentLabel, Item, Rater
from service.documents.monitoring import seeded_item_keys
from service.schemas.documents import ReliabilityDocument
from tests.service.test_plans import PRIOR, full_list, make_plan, post_labels, setup_project

N_ITEMS = 300


def corpus(seed: int) -> dict[str, np.ndarray]:
    """Two-label corpus: primary and secondaries right w.p. .85, the judge w.p. .90."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, N_ITEMS)

    def rater(p: float) -> np.ndarray:
        return np.where(rng.random(N_ITEMS) < p, truth, 1 - truth)

    return {"prim": rater(0.85), "judge": rater(0.9), "h2": rater(0.85), "h3": rater(0.85)}


def words(codes: np.ndarray, items: list[int] | None = None) -> dict[str, str]:
    index = range(N_ITEMS) if items is None else items
    return {f"i{i}": ("pass", "fail")[int(codes[i])] for i in index}


def stored_inclusion(engine: Engine, pid: str, rater: str) -> dict[str, float]:
    """Item external id -> the inclusion probability stored on the rater's assignments."""
    with engine.connect() as conn:
        return dict(
            conn.execute(
                select(Item.external_id, Assignment.inclusion_probability)
                .join(Item, Item.id == Assignment.item_id)
                .join(Rater, Rater.id == Assignment.rater_id)
                .where(Rater.project_id == pid, Rater.external_id == rater)
            ).all()
        )


def test_plan_reports_m_for_every_estimator_and_the_labels_saved(client, project):
    plan = make_plan(client, project["id"], purpose="certify", design="random", **PRIOR)
    by = plan["recipe"]["by_estimator"]
    # Paired: the exact lattice rate's envelope (117 -> 120, docs/method.md §4); PPI and Neyman:
    # the normal recipe on their reduced variances (PPI++ at .9 of the promise, docs/method.md §9).
    assert by["m"] == {"paired": 120, "ppi": 90, "neyman": 84}
    k = plan["recipe"]["n_humans"]
    assert by["human_labels_saved"] == {"ppi": (120 - 90) * (k - 1), "neyman": (120 - 84) * (k - 1)}
    assert by["judge_agreement"] == pytest.approx(0.85 * 0.9 + 0.15 * 0.1)


def test_plan_check_shows_fr_and_fa_for_each_estimator(client):
    pid = setup_project(client, 2000)
    check = make_plan(client, pid, purpose="certify", **PRIOR)["recipe"]["by_estimator"]["check"]
    assert check["promise_fr"] == 0.025 and check["trials"] == 1000
    rows = check["estimators"]
    recipe_m = {"paired": 120, "ppi": 90, "neyman": 84}
    assert {e: r["raised_from"] or r["m"] for e, r in rows.items()} == recipe_m
    for e, r in rows.items():  # the MC error inside the promise: kept, or not shown broken at the recipe's m
        assert 0 <= r["fa"] <= 1
        assert r["keeps_promise"] == (r["promise_status"] == "kept") == (r["fr"] + 2 * r["fr_se"] <= 0.025)
        assert r["promise_status"] == "kept" or (r["raised_from"] is None and r["promise_status"] == "unresolved")
        assert r["raised_from"] is None or r["m"] > r["raised_from"] == recipe_m[e]
    warned = {w.split(" estimate")[0].split("the ")[-1] for w in check_warnings(pid, client)}
    assert warned == {e for e, r in rows.items() if r["raised_from"] is not None}


def check_warnings(pid: str, client) -> list[str]:
    return client.get(f"/projects/{pid}/plan").json()["recipe"]["by_estimator"]["warnings"]


def test_neyman_needs_the_judge_and_primary_labels_first(client):
    pid = setup_project(client, 50)
    r = client.post(f"/projects/{pid}/plan", json={"design": "neyman", **PRIOR})
    assert r.status_code == 409 and r.json()["error"] == "no_strata", r.text


def test_neyman_panel_weights_and_reliability(client, engine):
    pid = setup_project(client, N_ITEMS)
    labels = corpus(5)
    post_labels(client, pid, "prim", words(labels["prim"]))
    post_labels(client, pid, "judge", words(labels["judge"]))
    plan = make_plan(
        client, pid, purpose="certify", design="neyman", seed=3, m=80, **PRIOR
    )  # §4's m, not the monitor's
    m = plan["m"]
    assert plan["design"] == "neyman" and m == plan["recipe"]["m"]  # the recipe for the project's rule
    summary = plan["recipe"]["neyman"]
    agree = labels["judge"] == labels["prim"]
    sizes = [int((~agree).sum()), int(agree.sum()), 0]
    assert summary["stratum_sizes"] == sizes
    sds = prior_variances(0.85, 0.9, n_labels=2).stratum_sd
    expected = neyman_allocation(sizes, [*sds, 0.5], m).tolist()
    assert summary["allocation"] == expected and summary["weighting"] == "ht"

    panel = full_list(client, pid, "h2")
    assert full_list(client, pid, "h3") == panel
    index = [int(i[1:]) for i in panel]
    assert np.bincount(agree[index], minlength=2).tolist() == expected[:2]
    stored = stored_inclusion(engine, pid, "h2")
    prob = np.where(agree, expected[1] / sizes[1], expected[0] / sizes[0])
    assert [stored[f"i{i}"] for i in index] == pytest.approx(prob[index].tolist())

    for rater in ("h2", "h3"):
        post_labels(client, pid, rater, words(labels[rater], index))
    doc = client.get(f"/projects/{pid}/reliability").json()
    ReliabilityDocument.model_validate(doc)
    assert doc["weighting"] == "ht"
    codes = np.full((N_ITEMS, 4), -1)
    codes[:, 0], codes[:, 3] = labels["prim"], labels["judge"]
    for column, rater in ((1, "h2"), (2, "h3")):
        codes[index, column] = labels[rater][index]
    weighted = validate_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, inclusion=prob, n_resamples=10)
    plain = validate_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, n_resamples=10)
    served = {r["rater"]: r["d"] for r in doc["raters"]}
    for r, name in zip(weighted.raters, ("prim", "h2", "h3"), strict=True):
        assert served[name] == pytest.approx(r.d, abs=1e-9)
    assert any(not math.isclose(a.d, b.d) for a, b in zip(weighted.raters, plain.raters, strict=True))

    # The anytime monitor is served under the Neyman plan, weighted (docs/method.md §9), in the arrival order of
    # §8.2: each label at its write's rank (read from the table), those of the opening at its rank, ties in the
    # project's seeded item order, and each secondary's labels read in its panel's order (rule 4).
    assert doc["monitoring_mode"] == "anytime" and doc["provisional"] is False
    block = doc["monitoring"]
    assert block["weighting"] == "ht" and doc["decision"] == block["decision"]
    columns = {"prim": 0, "h2": 1, "h3": 2, "judge": 3}
    order = np.full(codes.shape, -1)
    with engine.connect() as conn:
        for item, rater, rank in conn.execute(
            select(Item.external_id, Rater.external_id, func.coalesce(CurrentLabel.rank, CurrentLabel.seq))
            .join(Item, Item.id == CurrentLabel.item_id)
            .join(Rater, Rater.id == CurrentLabel.rater_id)
            .where(CurrentLabel.project_id == pid)
        ):
            order[int(item[1:]), columns[rater]] = rank
    client.app.state.documents.settle()  # type: ignore[attr-defined]  # the opening is stored in the background
    project = client.get(f"/projects/{pid}").json()
    order = np.where(order >= 0, np.maximum(order, project["opening_seq"]), -1)
    tiebreak = seeded_item_keys(N_ITEMS, project["order_seed"])
    call = {
        "judge": 3,
        "humans": [0, 1, 2],
        "n_labels": 2,
        "order": order,
        "tiebreak": tiebreak,
        "budget": block["budget"],
        "lists": [(column, np.array(index), max(plan["label_seq"], project["opening_seq"])) for column in (1, 2)],
    }
    expected = monitor_judge(codes, **call, inclusion=np.where(order[:, 1] >= 0, prob, 1.0))
    unweighted = monitor_judge(codes, **call)
    assert block["decision"] == expected.decision
    for served_rater, r, u in zip(block["raters"], expected.raters, unweighted.raters, strict=True):
        assert served_rater["d"] == pytest.approx(r.d, abs=1e-12)
        assert served_rater["e_value"] == pytest.approx(r.e_value, rel=1e-9)
        assert served_rater["n"] == r.n == u.n
    assert any(not math.isclose(r.d, u.d) for r, u in zip(expected.raters, unweighted.raters, strict=True))


def test_other_designs_store_their_inclusion_probability(client, engine):
    pid = setup_project(client, 200)
    make_plan(client, pid, design="random", m=50, seed=1, **PRIOR)
    full_list(client, pid, "h2")
    with engine.connect() as conn:
        values = (
            conn.execute(
                select(Assignment.inclusion_probability)
                .join(Rater, Rater.id == Assignment.rater_id)
                .where(Rater.project_id == pid, Rater.external_id == "h2")
            )
            .scalars()
            .all()
        )
    assert len(values) == 50 and set(values) == {0.25}
    doc = client.get(f"/projects/{pid}/reliability").json()
    assert doc["weighting"] == "none"


def test_reliability_with_the_ppi_estimator(client):
    r = client.post(
        "/projects",
        json={"name": "bad", "labels": ["pass", "fail"], "decision": {"estimator": "ppi", "rule": "alt-test"}},
    )
    assert r.status_code == 422 and "estimator 'ppi'" in r.text, r.text
    pid = client.post(
        "/projects", json={"name": "ppi", "labels": ["pass", "fail"], "decision": {"estimator": "ppi"}}
    ).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{i}"} for i in range(N_ITEMS)]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    labels = corpus(9)
    overlap = list(range(0, N_ITEMS, 3))
    post_labels(client, pid, "prim", words(labels["prim"]))
    post_labels(client, pid, "judge", words(labels["judge"]))
    for rater in ("h2", "h3"):
        post_labels(client, pid, rater, words(labels[rater], overlap))
    doc = client.get(f"/projects/{pid}/reliability").json()
    ReliabilityDocument.model_validate(doc)
    assert doc["estimator"] == "ppi" and doc["weighting"] == "none"
    codes = np.full((N_ITEMS, 4), -1)
    codes[:, 0], codes[:, 3] = labels["prim"], labels["judge"]
    for column, rater in ((1, "h2"), (2, "h3")):
        codes[overlap, column] = labels[rater][overlap]
    v = validate_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, estimator="ppi", primary=0, n_resamples=10)
    served = {r["rater"]: r for r in doc["raters"]}
    for r, name in zip(v.raters, ("prim", "h2", "h3"), strict=True):
        assert served[name]["d"] == pytest.approx(r.d, abs=1e-9)
        assert served[name]["ci"] == pytest.approx(r.ci.as_list(), abs=1e-9) or name == "prim"
    # The certificate re-derives the same PPI margins (its predicate names the estimator).
    predicate = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()["predicate"]
    assert predicate["decision"]["estimator"] == "ppi" and "weights" not in predicate
    certified = {x["rater"]: x["d"] for x in predicate["result"]["judges"][0]["raters"]}
    assert certified == pytest.approx({name: r["d"] for name, r in served.items()}, abs=1e-9)


def test_neyman_over_label_cells(client):
    pid = setup_project(client, N_ITEMS)
    labels = corpus(6)
    post_labels(client, pid, "prim", words(labels["prim"]))
    post_labels(client, pid, "judge", words(labels["judge"]))
    r = client.post(f"/projects/{pid}/plan", json={"design": "neyman", "strata": "labels", "source": "pilot"})
    assert r.status_code == 422 and "strata 'labels'" in r.text, r.text
    plan = make_plan(client, pid, purpose="certify", design="neyman", strata="labels", m=60, seed=2, **PRIOR)
    summary = plan["recipe"]["neyman"]
    cell = labels["prim"] * 2 + labels["judge"]
    sizes = np.bincount(cell, minlength=5).tolist()
    assert summary["stratum_sizes"] == sizes and len(summary["strata"]) == 5
    # A cell's spread: P(r_k = primary | primary a, judge b) by hand for two labels.
    both = 0.5 * 0.85 * 0.9 * 0.85 + 0.5 * 0.15 * 0.1 * 0.15
    agree_rate = both / (0.5 * 0.85 * 0.9 + 0.5 * 0.15 * 0.1)
    assert summary["stratum_sd"][0] == pytest.approx(math.sqrt(agree_rate * (1 - agree_rate)))
    assert summary["allocation"] == neyman_allocation(sizes, summary["stratum_sd"], 60).tolist()
    panel = [int(i[1:]) for i in full_list(client, pid, "h2")]
    assert np.bincount(cell[panel], minlength=5).tolist() == summary["allocation"]


def test_certificate_of_a_neyman_project_is_weighted_like_reliability(client, engine):
    """The certificate re-derives the decision /reliability serves: weighted by the Neyman panel's
    inverse inclusion (its predicate carries them), and it verifies against the label export."""
    pid = setup_project(client, N_ITEMS)
    labels = corpus(7)
    post_labels(client, pid, "prim", words(labels["prim"]))
    post_labels(client, pid, "judge", words(labels["judge"]))
    make_plan(client, pid, purpose="certify", design="neyman", seed=3, m=80, **PRIOR)  # §4's m, not the monitor's
    index = [int(i[1:]) for i in full_list(client, pid, "h2")]
    assert [int(i[1:]) for i in full_list(client, pid, "h3")] == index
    for rater in ("h2", "h3"):
        post_labels(client, pid, rater, words(labels[rater], index))
    r = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50})
    assert r.status_code == 201, r.text
    statement = r.json()
    predicate = statement["predicate"]
    stored = stored_inclusion(engine, pid, "h2")
    items = sorted(f"i{k}" for k in range(N_ITEMS))  # every item is labelled: the certified items, by place
    assert {items[place]: p for place, p in predicate["weights"]["inclusion"]} == pytest.approx(stored)
    doc = client.get(f"/projects/{pid}/reliability").json()
    certified = {x["rater"]: x["d"] for x in predicate["result"]["judges"][0]["raters"]}
    assert certified == pytest.approx({x["rater"]: x["d"] for x in doc["raters"]}, abs=1e-9)
    codes = np.full((N_ITEMS, 4), -1)
    codes[:, 0], codes[:, 3] = labels["prim"], labels["judge"]
    for column, rater in ((1, "h2"), (2, "h3")):
        codes[index, column] = labels[rater][index]
    plain = validate_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, n_resamples=10)
    names = ("prim", "h2", "h3")
    assert any(not math.isclose(certified[name], r.d) for name, r in zip(names, plain.raters, strict=True))
    rows = [
        json.loads(line)
        for line in client.get(
            f"/projects/{pid}/labels", params={"history": "true", "format": "ndjson"}
        ).text.splitlines()
    ]
    ok = client.post("/certificates/verify", json={"certificate": statement, "labels": rows}).json()
    assert ok["match"] is True, ok
    edited = json.loads(json.dumps(statement))
    edited["predicate"]["weights"]["inclusion"][0][1] = 1.0
    assert client.post("/certificates/verify", json={"certificate": edited, "labels": rows}).json()["match"] is False


def test_a_ppi_project_without_a_primary_is_estimated_paired(client):
    pid = client.post(
        "/projects", json={"name": "ppi, no primary", "labels": ["pass", "fail"], "decision": {"estimator": "ppi"}}
    ).json()["id"]
    for ext in ("judge", "h1", "h2", "h3"):
        kind = "judge" if ext == "judge" else "human"
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert (
        client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(N_ITEMS)]).status_code
        == 200
    )
    labels = corpus(4)
    overlap = list(range(0, N_ITEMS, 2))
    post_labels(client, pid, "judge", words(labels["judge"]))
    for rater, source in (("h1", "prim"), ("h2", "h2"), ("h3", "h3")):
        post_labels(client, pid, rater, words(labels[source], overlap))
    doc = client.get(f"/projects/{pid}/reliability").json()
    ReliabilityDocument.model_validate(doc)
    assert doc["estimator"] == "paired"
    codes = np.full((N_ITEMS, 4), -1)
    codes[:, 3] = labels["judge"]
    for column, source in enumerate(("prim", "h2", "h3")):
        codes[overlap, column] = labels[source][overlap]
    v = validate_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, estimator="paired", n_resamples=10)
    served = {r["rater"]: r["d"] for r in doc["raters"]}
    assert served == pytest.approx({name: r.d for name, r in zip(("h1", "h2", "h3"), v.raters, strict=True)}, abs=1e-9)
