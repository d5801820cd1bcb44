"""Plans (issue 6): validation, prior and pilot recipes, design choice, reproducible lists,
re-planning that keeps what was assigned, and sequential lists configured at the first batch."""

from __future__ import annotations

import itertools
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm
from sqlalchemy import Engine, func, select

from service.data.models import Assignment, Rater
from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer

PRIOR = {"p_h": 0.85, "p_j": 0.9}


def setup_project(c: Any, n_items: int, humans: tuple[str, ...] = ("h2", "h3")) -> str:
    pid = c.post("/projects", json={"name": "plans", "labels": ["pass", "fail"]}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), *((h, "human") for h in humans)]:
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(n_items)]).status_code == 200
    return pid


def post_labels(c: Any, pid: str, rater: str, values: dict[str, str]) -> None:
    rows = [{"item": i, "rater": rater, "value": v} for i, v in values.items()]
    r = c.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 200, r.text


def make_plan(c: Any, pid: str, **body: Any) -> dict:
    r = c.post(f"/projects/{pid}/plan", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def full_list(c: Any, pid: str, rater: str) -> list[str]:
    """The rater's whole remaining list, leased in one batch, in list order."""
    r = c.post(f"/projects/{pid}/batches", json={"rater": rater, "size": 1000})
    assert r.status_code == 200, r.text
    return r.json()["items"]


def assignments(engine: Engine, pid: str, rater: str) -> int:
    with engine.connect() as conn:
        return conn.execute(
            select(func.count())
            .select_from(Assignment)
            .join(Rater, Rater.id == Assignment.rater_id)
            .where(Rater.project_id == pid, Rater.external_id == rater)
        ).scalar_one()


def entropy_bits(shares: list[float]) -> float:
    return -sum(p * math.log2(p) for p in shares if p > 0)


# --- absence and validation -------------------------------------------------------------------


def test_get_plan_is_404_without_a_plan(client, project):
    r = client.get(f"/projects/{project['id']}/plan")
    assert r.status_code == 404 and r.json()["error"] == "no_plan", r.text


@pytest.mark.parametrize(
    "body",
    [
        {"source": "prior"},  # no priors
        {"source": "prior", "p_j": 0.9},  # no p_h
        {"source": "prior", "p_h": 0.85},  # no p_j
        {"purpose": "rank", **PRIOR},  # no delta_min
        {"p_h": 1.0, "p_j": 0.9},
        {**PRIOR, "design": "alphabetical"},
        {**PRIOR, "n_raters": 1},
        {**PRIOR, "unknown": 1},
    ],
)
def test_invalid_plan_requests_are_422_and_store_nothing(client, project, body):
    pid = project["id"]
    r = client.post(f"/projects/{pid}/plan", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"]
    assert client.get(f"/projects/{pid}/plan").status_code == 404


def test_pilot_plan_needs_overlap_then_plans_from_it(client):
    pid = setup_project(client, 60)
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 2, 60)
    labels = ["pass", "fail"]

    def noisy(p: float) -> dict[str, str]:
        codes = np.where(rng.random(60) < p, truth, 1 - truth)
        return {f"i{i}": labels[c] for i, c in enumerate(codes)}

    post_labels(client, pid, "judge", noisy(0.9))
    post_labels(client, pid, "prim", noisy(0.85))
    r = client.post(f"/projects/{pid}/plan", json={"source": "pilot"})
    assert r.status_code == 409 and r.json()["error"] == "no_pilot", r.text
    post_labels(client, pid, "h2", dict(list(noisy(0.85).items())[:40]))
    p = make_plan(client, pid, source="pilot", design="strat", seed=1)
    moments = p["recipe"]["moments"]
    assert p["source"] == moments["source"] == "pilot" and moments["m_pilot"] > 0
    lo, hi = moments["mu_d_ci"]
    assert lo <= moments["mu_d"] <= hi
    if p["recipe"]["feasible"]:  # docs/method.md §4 from the pilot moments, capped at the corpus
        need = corrected_envelope(moments["mu_d"], moments["sigma0_sq"], pool_size=2)  # strat, K = 3
        assert p["recipe"]["m"] == need and p["m"] == min(need, 60)


# --- the prior recipe and the document ---------------------------------------------------------


def corrected_envelope(mu: float, variance: float, *, pool_size: int, eps: float = 0.05, alpha: float = 0.05) -> int:
    """Smallest m whose continuity-corrected FR stays <= alpha/2 at every larger m (docs/method.md §4)."""
    m = np.arange(1, 20_000)
    cut = np.ceil(-eps * m * pool_size - 1e-9) - 1
    rate = norm.cdf((cut + 0.5 - pool_size * m * mu) / (pool_size * math.sqrt(variance * m)))
    return int(np.flatnonzero(rate > alpha / 2)[-1]) + 2


def lattice_envelope(p_h: float, p_j: float, pool_size: int, eps: float = 0.05, alpha: float = 0.05) -> int:
    """The same from the exact item distribution (binary labels), enumerated here and convolved m times."""
    step = {}
    for t, r, j, *pool in itertools.product((0, 1), repeat=3 + pool_size):
        prob = np.prod([p_h if x == t else 1 - p_h for x in (r, *pool)]) * (p_j if j == t else 1 - p_j) / 2
        x = sum(int(j == y) - int(r == y) for y in pool)
        step[x] = step.get(x, 0.0) + prob
    item = np.array([step.get(x, 0.0) for x in range(-pool_size, pool_size + 1)])
    pmf, low, over = np.array([1.0]), 0, []
    for m in range(1, 600):
        pmf, low = np.convolve(pmf, item), low - pool_size
        cut = math.ceil(-eps * m * pool_size - 1e-9) - 1
        over.append(pmf[: max(cut - low + 1, 0)].sum() > alpha / 2)
    return int(np.flatnonzero(over)[-1]) + 2


def test_prior_plan_matches_the_spec_example_and_is_readable(client, project):
    """docs/method.md §4: p_h=.85, p_j=.90, L=2, eps=.05, alpha=.05. On the shared Strat panel of 3 humans each
    overlap item has 2 held-in labels: sigma_2^2 = .162675, and the exact FR's envelope sets m (capped at n=20).
    Strat chosen by ``design: auto`` is served at the design-free recipe it was compared at (§5, issue 29)."""
    pid = project["id"]
    strat = make_plan(client, pid, **PRIOR, design="strat", seed=5)["recipe"]
    assert strat["moments"]["pool_size"] == 2
    assert strat["m"] == lattice_envelope(0.85, 0.90, pool_size=2)
    assert strat["feasible"] is False and strat["reason"]  # more than the corpus of 20 items...
    assert strat["m_planned"] == 20 and strat["warnings"]  # ...so every item is planned
    assert strat["moments"]["mu_d"] == pytest.approx(0.035)
    assert strat["moments"]["sigma0_sq"] == pytest.approx(0.162675)
    p = make_plan(client, pid, **PRIOR, seed=5)
    recipe = p["recipe"]
    assert p["design"] == "strat" and recipe["moments"]["pool_size"] == 1 and p["check"]["m_compared"] == 20
    assert recipe["moments"]["sigma0_sq"] == pytest.approx(0.218775)  # one held-in label
    assert recipe["m"] == 120  # m_cert = 117 by the normal form; the exact FR zig-zags above .025 up to 119
    assert p["m"] == recipe["m_planned"] == 20
    assert p["seed"] == 5 and p["purpose"] == "certify" and p["source"] == "prior"
    p = make_plan(client, pid, **PRIOR, seed=5)
    got = client.get(f"/projects/{pid}/plan").json()
    fields = ("id", "m", "design", "seed", "recipe")
    assert {k: got[k] for k in fields} == {k: p[k] for k in fields}
    assert got["progress"]["m_target"] == 20 and got["progress"]["m_done_min"] == 0


def test_rank_plan_uses_the_ranking_recipe(client, project):
    """docs/method.md §4.3: m_rank = ceil(z_{1-alpha/(J-1)}^2 sigma_Delta^2 / Delta_min^2), sigma_Delta^2 the
    largest paired variance over the J - 1 adjacent pairs of judges Delta_min apart from p_j down, averaged
    over the K humans (issue 29: the top pair's alone left the lower pairs misordered)."""
    p = make_plan(client, project["id"], purpose="rank", **PRIOR, delta_min=0.05, n_judges=3, seed=1)
    p_h, k = PRIOR["p_h"], p["recipe"]["n_humans"]

    def pair_variance(p_a: float, p_b: float) -> float:
        agree_a, agree_b = p_h * p_a + (1 - p_h) * (1 - p_a), p_h * p_b + (1 - p_h) * (1 - p_b)
        both = p_h * p_a * p_b + (1 - p_h) * (1 - p_a) * (1 - p_b)
        pair = agree_a + agree_b - 2 * both - (agree_a - agree_b) ** 2
        between = (2 * p_h - 1) ** 2 * (p_a * (1 - p_a) + p_b * (1 - p_b))
        return between + (pair - between) / k

    step = 0.05 / (p_h - (1 - p_h))
    ladder = [PRIOR["p_j"] - i * step for i in range(3)]
    top, low = pair_variance(ladder[0], ladder[1]), pair_variance(ladder[1], ladder[2])
    assert low > top
    z = norm.ppf(1 - 0.05 / 2)
    assert p["recipe"]["moments"]["ranking_variance"] == pytest.approx(low)
    assert p["recipe"]["m"] == math.ceil(z**2 * low / 0.05**2)
    assert p["purpose"] == "rank"


def test_rank_plan_whose_ladder_falls_below_zero_accuracy_is_a_conflict(client, project):
    r = client.post(
        f"/projects/{project['id']}/plan",
        json={"purpose": "rank", "p_h": 0.85, "p_j": 0.6, "delta_min": 0.2, "n_judges": 5, "seed": 1},
    )
    assert r.status_code == 409, r.text
    assert "accuracy of" in r.json()["detail"]


def test_the_newest_plan_is_in_force(client, project):
    pid = project["id"]
    first = make_plan(client, pid, **PRIOR, m=5, seed=1)
    second = make_plan(client, pid, **PRIOR, m=8, seed=2)
    assert first["id"] != second["id"]
    assert client.get(f"/projects/{pid}/plan").json()["id"] == second["id"]


# --- design choice -----------------------------------------------------------------------------


@pytest.mark.parametrize(("n_fail", "design"), [(5, "seq-coverage"), (50, "strat"), (8, "seq-coverage"), (20, "strat")])
def test_auto_design_follows_the_primary_stratum_entropy(client, n_fail, design):
    """pi_max > 0.9 (H < 0.5 bits) -> Seq-Coverage, otherwise Strat (docs/method.md §5, "Choosing")."""
    pid = setup_project(client, 100)
    post_labels(client, pid, "prim", {f"i{i}": "fail" if i < n_fail else "pass" for i in range(100)})
    p = make_plan(client, pid, **PRIOR, design="auto", seed=1)
    assert p["design"] == p["recipe"]["design"] == design
    assert p["recipe"]["stratum_entropy"] == pytest.approx(entropy_bits([n_fail / 100, 1 - n_fail / 100]))
    assert p["recipe"]["design_reason"]


def test_strat_panel_is_proportional_to_the_primary_labels(client):
    pid = setup_project(client, 100)
    post_labels(client, pid, "prim", {f"i{i}": "fail" if i < 30 else "pass" for i in range(100)})
    make_plan(client, pid, **PRIOR, design="strat", m=20, seed=4)
    h2 = full_list(client, pid, "h2")
    assert len(h2) == len(set(h2)) == 20
    assert sum(int(i[1:]) < 30 for i in h2) == 6  # 30% of 20
    assert sorted(full_list(client, pid, "h3")) == sorted(h2)  # one shared panel


# --- reproducibility and re-planning -----------------------------------------------------------


@pytest.mark.parametrize("design", ["strat", "random", "seq-refined", "seq-coverage"])
def test_the_same_seed_draws_the_same_lists(client, design):
    lists = []
    for seed in (11, 11, 12):
        pid = setup_project(client, 120)
        post_labels(client, pid, "prim", {f"i{i}": "fail" if i % 3 == 0 else "pass" for i in range(120)})
        make_plan(client, pid, **PRIOR, design=design, m=30, seed=seed)
        lists.append({r: full_list(client, pid, r) for r in ("h2", "h3")})
    assert lists[0] == lists[1]
    assert lists[0] != lists[2]
    assert all(len(v) == 30 for v in lists[0].values())


def test_replanning_keeps_assignments_and_labels(client, engine):
    pid = setup_project(client, 100, humans=("h2", "h3"))
    make_plan(client, pid, **PRIOR, design="strat", m=10, seed=1)
    b = client.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 1000}).json()
    old = b["items"]
    assert len(old) == 10
    post_labels(client, pid, "h2", dict.fromkeys(old[:4], "pass"))
    before = client.get(f"/projects/{pid}/labels", params={"history": "true"}).json()
    assert client.post(f"/projects/{pid}/batches/{b['id']}/release").status_code == 200

    make_plan(client, pid, **PRIOR, design="random", m=10, seed=99)
    assert client.get(f"/projects/{pid}/labels", params={"history": "true"}).json() == before
    assert assignments(engine, pid, "h2") == 10
    rest = full_list(client, pid, "h2")
    assert sorted(rest) == sorted(old[4:])  # the items issued before are still h2's, labeled ones done

    make_plan(client, pid, **PRIOR, design="random", m=15, seed=99)  # a larger m appends
    more = full_list(client, pid, "h2")
    assert len(more) == 5 and not set(more) & set(old)
    assert assignments(engine, pid, "h2") == 15


# --- sequential designs ------------------------------------------------------------------------


@pytest.mark.parametrize("design", ["seq-refined", "seq-coverage"])
def test_sequential_lists_are_configured_at_the_first_batch(client, engine, design):
    """No list at plan time; at a rater's first batch, its list is stratified by the labels in
    hand *then* (here: primary labels posted after the plan), and later labels do not change it."""
    humans = ("h2", "h3", "h4", "h5", "h6")
    pid = setup_project(client, 40, humans=humans)
    make_plan(client, pid, **PRIOR, design=design, m=20, seed=3)
    assert all(assignments(engine, pid, h) == 0 for h in humans)
    post_labels(client, pid, "prim", {f"i{i}": "fail" if i < 20 else "pass" for i in range(40)})
    for h in humans:
        first = client.post(f"/projects/{pid}/batches", json={"rater": h, "size": 4}).json()
        assert assignments(engine, pid, h) == 20
        lst = first["items"] + full_list(client, pid, h)
        assert len(set(lst)) == 20
        assert sum(int(i[1:]) < 20 for i in lst) == 10, (h, lst)  # 10 per stratum (exact allocation)
        assert sum(int(i[1:]) < 20 for i in first["items"]) == 2  # prefixes are stratified too


def test_disjoint_lists_are_complements_and_seq_coverage_shares_m2_over_n(client):
    """docs/method.md §5. With m = n/2 and two strata: Disjoint gives the second rater the complement of
    the first's list; Seq-Coverage gives it exactly m^2/n = 10 items in common (5 per stratum)."""
    pid = setup_project(client, 40)
    post_labels(client, pid, "prim", {f"i{i}": "fail" if i % 2 else "pass" for i in range(40)})
    make_plan(client, pid, **PRIOR, design="disjoint", m=20, seed=8)
    h2, h3 = full_list(client, pid, "h2"), full_list(client, pid, "h3")
    assert len(h2) == len(h3) == 20
    assert set(h2) | set(h3) == {f"i{i}" for i in range(40)}
    assert sum(int(i[1:]) % 2 for i in h2[:4]) == 2  # prefix-stratified
    pid = setup_project(client, 40)
    post_labels(client, pid, "prim", {f"i{i}": "fail" if i % 2 else "pass" for i in range(40)})
    make_plan(client, pid, **PRIOR, design="seq-coverage", m=20, seed=8)
    h2, h3 = full_list(client, pid, "h2"), full_list(client, pid, "h3")
    common = set(h2) & set(h3)
    assert len(common) == 10 and sum(int(i[1:]) % 2 for i in common) == 5


def test_seq_coverage_spreads_items_across_raters_configured_at_once(database_url):
    """Two raters' first batches at the same moment, on a real server: still exactly m^2/n in common.

    Regression (PostgreSQL): nothing serialised the configuration of different raters, so both
    read no earlier assignment and drew independently (fixed by a project row lock)."""
    with LiveServer(database_url, ADMIN_KEY) as server, server.client() as admin:
        for seed in range(8):  # the race is likely but not certain in any one round
            pid = setup_project(admin, 200)
            post_labels(admin, pid, "prim", {f"i{i}": "fail" if i % 2 else "pass" for i in range(200)})
            make_plan(admin, pid, **PRIOR, design="seq-coverage", m=100, seed=seed)
            start = threading.Barrier(2)

            def first_batch(rater: str, pid: str = pid, start: threading.Barrier = start) -> list[str]:
                with server.client() as c:
                    start.wait()
                    return full_list(c, pid, rater)

            with ThreadPoolExecutor(2) as pool:
                h2, h3 = pool.map(first_batch, ["h2", "h3"])
            assert len(h2) == len(h3) == 100
            assert len(set(h2) & set(h3)) == 50, f"seed {seed}: {len(set(h2) & set(h3))} items on both lists"


def test_sequential_design_without_a_primary_is_409(client):
    pid = client.post("/projects", json={"name": "np", "labels": ["a", "b"]}).json()["id"]
    for ext, kind in [("judge", "judge"), ("h2", "human"), ("h3", "human")]:
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(10)])
    make_plan(client, pid, **PRIOR, design="seq-refined", m=5, seed=1)
    r = client.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 5})
    assert r.status_code == 409 and r.json()["error"] == "no_primary", r.text


def test_plan_without_items_is_409(client):
    pid = client.post("/projects", json={"name": "empty", "labels": ["a", "b"]}).json()["id"]
    r = client.post(f"/projects/{pid}/plan", json=PRIOR)
    assert r.status_code == 409 and r.json()["error"] == "no_items", r.text


def test_prior_plan_budget_when_the_corpus_is_large_enough(client):
    """docs/method.md §4: rho = m/n per secondary, B = n (1 + rho (K - 1)) human labels."""
    pid = setup_project(client, 200)
    p = make_plan(client, pid, **PRIOR, design="random", seed=5)
    recipe = p["recipe"]
    assert recipe["m"] == recipe["m_fixed"] == 120 and recipe["feasible"] is True and recipe["reason"] == ""
    assert p["m"] == recipe["m_planned"] == min(recipe["m_anytime"] or 200, 200) > 120  # anytime: the monitor's m
    assert recipe["rho"] == pytest.approx(120 / 200)
    assert recipe["per_rater"] == [200, 120, 120] and recipe["n_humans"] == 3
    assert recipe["total_human_labels"] == round(200 * (1 + 120 / 200 * 2))
    curve = {point["m"]: point["rate"] for point in recipe["false_rejection_curve"]}
    assert curve[120] <= 0.025  # the exact rate at the recommended m keeps the promise


def test_n_raters_sets_the_budget(client):
    pid = setup_project(client, 400)
    p = make_plan(client, pid, **PRIOR, n_raters=5, design="random", seed=1)
    recipe = p["recipe"]
    assert recipe["n_humans"] == 5 and recipe["per_rater"] == [400] + [120] * 4
    assert recipe["total_human_labels"] == round(400 * (1 + 120 / 400 * 4))


def test_infeasible_plan_says_so(client, project):
    """mu_d + eps <= 0: no overlap certifies this judge (docs/method.md §4.2); the plan says why."""
    p = make_plan(client, project["id"], p_h=0.9, p_j=0.6, seed=1)
    assert p["m"] is None and p["recipe"]["feasible"] is False and p["recipe"]["reason"]
    assert p["recipe"]["moments"]["mu_d"] + 0.05 <= 0
    assert client.get(f"/projects/{project['id']}/plan").json()["m"] is None


def test_a_rater_added_after_a_strat_plan_gets_the_panel(client):
    pid = setup_project(client, 50)
    make_plan(client, pid, **PRIOR, design="strat", m=12, seed=2)
    panel = full_list(client, pid, "h2")
    assert client.post(f"/projects/{pid}/raters", json={"external_id": "h4", "kind": "human"}).status_code == 201
    assert sorted(full_list(client, pid, "h4")) == sorted(panel)


def test_plan_post_honours_the_idempotency_key(client, project):
    pid = project["id"]
    headers = {"Idempotency-Key": "plan-1"}
    first = client.post(f"/projects/{pid}/plan", json={**PRIOR, "seed": 3}, headers=headers)
    again = client.post(f"/projects/{pid}/plan", json={**PRIOR, "seed": 3}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert client.get(f"/projects/{pid}/plan").json()["id"] == first.json()["id"]
    other = client.post(f"/projects/{pid}/plan", json={**PRIOR, "seed": 4}, headers=headers)
    assert other.status_code == 409, other.text


def test_who_may_plan(client, project):
    pid = project["id"]
    make_plan(client, pid, **PRIOR, seed=1)
    keys = {}
    for role, rater in (("viewer", None), ("annotator", "h2"), ("pm", None)):
        r = client.post(f"/projects/{pid}/keys", json={"role": role, **({"rater": rater} if rater else {})})
        keys[role] = {"Authorization": f"Bearer {r.json()['key']}"}
    assert client.get(f"/projects/{pid}/plan", headers=keys["viewer"]).status_code == 200
    assert client.post(f"/projects/{pid}/plan", json=PRIOR, headers=keys["viewer"]).status_code == 403
    assert client.get(f"/projects/{pid}/plan", headers=keys["annotator"]).status_code == 403
    assert client.post(f"/projects/{pid}/plan", json=PRIOR, headers=keys["annotator"]).status_code == 403
    assert client.post(f"/projects/{pid}/plan", json=PRIOR, headers=keys["pm"]).status_code == 201


@pytest.mark.parametrize("coefficient", ["kappa", "alpha", "ac1"])
def test_prior_plan_for_a_ratio_coefficient_uses_its_delta_method_constant(client, coefficient):
    """docs/method.md §4, item 4: a kappa/alpha/AC1 project plans on ratio_moments (true shares from the
    primary's labels: 140 pass / 60 fail at p_h = .85 -> pi = (.7 - .15)/.7 = .7857), the FR simulated
    from the prior at this small overlap (issue 29 item 4: at most 15% above the normal form's m), and no
    p_o-only estimators; the p_o project on the same corpus asks for far fewer items."""
    from planner.ratio_moments import RatioPrior, ratio_moments
    from planner.recipes import certify_recipe

    pid = setup_project(client, 2000)
    post_labels(client, pid, "prim", {f"i{i}": "pass" if i % 10 < 7 else "fail" for i in range(200)})
    po_plan = make_plan(client, pid, **PRIOR, design="random", seed=3)["recipe"]
    patch = client.patch(f"/projects/{pid}", json={"decision": {"coefficient": coefficient, "epsilon": 0.1}})
    assert patch.status_code == 200, patch.text
    recipe = make_plan(client, pid, **PRIOR, design="random", seed=3)["recipe"]
    moments = recipe["moments"]
    shares = [0.55 / 0.7, 0.15 / 0.7]
    assert moments["coefficient"] == coefficient and moments["prevalence"] == pytest.approx(shares)
    mu, variance = ratio_moments(0.85, 0.9, n_labels=2, coefficient=coefficient, prevalence=shares, pool_size=1)
    assert (moments["mu_d"], moments["sigma0_sq"]) == pytest.approx((mu, variance))
    z = norm.ppf(0.975)
    normal = math.ceil(z**2 * variance / (mu + 0.1) ** 2)  # the delta method's normal form: no p_o lattice
    assert normal <= recipe["m"] <= 1.15 * normal
    prior = RatioPrior(0.85, 0.9, 2, coefficient, tuple(moments["prevalence"]), 1)
    expected = certify_recipe(
        mu, variance, n_items=2000, n_humans=3, epsilon=0.1, coefficient=coefficient, lattice=prior
    )
    assert recipe["m"] == expected.m and recipe["by_estimator"] is None
    assert variance > 2 * po_plan["moments"]["sigma0_sq"]
