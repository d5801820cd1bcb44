"""Property-based API fuzzing (issue 8): schemathesis generates requests for every operation in
the app's own ``/openapi.json`` and checks that none answers 5xx and that every response
conforms to the documented schema.

The app runs in-process (ASGI) on a fresh database holding a project with raters, items,
labels, a plan and a batch; generated ``pid``/``bid``/``sim_id`` path parameters are pointed
at those real resources, so requests reach the handlers instead of stopping at a 404.
Examples per operation are bounded so the file runs in well under a minute.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
import schemathesis.python.asgi
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from service.app import create_app
from service.core.settings import Settings
from tests.conftest import ADMIN_KEY, fresh_database

AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}
CHECKS = [schemathesis.checks.not_a_server_error, schemathesis.checks.response_schema_conformance]
DEEP = os.environ.get("ANNOPLAN_FUZZ_EXAMPLES")
EXAMPLES = int(DEEP or 10)
"""Per operation; set the variable for a deeper, randomised (slower) run."""
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=DEEP is None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def module_url(template_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    return fresh_database(template_url, tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="module")
def seeded(module_url: str) -> Iterator[dict[str, Any]]:
    """A running app (lifespan entered) and the ids of real resources to aim requests at."""
    app = create_app(
        Settings(
            database_url=module_url,
            admin_key=ADMIN_KEY,
            bootstrap_resamples=20,
            # keep every simulation in-process and small: a fuzzer must not fill the process pool
            simulation_sync_limit=20_000,
            simulation_max_work=20_000,
            # the Label Studio sync calls the URL it is given: only a loopback port nothing serves
            label_studio_urls=["http://127.0.0.1:9"],
        )
    )
    with TestClient(app, raise_server_exceptions=False, headers=AUTH) as c:
        pid = c.post("/projects", json={"name": "fuzz", "labels": ["pass", "fail"]}).json()["id"]
        for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
            assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
        assert c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(30)]).status_code == 200
        rows = [
            {"item": f"i{i}", "rater": r, "value": "pass" if (i + k) % 3 else "fail"}
            for i in range(30)
            for k, r in enumerate(("judge", "prim", "h2"))
        ]
        assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
        plan = c.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 1, "m": 20})
        assert plan.status_code == 201, plan.text
        batch = c.post(f"/projects/{pid}/batches", json={"rater": "h3", "size": 5}).json()
        yield {"app": app, "client": c, "ids": {"pid": pid, "bid": batch["id"]}}


def served_schema() -> dict[str, Any]:
    """The document the app serves at /openapi.json (built without a database)."""
    return create_app(Settings(database_url="sqlite://", admin_key=ADMIN_KEY)).openapi()


schemathesis.serializer.alias("application/x-ndjson", "text/plain")  # the bulk bodies' NDJSON is a string
schema = schemathesis.openapi.from_dict(served_schema())


def aimed(case: Any, ids: dict[str, str]) -> Any:
    """The case with its resource ids replaced by the seeded ones (other parameters as generated)."""
    for name, value in ids.items():
        if case.path_parameters and name in case.path_parameters:
            case.path_parameters[name] = value
    return case


@schema.parametrize()
@FUZZ_SETTINGS
def test_no_5xx_and_responses_match_the_schema(case: Any, seeded: dict[str, Any]) -> None:
    app = seeded["app"]
    session = schemathesis.python.asgi.get_client(app)  # not entered: the fixture runs the app's lifespan
    aimed(case, seeded["ids"]).call_and_validate(app=app, session=session, headers=AUTH, checks=CHECKS)


@pytest.mark.parametrize("delta_min", [5e-324, 1e-170, 1e-156])
def test_rank_plan_with_a_vanishing_delta_min_is_not_a_5xx(seeded: dict[str, Any], delta_min: float) -> None:
    """Found by this fuzzer: POST /plan {"purpose": "rank", "delta_min": 5e-324, ...} answered 500
    (delta_min**2 underflowed to 0 in planner/recipes.py; fixed in ed87cc6)."""
    body = {"purpose": "rank", "delta_min": delta_min, "p_h": 0.5, "p_j": 0.5, "m": 1}
    r = seeded["client"].post(f"/projects/{seeded['ids']['pid']}/plan", json=body)
    assert r.status_code in (201, 422), r.text


def test_fuzzed_schema_is_the_served_one(seeded: dict[str, Any]) -> None:
    assert seeded["client"].get("/openapi.json").json() == served_schema()
