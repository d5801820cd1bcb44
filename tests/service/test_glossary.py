"""The user glossary (issue 31): served from the package at /glossary to anyone, one anchor per term of
docs/glossary.md, and every glossary link the dashboard's pages make lands on an anchor that exists."""

from __future__ import annotations

import re

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.dashboard.glossary import term_anchor
from tests.conftest import ROOT

GLOSSARY = ROOT / "docs" / "glossary.md"


def _ids(page: str) -> list[str]:
    return re.findall(r'<li id="([^"]+)">', page)


def _glossary_links(page: str) -> set[str]:
    return set(re.findall(r'href="/glossary#([^"]*)"', page))


@pytest.mark.parametrize(
    ("term", "anchor"),
    [
        ("Overlap, `m`", "overlap"),
        ("Held-out human, won / lost / open", "held-out-human"),
        ("`alpha_sig`, false rejection", "alpha_sig"),
        ("Monitoring: anytime / fixed", "monitoring"),
        ("The decision", "the-decision"),
        ("Human-pool score", "human-pool-score"),
        ("`label_seq`", "label_seq"),
    ],
)
def test_a_terms_anchor_is_its_name_before_a_comma_or_colon(term: str, anchor: str) -> None:
    assert term_anchor(term) == anchor


def test_the_glossary_is_served_to_anyone_with_one_anchor_per_term(client: TestClient) -> None:
    client.headers.pop("Authorization")
    r = client.get("/glossary")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    # The terms, read from the markdown by its own convention: a list item opening with a bold name.
    terms = re.findall(r"^- \*\*(.+?)\*\*", GLOSSARY.read_text(), flags=re.M)
    assert len(terms) >= 20
    ids = _ids(r.text)
    assert ids == [term_anchor(t) for t in terms] and len(set(ids)) == len(ids)
    assert "<strong>Omega</strong>" in r.text and "share of held-out humans the judge won against" in r.text
    # Links to other pages of docs/ are not served here: they become text, never a dead link.
    assert "vocabulary.md" in r.text and 'href="vocabulary.md"' not in r.text
    assert "<script" not in r.text


def _project_with_a_plan(client: TestClient, project: dict) -> str:
    pid = project["id"]
    rng = np.random.default_rng(4)
    rows = [
        {"item": f"i{i}", "rater": k, "value": ["pass", "fail"][int(rng.integers(2))]}
        for k in ("judge", "prim", "h2", "h3")
        for i in range(20)
    ]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    plan = {"source": "prior", "p_h": 0.85, "p_j": 0.9, "m": 10}
    assert client.post(f"/projects/{pid}/plan", json=plan).status_code == 201
    return pid


def _numeric_project(client: TestClient) -> str:
    body = {"name": "scores", "scale": "numeric", "value_range": {"min": 1, "max": 5, "step": 1}}
    pid: str = client.post("/projects", json=body).json()["id"]
    raters = [("j", "judge"), ("h1", "primary"), ("h2", "human"), ("h3", "human")]
    for ext, kind in raters:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{n}"} for n in range(4)]).status_code == 200
    rows = [
        {"item": f"i{n}", "rater": e, "value": 1 + (n + k) % 5} for n in range(4) for k, (e, _) in enumerate(raters)
    ]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def test_every_glossary_link_on_the_dashboard_pages_lands_on_an_anchor(client: TestClient, project: dict) -> None:
    anchors = set(_ids(client.get("/glossary").text))
    pid = _project_with_a_plan(client, project)
    pages = {
        "project": client.get(f"/projects/{pid}/dashboard"),
        "numeric": client.get(f"/projects/{_numeric_project(client)}/dashboard"),
        "index": client.get("/dashboard"),
    }
    links = {}
    for name, r in pages.items():
        assert r.status_code == 200, (name, r.text)
        links[name] = _glossary_links(r.text)
        assert links[name] and links[name] <= anchors, (name, links[name] - anchors)
    # The words a reader meets first on a project's page are each a link.
    said = {"omega", "margin", "overlap", "the-decision", "label_seq", "monitoring", "human-pool-score", "rule"}
    assert said <= links["project"], said - links["project"]
    assert {"omega", "the-decision", "epsilon"} <= links["numeric"]
    assert {"omega", "the-decision", "secondary-annotator"} <= links["index"]
