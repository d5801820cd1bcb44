"""Shared factories for the service and system tests: projects, raters and items made through the API."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fastapi.testclient import TestClient

PANEL = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"))
"""A judge, the primary and two secondary humans, as (external_id, kind)."""


def create_project(
    client: TestClient,
    *,
    name: str = "test",
    labels: Sequence[str] = ("pass", "fail"),
    raters: Iterable[tuple[str, str]] = PANEL,
    items: Iterable[str] = (),
    **settings: Any,
) -> str:
    """A project with ``raters`` and ``items`` (external ids); ``settings`` go into its body. Its id."""
    response = client.post("/projects", json={"name": name, "labels": list(labels), **settings})
    assert response.status_code == 201, response.text
    pid: str = response.json()["id"]
    for external_id, kind in raters:
        r = client.post(f"/projects/{pid}/raters", json={"external_id": external_id, "kind": kind})
        assert r.status_code == 201, r.text
    rows = [{"external_id": i} for i in items]
    if rows:
        r = client.post(f"/projects/{pid}/items", json=rows)
        assert r.status_code == 200, r.text
    return pid
