"""Issue 6 item 4: ``POST /projects/{pid}/simulate`` and ``GET /projects/{pid}/simulations/{id}``.

Results are checked against ``planner.simulate`` / ``planner.replay`` called directly with
settings written out here (so the route must pass every default and option through), and
against what full overlap must give (sparse = dense). Large runs go through the process
pool for real: a client with ``simulation_sync_limit=0`` turns every run into a job.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.designs import DESIGNS
from planner.simulate import replay, simulate
from service.app import create_app
from service.core.db import make_engine
from service.core.settings import Settings
from service.data import jobs
from service.data.models import Job, Simulation, new_public_id, utcnow
from service.schemas.simulations import CoefficientName, DesignName
from service.simulations.jobs import KIND, SimulationSpec, run_job, spec_from_payload, spec_payload
from tests.factories import create_project

ADMIN_KEY = "ak_test_admin_key"
CELL_FIELDS = {
    "rho",
    "design",
    "coefficient",
    "p_h",
    "m",
    "bias",
    "std",
    "reliability",
    "false_rejection",
    "false_approval",
    "wrong_decision",
    "rater_false_rejection",
    "undefined",
    "trials",
}
SMALL = {"p_h": 0.85, "p_j": 0.9, "rho": [0.25, 1.0], "design": "random", "trials": 40, "seed": 1}
# what SMALL means for the fixture project (20 items, humans prim/h2/h3, method defaults)
SMALL_PLANNER = dict(
    n_items=20,
    n_humans=3,
    n_labels=2,
    p_h=0.85,
    p_j=[0.9],
    prevalence=None,
    rho=[0.25, 1.0],
    design=["random"],
    coefficient=["po"],
    rule="margin",
    epsilon=0.05,
    delta=0.05,
    omega_threshold=0.5,
    q=0.05,
    trials=40,
    clusters=None,
    cluster_difficulty=0.5,
    rng=1,
)


def simulation_rows(database_url: str) -> int:
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(Simulation)).scalar_one()
    finally:
        engine.dispose()


def planner_cells(result) -> list[dict]:
    return [c.as_dict() for c in result.cells]


def wait_done(client: TestClient, poll: str, timeout: float = 120.0) -> dict:
    """Poll a job until it is done or failed; the states seen on the way are checked."""
    deadline = time.monotonic() + timeout
    while True:
        r = client.get(poll)
        assert r.status_code == 200, r.text
        job = r.json()
        assert job["status"] in ("queued", "running", "done", "failed")
        assert 0 <= job["done"] <= job["total"]
        if job["status"] in ("done", "failed"):
            return job
        assert time.monotonic() < deadline, f"job still {job['status']} after {timeout} s"
        time.sleep(0.2)


@pytest.fixture
def job_client(database_url: str) -> Iterator[TestClient]:
    """A client whose every simulation is a job (sync limit 0), one worker, so at most 4 in flight."""
    settings = Settings(
        database_url=database_url,
        admin_key=ADMIN_KEY,
        simulation_sync_limit=0,
        simulation_workers=1,
        simulations_per_project=4,  # the service-wide bound is tested here; the per-project one on its own
        simulations_per_key=4,  # and the per-key one in tests/service/test_fair_shares.py
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield c


def make_project(client: TestClient, **extra) -> str:
    return create_project(client, name="sim", items=[f"i{i}" for i in range(20)], **extra)


def post_labels(client: TestClient, pid: str, codes: dict[str, list[int | None]]) -> None:
    labels = ["pass", "fail"]
    rows = [
        {"item": f"i{i}", "rater": rater, "value": labels[c]}
        for rater, column in codes.items()
        for i, c in enumerate(column)
        if c is not None
    ]
    r = client.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 200, r.text


# --- synchronous runs -------------------------------------------------------------------
def test_settings_patched_to_defaults_still_simulate(client, project):
    """A PATCH of ``{"target": {}}`` or a partial ``decision`` stores the whole settings object (omitted
    fields at their defaults): the fuzzer's ``{"target": {}}`` left no ``delta`` and /simulate answered 500."""
    pid = project["id"]
    for patch in ({"target": {}}, {"decision": {"monitoring": "fixed"}}):
        assert client.patch(f"/projects/{pid}", json=patch).status_code == 200
    read = client.get(f"/projects/{pid}").json()
    assert read["target"] == {"delta": 0.05}
    assert read["decision"]["rule"] == "margin" and read["decision"]["monitoring"] == "fixed"
    r = client.post(f"/projects/{pid}/simulate", json=SMALL)
    assert r.status_code == 200, r.text
    assert r.json()["result"]["cells"][0]["trials"] == SMALL["trials"]


def test_small_simulation_answers_with_the_planner_cells(client, project):
    r = client.post(f"/projects/{project['id']}/simulate", json=SMALL)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done"
    cells = body["result"]["cells"]
    assert [set(c) for c in cells] == [CELL_FIELDS, CELL_FIELDS]
    assert cells == planner_cells(simulate(**SMALL_PLANNER))
    # full overlap: the sparse matrix is the dense one
    full = cells[1]
    assert (full["rho"], full["m"], full["bias"], full["std"]) == (1.0, 20, 0.0, 0.0)
    assert (full["reliability"], full["wrong_decision"], full["undefined"]) == (1.0, 0.0, 0)
    assert body["result"]["min_rho"] == [
        {
            "design": "random",
            "coefficient": "po",
            "p_h": 0.85,
            "alpha_sig": 0.05,
            "rho": 0.25 if cells[0]["reliability"] >= 0.95 else 1.0,
        }
    ]
    settings = body["settings"]
    assert settings["n_items"] == 20 and settings["n_humans"] == 3 and settings["n_labels"] == 2
    assert settings["work"] == 40 * 2 * 20 * (3 + 1)
    assert settings["delta"] == 0.05 and settings["epsilon"] == 0.05 and settings["seed"] == 1
    assert simulation_rows(client.app.state.settings.database_url) == 0  # small runs store nothing


def test_grids_give_one_cell_per_combination_and_one_min_rho_per_curve(client, project):
    body = {
        **SMALL,
        "p_h": [0.8, [0.9, 0.8, 0.7]],
        "rho": [0.5],
        "design": ["strat", "seq-coverage"],
        "coefficient": ["po", "kappa"],
        "trials": 10,
    }
    r = client.post(f"/projects/{project['id']}/simulate", json=body)
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert len(result["cells"]) == 2 * 1 * 2 * 2
    curves = {(c["design"], c["coefficient"], str(c["p_h"])) for c in result["min_rho"]}
    assert len(curves) == len(result["min_rho"]) == 8
    expected = simulate(
        **{
            **SMALL_PLANNER,
            "p_h": [0.8, [0.9, 0.8, 0.7]],
            "rho": [0.5],
            "design": ["strat", "seq-coverage"],
            "coefficient": ["po", "kappa"],
            "trials": 10,
        }
    )
    assert result["cells"] == planner_cells(expected)


def test_defaults_come_from_the_plan_and_the_primary_labels(client, project):
    pid = project["id"]
    post_labels(client, pid, {"prim": [0] * 15 + [1] * 5})
    plan = client.post(
        f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.8, "p_j": 0.9, "design": "random", "m": 5, "seed": 7}
    )
    assert plan.status_code == 201, plan.text
    r = client.post(f"/projects/{pid}/simulate", json={"trials": 20, "seed": 2})
    assert r.status_code == 200, r.text
    settings = r.json()["settings"]
    assert settings["rho"] == [5 / 20] and settings["design"] == ["random"]
    assert settings["p_h"] == 0.8 and settings["p_j"] == [0.9] and settings["n_humans"] == 3
    assert settings["prevalence"] == [0.75, 0.25]
    expected = simulate(
        **{**SMALL_PLANNER, "p_h": 0.8, "prevalence": [0.75, 0.25], "rho": [0.25], "trials": 20, "rng": 2}
    )
    assert r.json()["result"]["cells"] == planner_cells(expected)


def test_project_decision_settings_are_the_defaults(client):
    pid = make_project(
        client, decision={"rule": "alt-test", "epsilon": 0.1, "omega_threshold": 0.6, "q": 0.1}, target={"delta": 0.1}
    )
    r = client.post(f"/projects/{pid}/simulate", json={"p_h": 0.85, "p_j": 0.9, "rho": 0.5, "trials": 5, "seed": 0})
    assert r.status_code == 200, r.text
    s = r.json()["settings"]
    assert (s["rule"], s["epsilon"], s["omega_threshold"], s["q"], s["delta"]) == ("alt-test", 0.1, 0.6, 0.1, 0.1)
    assert s["design"] == ["strat"] and s["rho"] == [0.5]
    # another rule than the project's takes that rule's own default margin
    r = client.post(
        f"/projects/{pid}/simulate", json={"p_h": 0.85, "p_j": 0.9, "rho": 0.5, "trials": 5, "rule": "margin"}
    )
    assert r.json()["settings"]["epsilon"] == 0.05


def test_schema_choices_match_the_planner():
    assert set(DesignName.__args__) == set(DESIGNS)
    assert set(CoefficientName.__args__) == {"po", "kappa", "alpha"}


# --- replay -----------------------------------------------------------------------------


def dense_codes(n: int = 20) -> dict[str, list[int]]:
    i = np.arange(n)
    return {
        "judge": ((i % 3 == 0) | (i % 7 == 0)).astype(int).tolist(),
        "prim": (i % 3 == 0).astype(int).tolist(),
        "h2": ((i % 3 == 0) ^ (i % 5 == 0)).astype(int).tolist(),
        "h3": ((i % 3 == 0) ^ (i % 4 == 1)).astype(int).tolist(),
    }


def test_replay_subsamples_the_projects_dense_labels(client, project):
    pid = project["id"]
    codes = dense_codes()
    post_labels(client, pid, codes)
    # a fourth human with gaps is left out of the replay
    assert client.post(f"/projects/{pid}/raters", json={"external_id": "h4", "kind": "human"}).status_code == 201
    post_labels(client, pid, {"h4": [1, 0, None] + [0] * 17})
    body = {"replay": True, "rho": [0.5, 1.0], "design": ["random", "strat"], "trials": 15, "seed": 3}
    r = client.post(f"/projects/{pid}/simulate", json=body)
    assert r.status_code == 200, r.text
    settings = r.json()["settings"]
    assert settings["humans"] == ["prim", "h2", "h3"] and settings["judges"] == ["judge"]
    assert settings["replay"] is True and settings["label_seq"] == 20 * 4 + 19
    humans = np.array([codes["prim"], codes["h2"], codes["h3"]]).T
    expected = replay(
        humans,
        judges=np.array(codes["judge"]),
        n_labels=2,
        rho=[0.5, 1.0],
        design=["random", "strat"],
        coefficient="po",
        rule="margin",
        epsilon=0.05,
        delta=0.05,
        omega_threshold=0.5,
        q=0.05,
        trials=15,
        rng=3,
    )
    cells = r.json()["result"]["cells"]
    assert cells == planner_cells(expected)
    assert all(c["bias"] == 0.0 and c["reliability"] == 1.0 for c in cells if c["rho"] == 1.0)


def test_replay_without_dense_labels_is_422(client, project):
    pid = project["id"]
    codes = dense_codes()
    codes["h2"][3] = None
    codes["h3"][4] = None
    post_labels(client, pid, codes)
    r = client.post(f"/projects/{pid}/simulate", json={"replay": True, "rho": 0.5})
    assert r.status_code == 422, r.text
    assert "1 such humans and 1 such judges" in r.json()["detail"]


# --- bounds and bad input ---------------------------------------------------------------


def test_over_the_work_limit_is_413_and_stores_nothing(client, project, database_url):
    r = client.post(f"/projects/{project['id']}/simulate", json={**SMALL, "n_items": 1_000_000, "trials": 300})
    assert r.status_code == 413, r.text
    assert r.json()["error"] == "simulation_too_large"
    assert "limit is 50,000,000" in r.json()["detail"]
    assert simulation_rows(database_url) == 0


BAD = {
    "probability over 1": ({"p_h": 1.5}, "validation_error", "p_h"),
    "negative judge accuracy": ({"p_j": -0.1}, "validation_error", "p_j"),
    "empty rho grid": ({"rho": []}, "validation_error", "rho"),
    "empty design grid": ({"design": []}, "validation_error", "design"),
    "unknown design": ({"design": "zigzag"}, "validation_error", "design"),
    "unknown coefficient": ({"coefficient": "ac2"}, "validation_error", "coefficient"),
    "zero trials": ({"trials": 0}, "validation_error", "trials"),
    "unknown field": ({"colour": "blue"}, "validation_error", "colour"),
    "rho with no item": ({"rho": 0.01}, "invalid", "rho=0.01"),
    "prevalence not summing to 1": ({"prevalence": [0.5, 0.6]}, "invalid", "prevalence"),
    "prevalence of the wrong length": ({"prevalence": [0.2, 0.3, 0.5]}, "invalid", "prevalence"),
    "per-rater accuracies of the wrong length": ({"p_h": [[0.8, 0.9]]}, "invalid", "n_humans=3"),
    "alt-test with kappa": ({"rule": "alt-test", "coefficient": "kappa"}, "invalid", "alt-test"),
    "too many clusters": ({"clusters": 21}, "invalid", "clusters"),
    "unknown criterion": ({"criterion": "tone"}, "invalid", "criterion"),
    "replay with generator settings": ({"replay": True}, "invalid", "remove p_h, p_j"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_settings_are_422_and_store_nothing(client, project, database_url, case):
    change, code, mentioned = BAD[case]
    r = client.post(f"/projects/{project['id']}/simulate", json={**SMALL, **change})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == code
    assert mentioned in r.text
    assert simulation_rows(database_url) == 0


def test_missing_priors_and_unsupported_project_coefficient_are_422(client, project):
    r = client.post(f"/projects/{project['id']}/simulate", json={"rho": 0.5})
    assert r.status_code == 422 and "pass p_h and p_j" in r.json()["detail"]
    pid = make_project(client, decision={"coefficient": "ac1"})
    r = client.post(f"/projects/{pid}/simulate", json={**SMALL})
    assert r.status_code == 422 and "coefficient is ac1" in r.json()["detail"]


def test_keys_and_roles(client, project):
    pid = project["id"]
    keys = {role: client.post(f"/projects/{pid}/keys", json={"role": role}).json()["key"] for role in ("pm", "viewer")}
    assert client.post(f"/projects/{pid}/simulate", json=SMALL, headers={"Authorization": ""}).status_code == 401
    assert client.get(f"/projects/{pid}/simulations/sim_x", headers={"Authorization": ""}).status_code == 401
    as_pm = client.post(f"/projects/{pid}/simulate", json=SMALL, headers={"Authorization": f"Bearer {keys['pm']}"})
    assert as_pm.status_code == 200, as_pm.text
    as_viewer = client.post(
        f"/projects/{pid}/simulate", json=SMALL, headers={"Authorization": f"Bearer {keys['viewer']}"}
    )
    assert as_viewer.status_code == 403
    assert client.get(f"/projects/{pid}/simulations/sim_nope").status_code == 404


def test_openapi_documents_the_endpoints(client):
    paths = client.get("/openapi.json").json()["paths"]
    post = paths["/projects/{pid}/simulate"]["post"]["responses"]
    assert {"200", "202", "401", "403", "404", "413", "422", "429"} <= set(post)
    assert post["202"]["content"]["application/json"]["schema"]["$ref"].endswith("/SimulationQueued")
    assert post["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/SimulationRun")
    get = paths["/projects/{pid}/simulations/{sim_id}"]["get"]["responses"]
    assert {"200", "401", "404"} <= set(get)
    assert get["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/SimulationJob")


# --- jobs -------------------------------------------------------------------------------


def test_large_simulation_is_a_job_that_reaches_done(job_client, database_url):
    pid = make_project(job_client)
    r = job_client.post(f"/projects/{pid}/simulate", json=SMALL)
    assert r.status_code == 202, r.text
    queued = r.json()
    assert set(queued) == {"id", "status", "poll"} and queued["status"] == "queued"
    assert queued["poll"] == f"/projects/{pid}/simulations/{queued['id']}"
    job = wait_done(job_client, queued["poll"])
    assert job["status"] == "done", job["error"]
    assert job["done"] == job["total"] == 2 and job["error"] is None and job["finished_at"] is not None
    assert job["result"]["cells"] == planner_cells(simulate(**SMALL_PLANNER))
    assert job["settings"]["seed"] == 1
    # the job belongs to its project only
    other = make_project(job_client)
    assert job_client.get(f"/projects/{other}/simulations/{queued['id']}").status_code == 404
    # an Idempotency-Key replays the first answer and queues nothing new
    headers = {"Idempotency-Key": "sim-once"}
    first = job_client.post(f"/projects/{pid}/simulate", json={**SMALL, "trials": 2}, headers=headers)
    again = job_client.post(f"/projects/{pid}/simulate", json={**SMALL, "trials": 2}, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert simulation_rows(database_url) == 2
    assert wait_done(job_client, first.json()["poll"])["status"] == "done"


def insert_jobs(database_url: str, pid: str, settings: dict, n: int, status: str = "running") -> list[str]:
    """Simulation rows in flight with no job row (as a lost one would be): counted, never run."""
    engine = make_engine(database_url)
    ids = [new_public_id("sim") for _ in range(n)]
    with Session(engine) as session, session.begin():
        for job_id in ids:
            session.add(
                Simulation(id=job_id, project_id=pid, status=status, done=0, total=1, params={"settings": settings})
            )
    engine.dispose()
    return ids


def held_job(
    database_url: str,
    pid: str,
    settings: dict,
    spec: SimulationSpec,
    *,
    status: str = "running",
    lease: timedelta = timedelta(seconds=60),
    attempts: int = 1,
    max_attempts: int = 3,
) -> jobs.Claimed:
    """A simulation and its job as another worker holds it: leased for ``lease`` more (negative: run out)."""
    engine = make_engine(database_url)
    sim_id, token = new_public_id("sim"), "a-token-of-another-worker"
    payload = spec_payload(spec)
    with Session(engine) as session, session.begin():
        session.add(
            Simulation(id=sim_id, project_id=pid, status=status, done=0, total=1, params={"settings": settings})
        )
        job = Job(
            kind=KIND,
            key=sim_id,
            payload=payload,
            state="running",
            attempts=attempts,
            max_attempts=max_attempts,
            lease_owner="elsewhere",
            lease_token=token,
            lease_until=utcnow() + lease,
        )
        session.add(job)
        session.flush()
        claimed = jobs.Claimed(job.id, KIND, sim_id, payload, token, attempts, max_attempts)
    engine.dispose()
    return claimed


def small_spec(**changes) -> SimulationSpec:
    options = {key: value for key, value in SMALL_PLANNER.items() if key != "rng"}
    return SimulationSpec({**options, "seed": 1, **changes}, 0.05)


def test_jobs_in_flight_are_bounded(job_client, database_url):
    pid = make_project(job_client)
    settings = job_client.post(f"/projects/{pid}/simulate", json={**SMALL, "trials": 1}).json()
    settings = wait_done(job_client, settings["poll"])["settings"]
    # four in flight with one worker: refused, and nothing stored
    insert_jobs(database_url, pid, settings, 4)
    r = job_client.post(f"/projects/{pid}/simulate", json={**SMALL, "trials": 1})
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_simulations" and "the limit is 4" in r.json()["detail"]
    assert int(r.headers["retry-after"]) > 0  # issue 30: every 429 says when to come back
    assert simulation_rows(database_url) == 1 + 4


def test_a_job_whose_worker_died_is_taken_over_and_one_that_died_too_often_fails(job_client, database_url):
    """Issue 32: a lease run out means the worker died; this server's runner takes the job over."""
    pid = make_project(job_client)
    settings = job_client.post(f"/projects/{pid}/simulate", json={**SMALL, "trials": 1}).json()
    settings = wait_done(job_client, settings["poll"])["settings"]
    alive = held_job(database_url, pid, settings, small_spec())
    lost = held_job(database_url, pid, settings, small_spec(), lease=-timedelta(seconds=1))
    spent = held_job(database_url, pid, settings, small_spec(), lease=-timedelta(seconds=1), attempts=3)
    job = wait_done(job_client, f"/projects/{pid}/simulations/{lost.key}")
    assert job["status"] == "done", job["error"]
    assert job["result"]["cells"] == planner_cells(simulate(**SMALL_PLANNER))
    job = wait_done(job_client, f"/projects/{pid}/simulations/{spent.key}")
    assert job["status"] == "failed" and job["error"] == jobs.EXHAUSTED_ERROR.format(attempts=3)
    # a job on a lease still running is left to its worker
    job = job_client.get(f"/projects/{pid}/simulations/{alive.key}").json()
    assert job["status"] == "running" and job["done"] == 0


def test_a_run_that_raises_is_stored_failed_and_a_lost_lease_changes_nothing(job_client, database_url):
    """The pool's entry point, called in-process: the child's bookkeeping without the pool."""
    pid = make_project(job_client)
    settings = job_client.post(f"/projects/{pid}/simulate", json={**SMALL, "trials": 1}).json()
    settings = wait_done(job_client, settings["poll"])["settings"]
    broken = small_spec(trials=0)
    held = held_job(database_url, pid, settings, broken, status="queued")
    run_job(database_url, held, broken, os.getppid())
    job = job_client.get(f"/projects/{pid}/simulations/{held.key}").json()
    assert job["status"] == "failed" and job["error"].startswith("ValueError: trials must be a positive integer")
    assert job["finished_at"] is not None and job["result"] is None
    # a child whose lease was taken over (another token holds the job) writes nothing
    taken = held_job(database_url, pid, settings, small_spec())
    run_job(database_url, replace(taken, token="an-old-token"), small_spec(), os.getppid())
    job = job_client.get(f"/projects/{pid}/simulations/{taken.key}").json()
    assert job["status"] == "running" and job["result"] is None and job["done"] == 0
    # the holder runs it to the planner's result; its job row is done
    run_job(database_url, taken, small_spec(), os.getppid())
    job = job_client.get(f"/projects/{pid}/simulations/{taken.key}").json()
    assert job["status"] == "done" and job["result"]["cells"] == planner_cells(simulate(**SMALL_PLANNER))
    engine = make_engine(database_url)
    with Session(engine) as session:
        assert session.get(Job, taken.id).state == "done"
    engine.dispose()


def test_a_replay_spec_survives_the_job_payload():
    humans = np.array([[0, 1, -1], [1, 1, 0]], dtype=np.int8)
    spec = SimulationSpec({"rho": [0.5], "seed": 2**63 - 1}, 0.05, humans, humans[:, :1].copy())
    again = spec_from_payload(json.loads(json.dumps(spec_payload(spec))))
    assert again.options == spec.options and again.alpha_sig == 0.05
    assert again.humans.dtype == np.int8 and np.array_equal(again.humans, humans)
    assert np.array_equal(again.judges, humans[:, :1])


def test_a_job_can_be_cancelled_and_frees_its_place(job_client, database_url):
    """Issue 30: DELETE cancels a queued or running job; a running one stops computing."""
    pid = make_project(job_client)
    settings = job_client.post(f"/projects/{pid}/simulate", json={**SMALL, "trials": 1}).json()
    settings = wait_done(job_client, settings["poll"])["settings"]
    full = insert_jobs(database_url, pid, settings, 4, status="queued")
    r = job_client.post(f"/projects/{pid}/simulate", json={**SMALL, "trials": 1})
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
    cancelled = job_client.delete(f"/projects/{pid}/simulations/{full[0]}")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "failed" and cancelled.json()["error"].startswith("cancelled")
    again = job_client.delete(f"/projects/{pid}/simulations/{full[0]}")
    assert again.status_code == 409 and again.json()["error"] == "simulation_finished"
    assert job_client.delete(f"/projects/{pid}/simulations/sim_nope").status_code == 404
    for job_id in full[1:]:
        assert job_client.delete(f"/projects/{pid}/simulations/{job_id}").status_code == 200
    # a running job, cancelled after its first grid cell: its process stops at the next cell, so
    # the one pool worker is free for the next job long before the cancelled one would have ended
    big = {**SMALL, "trials": 20_000, "rho": [0.05, 0.1, 0.15, 0.25, 0.5, 1.0]}
    poll = job_client.post(f"/projects/{pid}/simulate", json=big).json()["poll"]
    deadline = time.monotonic() + 60
    started = None
    while (job := job_client.get(poll).json())["done"] == 0:
        assert job["status"] in ("queued", "running"), job
        assert time.monotonic() < deadline, "the job never started"
        if started is None and job["status"] == "running":
            started = time.monotonic()
        time.sleep(0.05)
    per_cell = time.monotonic() - (started or time.monotonic())
    r = job_client.delete(poll)
    assert r.status_code == 200 and r.json()["status"] == "failed", r.text
    cancelled_at = time.monotonic()
    follow = job_client.post(f"/projects/{pid}/simulate", json={**SMALL, "trials": 1}).json()
    assert wait_done(job_client, follow["poll"])["status"] == "done"
    waited = time.monotonic() - cancelled_at
    print(f"per cell {per_cell:.2f} s, the next job done {waited:.2f} s after the cancel")
    assert waited < 2 * per_cell + 2.0  # the five cells left would take 5 x per_cell
    after = job_client.get(poll).json()
    assert after["status"] == "failed" and after["error"].startswith("cancelled") and after["result"] is None


def test_one_project_cannot_hold_every_simulation_slot(job_client, database_url):
    """Issue 30: a pm keeping jobs in flight gets 429 at its project's share; another project still gets in."""
    job_client.app.state.settings = job_client.app.state.settings.model_copy(update={"simulations_per_project": 2})
    flooding, other = make_project(job_client), make_project(job_client)
    settings = job_client.post(f"/projects/{flooding}/simulate", json={**SMALL, "trials": 1}).json()
    settings = wait_done(job_client, settings["poll"])["settings"]
    insert_jobs(database_url, flooding, settings, 2, status="queued")
    r = job_client.post(f"/projects/{flooding}/simulate", json={**SMALL, "trials": 1})
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0, r.text
    assert "this project has 2 simulations" in r.json()["detail"]
    r = job_client.post(f"/projects/{other}/simulate", json={**SMALL, "trials": 1})
    assert r.status_code == 202, r.text
    assert wait_done(job_client, r.json()["poll"])["status"] == "done"
