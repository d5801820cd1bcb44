"""An annotator's own page (issue 31): a login with an annotator key lands on it; it shows the next batch,
what the rater has labeled and how many items remain, and nothing of other raters or the judge."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.conftest import ADMIN_KEY

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
LABELS = ["lbl-aye-q7", "lbl-nay-q7"]
OTHERS = {"rtr-judge-q7": "judge", "rtr-primary-q7": "primary", "rtr-other-q7": "human"}
N_ITEMS = 30


def _world(client: TestClient) -> tuple[str, str, str]:
    """A project whose judge, primary and another human labeled every item, with a plan of m = 8; the
    annotator's key (rater ann-me-q7) and the primary's."""
    pid = client.post("/projects", json={"name": "blind", "labels": LABELS}).json()["id"]
    for ext, kind in [*OTHERS.items(), ("ann-me-q7", "human")]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"itm-q7-{i:02d}"} for i in range(N_ITEMS)]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    rows = [
        {"item": f"itm-q7-{i:02d}", "rater": ext, "value": LABELS[(i + k) % 2]}
        for k, ext in enumerate(OTHERS)
        for i in range(N_ITEMS)
    ]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    plan = {"p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 7, "m": 8}
    assert client.post(f"/projects/{pid}/plan", json=plan).status_code == 201
    keys = [
        client.post(f"/projects/{pid}/keys", json={"role": "annotator", "rater": rater}).json()["key"]
        for rater in ("ann-me-q7", "rtr-primary-q7")
    ]
    return pid, keys[0], keys[1]


def _log_in(client: TestClient, key: str) -> str:
    token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
    r = client.post("/login", content=f"key={key}&csrf={token}", headers=FORM, follow_redirects=False)
    assert r.status_code == 303, r.text
    return str(r.headers["location"])


def _blind(page: str) -> list[str]:
    """What an annotator's page must never hold: another rater, any label value, agreement figures."""
    return [s for s in [*OTHERS, *LABELS, "omega", "agreement ", "reliability"] if s in page]


def _text(page: str, element_id: str) -> str:
    return re.sub(r"<[^>]+>", "", page[page.index(f'id="{element_id}"') :].split("</p>")[0].split(">", 1)[1])


def test_an_annotator_logs_in_to_its_own_page_and_sees_only_its_work(client: TestClient) -> None:
    pid, key, _ = _world(client)
    admin = client.headers.pop("Authorization")
    bearer = {"Authorization": f"Bearer {key}"}
    own = [{"item": f"itm-q7-{i:02d}", "rater": "ann-me-q7", "value": LABELS[0]} for i in (3, 5)]
    assert client.post(f"/projects/{pid}/labels", json=own, headers=bearer).status_code == 200
    landing = _log_in(client, key)
    assert landing == f"/projects/{pid}/annotator"
    page = client.get(landing).text
    assert _blind(page) == [], _blind(page)
    assert "No batch with items to do is out for you now" in page and '<form id="logout"' in page
    assert _text(page, "done").startswith("You have labeled 2 items")
    assert {"itm-q7-03", "itm-q7-05"} == set(re.findall(r"<li>([^<]+)</li>", page))
    before = _text(page, "remaining")
    assert re.match(r"\d items remain: of your list of 8 items", before), before  # strat lists exist with the plan

    batch = client.post(f"/projects/{pid}/batches", json={"size": 4}, headers=bearer).json()
    assert len(batch["items"]) == 4 and before.startswith(f"{batch['remaining']} items remain")
    done = batch["items"][0]
    label = [{"item": done, "rater": "ann-me-q7", "value": LABELS[1]}]
    assert client.post(f"/projects/{pid}/labels", json=label, headers=bearer).status_code == 200
    page = client.get(landing).text
    assert _blind(page) == [], _blind(page)
    assert f"Batch {batch['id']}: 3 of 4 items to do (1 done)" in page
    rows = re.findall(r"<tr><td>([^<]+)</td><td>to do</td></tr>", page)
    assert rows == [item for item in batch["items"] if item != done]  # in the batch's order
    assert _text(page, "done").startswith("You have labeled 3 items")
    # remaining: the batch's own count (its list unlabeled when issued) less the one labeled since
    assert _text(page, "remaining").startswith(f"{batch['remaining'] - 1} items remain: of your list of ")

    # A newer batch is the next one; once it is all labeled, the older one with items to do is again.
    newer = client.post(f"/projects/{pid}/batches", json={"size": 1}, headers=bearer).json()
    assert f"Batch {newer['id']}: 1 of 1 items to do" in client.get(landing).text
    label = [{"item": newer["items"][0], "rater": "ann-me-q7", "value": LABELS[1]}]
    assert client.post(f"/projects/{pid}/labels", json=label, headers=bearer).status_code == 200
    assert f"Batch {batch['id']}: 3 of 4 items to do" in client.get(landing).text
    # Released, the batch is no longer the next one.
    assert client.post(f"/projects/{pid}/batches/{batch['id']}/release", headers=bearer).status_code == 200
    assert "No batch with items to do is out for you now" in client.get(landing).text
    client.headers["Authorization"] = admin


def test_the_primary_sees_the_corpus_remaining(client: TestClient) -> None:
    pid, _, primary = _world(client)
    del client.headers["Authorization"]
    landing = _log_in(client, primary)
    page = client.get(landing).text
    # The primary labeled every item; the page names itself and no one else.
    assert _text(page, "remaining").startswith(f"0 items remain: you label every item of the corpus ({N_ITEMS}")
    assert _text(page, "done").startswith(f"You have labeled {N_ITEMS} items")
    assert [s for s in _blind(page) if s != "rtr-primary-q7"] == []


def test_other_roles_get_a_403_page_and_no_key_goes_to_the_login(client: TestClient) -> None:
    pid, _, _ = _world(client)
    viewer = client.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["key"]
    for key in (ADMIN_KEY, viewer):
        r = client.get(f"/projects/{pid}/annotator", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 403 and r.headers["content-type"].startswith("text/html"), r.text
    del client.headers["Authorization"]
    r = client.get(f"/projects/{pid}/annotator", follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, "/login")


def test_before_a_plan_and_before_a_sequential_list_the_remaining_count_is_unknown(client: TestClient) -> None:
    pid = client.post("/projects", json={"name": "early", "labels": LABELS}).json()["id"]
    for ext, kind in [("rtr-primary-q7", "primary"), ("ann-me-q7", "human"), ("rtr-other-q7", "human")]:
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"itm-q7-{i:02d}"} for i in range(N_ITEMS)])
    key = client.post(f"/projects/{pid}/keys", json={"role": "annotator", "rater": "ann-me-q7"}).json()["key"]
    bearer = {"Authorization": f"Bearer {key}"}
    page = client.get(f"/projects/{pid}/annotator", headers=bearer).text
    assert (
        _text(page, "remaining") == "Not known yet: the project has no plan yet: your items are given once it has one."
    )
    plan = {"p_h": 0.85, "p_j": 0.9, "design": "seq-refined", "seed": 7, "m": 8}
    assert client.post(f"/projects/{pid}/plan", json=plan).status_code == 201, "plan"
    page = client.get(f"/projects/{pid}/annotator", headers=bearer).text
    assert "your list of about 8 items is drawn when you ask for your first batch" in _text(page, "remaining")
