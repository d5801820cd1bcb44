"""The live reliability document and the judge ranking (issue 6): ETag/304 caching by label
sequence, who may read them, insufficient data, several judges, and margins that match an
independent leave-one-out computation (docs/method.md §3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.documents import reliability
from service.routes import reliability as route

LABELS = ["pass", "fail"]


def loo_margins(codes: np.ndarray, judge: int, humans: list[int]) -> dict[int, dict[str, float]]:
    """docs/method.md §3 with F = p_o, written out directly: per held-out human k, on O_k (items labeled
    by the judge, k and at least one other human), m_k, d_k = mean(agree(judge, pool) -
    agree(k, pool)) and the pool score S(r_k; H_k) = mean agree(k, pool)."""
    observed = codes >= 0
    out = {}
    for k in humans:
        pool = [h for h in humans if h != k]
        n_pool = observed[:, pool].sum(axis=1)
        agree_k = sum(observed[:, h] & (codes[:, h] == codes[:, k]) for h in pool)
        agree_j = sum(observed[:, h] & (codes[:, h] == codes[:, judge]) for h in pool)
        o_k = observed[:, k] & observed[:, judge] & (n_pool > 0)
        share_k = agree_k[o_k] / n_pool[o_k]
        share_j = agree_j[o_k] / n_pool[o_k]
        out[k] = {"m": int(o_k.sum()), "d": float(np.mean(share_j - share_k)), "pool": float(np.mean(share_k))}
    return out


def noisy(rng: np.random.Generator, truth: np.ndarray, accuracy: float) -> np.ndarray:
    """Binary symmetric noise channel: the true label with probability ``accuracy``."""
    return np.where(rng.random(truth.size) < accuracy, truth, 1 - truth)


def setup_dense(
    c: TestClient,
    raters: dict[str, tuple[str, float]],
    n_items: int = 200,
    seed: int = 0,
    subsets: dict[str, np.ndarray] | None = None,
) -> tuple[str, np.ndarray]:
    """A binary project where every rater (kind, accuracy) labels every item, or only the item
    indices ``subsets[rater]``; returns the codes (``-1`` = not labeled)."""
    pid = c.post("/projects", json={"name": "rel", "labels": LABELS}).json()["id"]
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(n_items)])
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    columns = []
    for ext, (kind, accuracy) in raters.items():
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
        codes = noisy(rng, truth, accuracy)
        if subsets and ext in subsets:
            codes[np.setdiff1d(np.arange(n_items), subsets[ext])] = -1
        columns.append(codes)
        rows = [{"item": f"i{i}", "rater": ext, "value": LABELS[v]} for i, v in enumerate(codes) if v >= 0]
        assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid, np.column_stack(columns)


def key_for(c: TestClient, pid: str, role: str, rater: str | None = None) -> dict[str, str]:
    r = c.post(f"/projects/{pid}/keys", json={"role": role, **({"rater": rater} if rater else {})})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


def get(c: TestClient, path: str, **headers: str) -> Any:
    r = c.get(path, headers=headers)
    assert r.status_code == 200, r.text
    return r


THREE_HUMANS = {"judge": ("judge", 0.9), "prim": ("primary", 0.85), "h2": ("human", 0.85), "h3": ("human", 0.85)}


# --- caching -----------------------------------------------------------------------------------


def test_unchanged_document_is_304_and_a_label_write_changes_the_etag(client):
    pid, _ = setup_dense(client, THREE_HUMANS, n_items=60)
    first = get(client, f"/projects/{pid}/reliability")
    etag = first.headers["etag"]
    assert etag.startswith('"') and first.json()["label_seq"] == 240
    again = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    listed = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": f'"other", {etag}'})
    assert listed.status_code == 304
    assert get(client, f"/projects/{pid}/reliability").json() == first.json()  # the cached body, unchanged

    current = LABELS[_h2(client, pid)]
    same = client.post(f"/projects/{pid}/labels", json=[{"item": "i0", "rater": "h2", "value": current}])
    assert same.json()["accepted"] == 0  # a duplicate writes nothing: still 304
    assert client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": etag}).status_code == 304

    flipped = LABELS[1 - _h2(client, pid)]
    written = client.post(f"/projects/{pid}/labels", json=[{"item": "i0", "rater": "h2", "value": flipped}])
    assert written.json()["label_seq"] == 241
    fresh = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": etag})
    assert fresh.status_code == 200 and fresh.headers["etag"] != etag
    assert fresh.json()["label_seq"] == 241
    unchanged = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": fresh.headers["etag"]})
    assert unchanged.status_code == 304


def test_a_raters_new_kind_is_a_new_document(client):
    """The cache key counts raters by kind, not only by number: a human made the judge is read as one."""
    raters = {**THREE_HUMANS, "h4": ("human", 0.85)}
    pid, _ = setup_dense(client, raters, n_items=60)
    first = get(client, f"/projects/{pid}/reliability")
    assert [v["judge"] for v in first.json()["judges"]] == ["judge"]
    assert client.patch(f"/projects/{pid}/raters/h4", json={"kind": "judge"}).status_code == 200
    fresh = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": first.headers["etag"]})
    assert fresh.status_code == 200 and fresh.headers["etag"] != first.headers["etag"]
    assert sorted(v["judge"] for v in fresh.json()["judges"]) == ["h4", "judge"]


def _h2(c: TestClient, pid: str) -> int:
    rows = c.get(f"/projects/{pid}/labels", params={"rater": "h2", "limit": 1000}).json()["items"]
    return LABELS.index(next(r["value"] for r in rows if r["item"] == "i0"))


def test_changing_decision_settings_changes_the_etag(client):
    pid, _ = setup_dense(client, THREE_HUMANS, n_items=60)
    before = get(client, f"/projects/{pid}/reliability")
    r = client.patch(f"/projects/{pid}", json={"decision": {"epsilon": 0.2}})
    assert r.status_code == 200, r.text
    after = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": before.headers["etag"]})
    assert after.status_code == 200 and after.json()["epsilon"] == 0.2


def test_new_items_or_raters_change_the_document(client):
    """n_items and the raters list are in the document, so item uploads and new raters must
    change its ETag even though no label was written."""
    pid, _ = setup_dense(client, THREE_HUMANS, n_items=60)
    before = get(client, f"/projects/{pid}/reliability")
    assert before.json()["n_items"] == 60
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"new{i}"} for i in range(5)])
    after = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": before.headers["etag"]})
    assert after.status_code == 200 and after.json()["n_items"] == 65
    assert client.post(f"/projects/{pid}/raters", json={"external_id": "h4", "kind": "human"}).status_code == 201
    latest = client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": after.headers["etag"]})
    assert latest.status_code == 200 and "h4" in [r["rater"] for r in latest.json()["raters"]]


# --- access ------------------------------------------------------------------------------------


def test_viewer_reads_reliability_and_ranking_but_annotator_does_not(client):
    pid, _ = setup_dense(client, THREE_HUMANS, n_items=60)
    viewer = key_for(client, pid, "viewer")
    doc = get(client, f"/projects/{pid}/reliability", **viewer).json()
    assert doc == get(client, f"/projects/{pid}/reliability").json()
    assert get(client, f"/projects/{pid}/ranking", **viewer).json()["order"] == ["judge"]
    annotator = key_for(client, pid, "annotator", "h2")
    r = client.get(f"/projects/{pid}/reliability", headers=annotator)
    assert r.status_code == 403, r.text
    other = client.post("/projects", json={"name": "other", "labels": LABELS}).json()["id"]
    assert client.get(f"/projects/{other}/reliability", headers=viewer).status_code == 404


def test_unknown_criterion_is_422(client, project):
    r = client.get(f"/projects/{project['id']}/reliability", params={"criterion": "tone"})
    assert r.status_code == 422, r.text


# --- insufficient data -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raters",
    [
        {"prim": ("primary", 0.85), "h2": ("human", 0.85)},  # no judge
        {"judge": ("judge", 0.9), "prim": ("primary", 0.85)},  # one human
        {"judge": ("judge", 0.9)},
    ],
)
def test_insufficient_data(client, raters):
    pid, _ = setup_dense(client, raters, n_items=40)
    doc = get(client, f"/projects/{pid}/reliability").json()
    assert doc["decision"] == "insufficient_data" and doc["reason"]
    assert doc["omega"] is None and doc["raters"] == [] and doc["judges"] == []
    assert doc["label_seq"] == 40 * len(raters) and doc["n_items"] == 40
    ranking = get(client, f"/projects/{pid}/ranking").json()
    assert ranking["judges"] == [] and ranking["order"] == [] and ranking["reason"]


def test_no_labels_at_all(client, project):
    doc = get(client, f"/projects/{project['id']}/reliability").json()
    assert doc["decision"] == "insufficient_data" and doc["label_seq"] == 0
    assert all(r["m"] == 0 and r["won"] is None for r in doc["raters"])


# --- the document's numbers --------------------------------------------------------------------


def test_margins_and_pool_score_match_leave_one_out(client):
    raters = {"judge": ("judge", 0.9), "prim": ("primary", 0.85), "h2": ("human", 0.8), "h3": ("human", 0.9)}
    # sparse secondaries: h2 labels items 50.., h3 items ..119; prim labels everything
    subsets = {"h2": np.arange(50, 150), "h3": np.arange(120)}
    pid, codes = setup_dense(client, raters, n_items=150, seed=4, subsets=subsets)
    doc = get(client, f"/projects/{pid}/reliability").json()
    expected = loo_margins(codes, 0, [1, 2, 3])
    names = list(raters)
    assert [r["rater"] for r in doc["raters"]] == names[1:]
    for r in doc["raters"]:
        e = expected[names.index(r["rater"])]
        assert r["m"] == e["m"] == {"prim": 150, "h2": 100, "h3": 120}[r["rater"]]
        assert r["d"] == pytest.approx(e["d"], abs=1e-12)
        assert r["won"] == (e["d"] >= -0.05)
        lo, hi = r["ci"]
        assert lo <= r["d"] <= hi
    assert doc["fixed_omega"] == pytest.approx(np.mean([e["d"] >= -0.05 for e in expected.values()]))
    # anytime mode (the default): omega is the share of humans certified won (docs/method.md §11)
    statuses = [r["status"] for r in doc["monitoring"]["raters"]]
    assert doc["monitoring_mode"] == "anytime" and doc["omega"] == pytest.approx(statuses.count("won") / 3)
    assert doc["human_pool"]["estimate"] == pytest.approx(np.mean([e["pool"] for e in expected.values()]))
    po = doc["coefficients"]["po"]
    assert po["defined"] and po["n_items"] == 150  # every item has the primary and a secondary
    # the fixed rule decides at once; the monitor may still say continue (one write is one arrival, §8.2)
    assert doc["fixed_decision"] in {"pass", "reject", "inconclusive"}
    assert doc["decision"] == doc["monitoring"]["decision"]
    assert doc["judges"][0] == {k: doc[k] for k in doc["judges"][0]}


def test_several_judges_are_each_validated_and_ranked(client):
    raters = {
        "weak": ("judge", 0.6),
        "strong": ("judge", 0.97),
        "prim": ("primary", 0.9),
        "h2": ("human", 0.9),
        "h3": ("human", 0.9),
    }
    pid, codes = setup_dense(client, raters, n_items=300, seed=2)
    doc = get(client, f"/projects/{pid}/reliability").json()
    assert sorted(j["judge"] for j in doc["judges"]) == ["strong", "weak"]
    by_judge = {j["judge"]: j for j in doc["judges"]}
    for name, column in (("weak", 0), ("strong", 1)):
        expected = loo_margins(codes, column, [2, 3, 4])
        assert [r["d"] for r in by_judge[name]["raters"]] == pytest.approx([e["d"] for e in expected.values()])
    assert by_judge["strong"]["decision"] == "pass" and by_judge["weak"]["decision"] == "reject"

    ranking = get(client, f"/projects/{pid}/ranking").json()
    assert ranking["order"] == ["strong", "weak"]
    scores = {j["judge"]: j for j in ranking["judges"]}
    assert scores["strong"]["score"] > scores["weak"]["score"]
    assert scores["strong"]["p_top1"] > 0.95
    assert ranking["margins"][0]["better"] == "strong" and ranking["margins"][0]["margin"] > 0
    etag = client.get(f"/projects/{pid}/ranking").headers["etag"]
    assert client.get(f"/projects/{pid}/ranking", headers={"If-None-Match": etag}).status_code == 304


# --- read-your-writes on a real server ---------------------------------------------------------


def test_the_next_request_sees_a_label_write(database_url):
    """After POST /labels returns, the next GET of the document reflects its ``label_seq``.

    Regression: with FastAPI's default dependency scope the session committed after the
    response was sent, and on SQLite 15-25% of these GETs still saw the state before the write."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.conftest import ADMIN_KEY
    from tests.live_server import LiveServer

    with LiveServer(database_url, ADMIN_KEY) as server, server.client() as admin:
        pid = admin.post("/projects", json={"name": "ryw", "labels": LABELS}).json()["id"]
        for ext, kind in [("judge", "judge"), ("prim", "primary")]:
            admin.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
        admin.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(800)])

        def write_then_read(k: int) -> list[tuple[int, int]]:
            stale = []
            with server.client() as c:
                for n in range(40):
                    own = range(k * 200, k * 200 + 200)
                    rows = [{"item": f"i{i}", "rater": "prim", "value": LABELS[n % 2]} for i in own]
                    w = c.post(f"/projects/{pid}/labels", json=rows)  # a larger write: a longer commit
                    seq = w.json()["label_seq"]
                    seen = c.get(f"/projects/{pid}/reliability").json()["label_seq"]
                    if seen < seq:
                        stale.append((seq, seen))
            return stale

        with ThreadPoolExecutor(4) as pool:
            stale = [s for part in pool.map(write_then_read, range(4)) for s in part]
    assert stale == []


@pytest.mark.parametrize(
    "decision",
    [
        {"rule": "alt-test"},
        {"rule": "alt-test", "epsilon": 0.1, "q": 0.1},
        {"coefficient": "kappa", "epsilon": 0.1, "omega_threshold": 0.6},
        {"coefficient": "ac1", "inconclusive_level": 0.4},
    ],
)
def test_the_document_follows_the_project_decision_settings(client, decision):
    """The served decision equals planner.validate_judge under the project's settings, with the
    bootstrap seeded by label_seq (same draws, same intervals)."""
    from planner.decision import validate_judge

    raters = {"judge": ("judge", 0.88), "prim": ("primary", 0.85), "h2": ("human", 0.85), "h3": ("human", 0.8)}
    pid, codes = setup_dense(client, raters, n_items=90, seed=5)
    assert client.patch(f"/projects/{pid}", json={"decision": decision}).status_code == 200
    doc = get(client, f"/projects/{pid}/reliability").json()
    settings = client.get(f"/projects/{pid}").json()["decision"]
    epsilon = settings["epsilon"]
    if epsilon is None:  # the rule's default (docs/method.md §3)
        epsilon = 0.2 if settings["rule"] == "alt-test" else 0.05
    v = validate_judge(
        codes,
        judge=0,
        humans=[1, 2, 3],
        n_labels=2,
        rule=settings["rule"],
        coefficient=settings["coefficient"],
        epsilon=epsilon,
        omega_threshold=settings["omega_threshold"],
        q=settings["q"],
        inconclusive_level=settings["inconclusive_level"],
        n_resamples=1000,
        rng=doc["label_seq"],
    )
    assert (doc["rule"], doc["coefficient"], doc["epsilon"]) == (v.rule, v.coefficient, v.epsilon)
    assert doc["fixed_decision"] == v.decision and doc["fixed_omega"] == pytest.approx(v.omega)
    assert doc["omega_threshold"] == settings["omega_threshold"]
    for got, want in zip(doc["raters"], v.raters, strict=True):
        assert got["won"] == want.won and got["m"] == want.m
        assert got["d"] == pytest.approx(finite(want.d))
        assert got["ci"] == pytest.approx([finite(x) for x in want.ci.as_list()])
        assert got["p_value"] == pytest.approx(finite(want.p_value))


def finite(x: float | None) -> float | None:
    """JSON has no NaN: the document sends null for an undefined number."""
    return None if x is None or not np.isfinite(x) else x


@pytest.mark.parametrize(
    ("raters", "decision"),
    [
        ({"j": ("judge", 0.8)}, {}),
        ({"j": ("judge", 0.8), "h1": ("primary", 0.9)}, {}),
        ({"h1": ("primary", 0.9), "h2": ("human", 0.9)}, {}),
        ({**THREE_HUMANS, "j2": ("judge", 0.6)}, {}),
        ({**THREE_HUMANS, "j2": ("judge", 0.6)}, {"rule": "alt-test"}),
    ],
)
def test_served_documents_match_their_openapi_models(client, raters, decision):
    """Every field the documents carry is declared (the models forbid extras), in every state:
    no human, one human, no judge, several judges, the alt-test rule, with a plan in force."""
    from service.schemas.documents import RankingDocument, ReliabilityDocument

    pid, _ = setup_dense(client, raters, n_items=40)
    if decision:
        assert client.patch(f"/projects/{pid}", json={"decision": decision}).status_code == 200
    if len(raters) > 3:
        r = client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.9, "p_j": 0.8, "seed": 1})
        assert r.status_code == 201, r.text
    ReliabilityDocument.model_validate(get(client, f"/projects/{pid}/reliability").json())
    RankingDocument.model_validate(get(client, f"/projects/{pid}/ranking").json())
    paths = client.get("/openapi.json").json()["paths"]
    served = {  # a numeric project's documents too: issue 33
        "ranking": ["RankingDocument", "ScoreRankingDocument"],
        "reliability": ["ReliabilityDocument", "ScoreReliabilityDocument"],
    }
    for path, models in served.items():
        schema = paths[f"/projects/{{pid}}/{path}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        refs = [{"$ref": f"#/components/schemas/{model}"} for model in models]
        assert (schema.get("anyOf") if len(refs) > 1 else [schema]) == refs


def test_a_document_that_breaks_its_response_model_is_not_served(client, monkeypatch):
    """The builder returns its response model (validated where it is built), so a block outside the model is a
    bug reported as one: the route never serves the broken document."""
    pid, _ = setup_dense(client, THREE_HUMANS, n_items=40)
    served = get(client, f"/projects/{pid}/reliability").json()
    route.ReliabilityDocument.model_validate(served)
    monkeypatch.setattr(reliability, "plan_progress", lambda *a: {"plan": "p", "stray": 1})
    for value in LABELS:  # one of them changes h2's label: a new label_seq, a document not cached yet
        client.post(f"/projects/{pid}/labels", json=[{"item": "i0", "rater": "h2", "value": value}])
    r = client.get(f"/projects/{pid}/reliability")
    assert r.status_code == 500 and "stray" not in r.text
