"""The dashboard's drift panel in a real headless Chromium (issue 34): a watched judge that drifted is shown
with the label_seq of its alarm, and the page loads under its CSP. Skipped without Debian's chromium."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer
from tests.system.test_dashboard_browser import chromium, console_errors, log_in, pytestmark  # noqa: F401


def test_drift_panel_shows_the_alarm(database_url: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    n = 300
    rng = np.random.default_rng(3)
    primary = rng.integers(0, 2, n)
    judge = np.where(np.arange(n) < 150, np.where(rng.random(n) < 0.95, primary, 1 - primary), 1 - primary)
    with LiveServer(database_url, ADMIN_KEY, dashboard_wait_seconds=60) as server:
        with server.client() as c:
            pid = c.post("/projects", json={"name": "drifting judge", "labels": ["pass", "fail"]}).json()["id"]
            c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(n)])
            for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human")):
                assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
            watch = {"baseline": 0.9, "drop": 0.3, "horizon": 300}
            assert c.put(f"/projects/{pid}/raters/judge/drift-watch", json=watch).status_code == 200
            for rater, codes in (("prim", primary), ("judge", judge)):
                rows = [{"item": f"i{i}", "rater": rater, "value": ["pass", "fail"][v]} for i, v in enumerate(codes)]
                assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
            viewer = c.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["key"]
            alarm = c.get(f"/projects/{pid}/raters/judge/drift", params=watch).json()["alarm_label_seq"]
        driver = chromium(tmp_path)
        try:
            log_in(driver, f"{server.base_url}/projects/{pid}/dashboard", viewer, f"/projects/{pid}/dashboard")
            table = driver.find_element(By.ID, "drift")
            assert f"drifted at label_seq {alarm}" in table.text and "judge" in table.text
            assert console_errors(driver) == []
            driver.execute_script("arguments[0].scrollIntoView()", table)
            shot = Path(os.environ.get("ANNOPLAN_DRIFT_SCREENSHOT", tmp_path / "drift.png"))
            assert driver.save_screenshot(str(shot))
        finally:
            driver.quit()
