"""The dashboard in a real headless Chromium: login form, decision and charts rendered, screenshot.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them); skipped
where they are absent.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from service.cli import app as cli
from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Debian chromium and chromium-driver not installed")


def chromium(tmp_path: Path) -> WebDriver:
    """A headless Chromium that keeps its console log (CSP violations are reported there)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--window-size=800,1600", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def console_errors(driver: WebDriver) -> list[str]:
    """Severe console messages so far (a blocked script or style shows up here); the
    browser's own guess at /favicon.ico is not the page's."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and "favicon.ico" not in e["message"]]


def test_dashboard_renders_decision_and_charts(database_url: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with LiveServer(database_url, ADMIN_KEY, bootstrap_resamples=200) as server:
        result = CliRunner().invoke(cli, ["demo", "--url", server.base_url, "--key", ADMIN_KEY, "--n-items", "400"])
        assert result.exit_code == 0, result.output
        pid = result.output.split()[1].rstrip(":")
        with server.client() as c:
            viewer = c.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["key"]
            decision = c.get(f"/projects/{pid}/reliability").json()["decision"]

        driver = chromium(tmp_path)
        try:
            driver.get(f"{server.base_url}/projects/{pid}/dashboard")
            assert driver.current_url.endswith("/login"), "an unauthenticated visit must go to the login form"
            driver.find_element(By.ID, "key").send_keys(viewer)
            driver.find_element(By.ID, "login").click()
            WebDriverWait(driver, 30).until(lambda d: d.current_url.endswith(f"/projects/{pid}/dashboard"))
            assert decision in driver.find_element(By.ID, "decision").text
            assert len(driver.find_elements(By.CSS_SELECTOR, "#margins-1 circle.estimate")) == 4
            assert len(driver.find_elements(By.CSS_SELECTOR, "#margins-1 line.ci")) == 4
            assert driver.find_elements(By.CSS_SELECTOR, "#pool-history polyline.series")
            assert driver.find_elements(By.CSS_SELECTOR, "#overlap-curve polyline.series")
            assert "?" not in driver.current_url, "the key must never travel in a URL"
            assert console_errors(driver) == []  # the CSP blocks nothing the page needs
            shot = Path(os.environ.get("ANNOPLAN_SCREENSHOT", tmp_path / "dashboard.png"))
            assert driver.save_screenshot(str(shot))
            assert shot.stat().st_size > 10_000
        finally:
            driver.quit()


def test_docs_pages_render_offline_under_their_csp(database_url: str, tmp_path: Path) -> None:
    """Swagger UI and ReDoc render from this server's assets alone (the browser has no internet here)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with LiveServer(database_url, ADMIN_KEY) as server:
        driver = chromium(tmp_path)
        try:
            driver.get(f"{server.base_url}/docs")
            WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock"))
            assert "annoplan" in driver.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title").text
            driver.get(f"{server.base_url}/redoc")
            WebDriverWait(driver, 30).until(lambda d: "POST /agreement" in d.find_element(By.TAG_NAME, "body").text
                                            or d.find_elements(By.CSS_SELECTOR, "[data-section-id]"))
            # ReDoc's "API docs by Redocly" badge points at its CDN; the CSP blocks it, nothing else.
            assert [e for e in console_errors(driver) if "cdn.redoc.ly/redoc/logo-mini.svg" not in e] == []
        finally:
            driver.quit()
