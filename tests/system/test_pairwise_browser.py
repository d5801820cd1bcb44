"""The dashboard's pairwise panel in a real headless Chromium (issue 34): a pairwise project's judge with its
position consistency, flips and accuracy in both orders, and the systems ranked, under the page's CSP; the
viewer sees aggregates only. Skipped without Debian's chromium."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer
from tests.system.test_dashboard_browser import chromium, console_errors, log_in, pytestmark  # noqa: F401

VERDICTS = ["A", "B", "tie"]


def test_pairwise_panel_shows_position_and_systems(database_url: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    n = 120
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 2, n)
    shown_ab = np.where(rng.random(n) < 0.9, truth, 0)  # wrong: it picks the answer shown first (A in AB)
    shown_ba = np.where(rng.random(n) < 0.9, truth, 1)  # and B, shown first in BA
    systems = ["model-x", "model-y", "model-z"]
    with LiveServer(database_url, ADMIN_KEY, dashboard_wait_seconds=60) as server:
        with server.client() as c:
            pid = c.post("/projects", json={"name": "pairwise judge", "kind": "pairwise"}).json()["id"]
            items = [
                {"external_id": f"q{i}", "features": {"system_a": systems[i % 3], "system_b": systems[(i + 1) % 3]}}
                for i in range(n)
            ]
            assert c.post(f"/projects/{pid}/items", json=items).status_code == 200
            for ext, kind in (("gpt-judge", "judge"), ("prim", "primary"), ("h2", "human")):
                assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
            for rater in ("prim", "h2"):
                rows = [{"item": f"q{i}", "rater": rater, "value": VERDICTS[v]} for i, v in enumerate(truth)]
                assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
            for order, codes in (("AB", shown_ab), ("BA", shown_ba)):
                rows = [
                    {"item": f"q{i}", "rater": "gpt-judge", "value": VERDICTS[v], "order": order}
                    for i, v in enumerate(codes)
                ]
                assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
            viewer = c.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["key"]
            [judge] = c.get(f"/projects/{pid}/reliability").json()["pairwise"]["judges"]
        driver = chromium(tmp_path)
        try:
            log_in(driver, f"{server.base_url}/projects/{pid}/dashboard", viewer, f"/projects/{pid}/dashboard")
            table = driver.find_element(By.ID, "pairwise")
            position = judge["position"]
            assert "gpt-judge" in table.text and f"{position['consistency']:.3f}" in table.text
            assert f"{position['first_favoured']} first / {position['second_favoured']} second" in table.text
            assert "favours the first" in table.text
            assert f"{judge['accuracy']['right_both']:.3f}" in table.text
            ranked = driver.find_element(By.ID, "pairwise-systems").text
            assert all(s in ranked for s in systems) and "the humans and gpt-judge (PPI)" in ranked
            assert "q0" not in driver.page_source  # aggregates only: no item id
            assert console_errors(driver) == []
            driver.execute_script("arguments[0].scrollIntoView()", table)
            shot = Path(os.environ.get("ANNOPLAN_PAIRWISE_SCREENSHOT", tmp_path / "pairwise.png"))
            assert driver.save_screenshot(str(shot))
        finally:
            driver.quit()
