"""The dashboard's slices table and selective coverage curve in a real headless Chromium (issue 35): the failing
slice first under the headline, the curve drawn from the calibration, and the page loads under its CSP.
Skipped without Debian's chromium."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer
from tests.system.test_dashboard_browser import chromium, console_errors, log_in, pytestmark  # noqa: F401

N = 300
WORDS = ("pass", "fail")


def test_the_slices_table_leads_with_the_failing_slice_and_the_coverage_curve_is_drawn(
    database_url: str, tmp_path: Path
) -> None:
    """300 items, 240 "en" and 60 "de"; the humans agree but for every sixth item of h3; the judge is wrong on
    every third "de" item, with a confidence below .3 there and above it elsewhere."""
    from selenium.webdriver.common.by import By

    i = np.arange(N)
    truth = i % 2
    wrong = (i >= 240) & (i % 3 == 0)
    panel = {"prim": truth, "h2": truth, "h3": np.where(i % 6 == 0, 1 - truth, truth), "judge": truth ^ wrong}
    rng = np.random.default_rng(4)
    confidence = np.where(wrong, rng.uniform(0.0, 0.3, N), rng.uniform(0.3, 1.0, N))
    with LiveServer(database_url, ADMIN_KEY, dashboard_wait_seconds=60) as server:
        with server.client() as c:
            body = {"name": "sliced", "labels": list(WORDS), "decision": {"epsilon": 0.08, "monitoring": "fixed"}}
            pid = c.post("/projects", json={**body, "decision": {**body["decision"], "slices": "feature:language"}})
            pid = pid.json()["id"]
            for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")):
                assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
            items = [{"external_id": f"i{k}", "features": {"language": "en" if k < 240 else "de"}} for k in i]
            assert c.post(f"/projects/{pid}/items", json=items).status_code == 200
            rows = [
                {"item": f"i{k}", "rater": rater, "value": WORDS[int(codes[k])]}
                | ({"confidence": float(confidence[k])} if rater == "judge" else {})
                for rater, codes in panel.items()
                for k in i
            ]
            assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
            slices = c.get(f"/projects/{pid}/reliability", params={"by": "feature:language"}).json()["slices"]
            selective = c.post(f"/projects/{pid}/selective", json={})
            assert selective.status_code == 200, selective.text
            viewer = c.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["key"]
        order = [s["value"] for s in slices["slices"]]
        assert order[0] == "de", slices  # the block leads with the failing slice
        driver = chromium(tmp_path)
        try:
            log_in(driver, f"{server.base_url}/projects/{pid}/dashboard", viewer, f"/projects/{pid}/dashboard")
            assert "fails on slice de" in driver.find_element(By.ID, "slices-headline").text
            shown = [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "#slices tr td:first-child")]
            assert shown == ["de", "en"], shown
            curve = driver.find_elements(By.CSS_SELECTOR, "#selective polyline.series")
            assert curve and curve[0].size["width"] > 100, "the coverage curve is not drawn"
            threshold = selective.json()["stages"][0]["threshold"]
            assert threshold is not None and f"{threshold:.3f}" in driver.find_element(By.ID, "selective").text
            assert console_errors(driver) == []
            driver.execute_script("arguments[0].scrollIntoView()", driver.find_element(By.ID, "slices"))
            shot = Path(os.environ.get("ANNOPLAN_SLICES_SCREENSHOT", tmp_path / "slices.png"))
            assert driver.save_screenshot(str(shot))
        finally:
            driver.quit()
