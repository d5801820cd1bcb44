"""The dashboard in a real headless Chromium: login form, decision and charts rendered, screenshot.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them); skipped
where they are absent.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from service.cli import app as cli
from service.core.db import make_engine, make_sessionmaker
from service.documents.history_keeper import store_due_points
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
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=800,1600",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def log_in(driver: WebDriver, url: str, key: str, lands_on: str, *, wait: float = 30) -> None:
    """Open ``url``, log in with ``key`` on the form it shows, and wait until the page ends in ``lands_on``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.ID, "login").click()
    WebDriverWait(driver, wait).until(lambda d: d.current_url.endswith(lands_on))


def console_errors(driver: WebDriver) -> list[str]:
    """Severe console messages so far (a blocked script or style shows up here); the
    browser's own guess at /favicon.ico is not the page's."""
    return [
        e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and "favicon.ico" not in e["message"]
    ]


def take_history_turn(database_url: str) -> None:
    """The job queue's history turn, taken by the test (the live server's own comes an hour apart): it queues
    the replay of a project's history, which the server's queue then runs."""
    engine = make_engine(database_url)
    try:
        store_due_points(make_sessionmaker(engine), "")
    finally:
        engine.dispose()


def test_dashboard_renders_decision_and_charts(database_url: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # The page waits for its document and the replayed history (an older look is tested below); the test takes
    # the history turn that queues the replay before the view, so the view does not race the server's turn.
    with LiveServer(
        database_url, ADMIN_KEY, bootstrap_resamples=200, dashboard_wait_seconds=60, history_point_seconds=3600
    ) as server:
        result = CliRunner().invoke(cli, ["demo", "--url", server.base_url, "--key", ADMIN_KEY, "--n-items", "400"])
        assert result.exit_code == 0, result.output
        pid = result.output.split()[1].rstrip(":")
        take_history_turn(database_url)
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
            assert len(driver.find_elements(By.CSS_SELECTOR, "#sequences-1 polygon.band")) == 4
            assert "anytime-valid" in driver.find_element(By.ID, "monitoring").text
            assert driver.find_elements(By.CSS_SELECTOR, "#pool-history polyline.series")
            assert driver.find_elements(By.CSS_SELECTOR, "#overlap-curve polyline.series")
            assert "?" not in driver.current_url, "the key must never travel in a URL"
            assert console_errors(driver) == []  # the CSP blocks nothing the page needs
            shot = Path(os.environ.get("ANNOPLAN_SCREENSHOT", tmp_path / "dashboard.png"))
            assert driver.save_screenshot(str(shot))
            assert shot.stat().st_size > 10_000
            # Log out: the login ends, and the dashboard sends the browser back to the form.
            driver.find_element(By.CSS_SELECTOR, "#logout button").click()
            WebDriverWait(driver, 30).until(lambda d: d.current_url.endswith("/login"))
            driver.get(f"{server.base_url}/projects/{pid}/dashboard")
            assert driver.current_url.endswith("/login")
            assert console_errors(driver) == []
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
            WebDriverWait(driver, 30).until(
                lambda d: (
                    "POST /agreement" in d.find_element(By.TAG_NAME, "body").text
                    or d.find_elements(By.CSS_SELECTOR, "[data-section-id]")
                )
            )
            # ReDoc's "API docs by Redocly" badge points at its CDN; the CSP blocks it, nothing else.
            assert [e for e in console_errors(driver) if "cdn.redoc.ly/redoc/logo-mini.svg" not in e] == []
        finally:
            driver.quit()


def _readme_project(c: httpx.Client) -> str:
    """The README walkthrough: 3 items, a judge, ann-1 primary, ann-2 secondary, a prior plan, ann-2's
    batch, 9 labels."""
    pid = c.post("/projects", json={"name": "toxicity", "labels": ["ok", "toxic"], "scale": "nominal"}).json()["id"]
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"q{i}"} for i in (1, 2, 3)]).raise_for_status()
    for ext, kind in [("gpt-judge", "judge"), ("ann-1", "primary"), ("ann-2", "human")]:
        c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    values = {"gpt-judge": "ok toxic ok", "ann-1": "ok ok ok"}
    c.post(
        f"/projects/{pid}/labels",
        json=[
            {"item": f"q{i + 1}", "rater": k, "value": v} for k, vs in values.items() for i, v in enumerate(vs.split())
        ],
    )
    c.post(f"/projects/{pid}/plan", json={"purpose": "certify", "source": "prior", "p_h": 0.85, "p_j": 0.9})
    c.post(f"/projects/{pid}/batches", json={"rater": "ann-2", "size": 20}).raise_for_status()
    c.post(
        f"/projects/{pid}/labels",
        json=[{"item": f"q{i + 1}", "rater": "ann-2", "value": v} for i, v in enumerate("ok toxic ok".split())],
    ).raise_for_status()
    return pid


def _two_judges_alt_test(c: httpx.Client) -> str:
    """120 items, three humans and two judges of different quality, decided by the alt-test."""
    pid = c.post(
        "/projects",
        json={
            "name": "two judges, alt-test",
            "labels": ["no", "yes"],
            "decision": {"rule": "alt-test", "epsilon": 0.2},
        },
    ).json()["id"]
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(120)]).raise_for_status()
    flip = {"strong-judge": 0.05, "weak-judge": 0.35, "ann-1": 0.1, "ann-2": 0.15, "ann-3": 0.15}
    for ext in flip:
        kind = "judge" if ext.endswith("judge") else "primary" if ext == "ann-1" else "human"
        c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    rng = np.random.default_rng(5)
    truth = rng.integers(2, size=120)
    rows = [
        {"item": f"i{i}", "rater": k, "value": ["no", "yes"][truth[i] ^ int(rng.random() < p)]}
        for k, p in flip.items()
        for i in range(120)
    ]
    c.post(f"/projects/{pid}/labels", json=rows).raise_for_status()
    return pid


def _infeasible_plan(c: httpx.Client) -> str:
    """A 246-item corpus and a prior plan whose judge is a little worse than the humans."""
    pid = c.post("/projects", json={"name": "infeasible plan", "labels": ["fail", "pass"]}).json()["id"]
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(246)]).raise_for_status()
    for ext, kind in [("judge", "judge"), ("ann-1", "primary"), ("ann-2", "human"), ("ann-3", "human")]:
        c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    plan = c.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.835}).json()
    assert not plan["recipe"]["feasible"], plan
    return pid


def _screenshot(driver: WebDriver, path: Path) -> None:
    """The whole page, however long (the viewport is emulated at the page's height for the shot)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    metrics = {"width": 800, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    assert driver.save_screenshot(str(path))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert path.stat().st_size > 10_000


def test_dashboard_scenarios_in_chromium(database_url: str, tmp_path: Path) -> None:
    """The README project, a 2-judge alt-test project and an infeasible plan, as an admin sees them:
    every dot inside its interval, one panel per judge, the infeasible plan said plainly, downloads served."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    shots = Path(os.environ.get("ANNOPLAN_SCREENSHOT_DIR", tmp_path))
    with LiveServer(database_url, ADMIN_KEY, bootstrap_resamples=200, dashboard_wait_seconds=60) as server:
        with server.client() as c:
            pids = {
                "readme": _readme_project(c),
                "alt-test": _two_judges_alt_test(c),
                "infeasible": _infeasible_plan(c),
            }
        driver = chromium(tmp_path)
        try:
            log_in(driver, f"{server.base_url}/login", ADMIN_KEY, "/dashboard")
            index = driver.find_element(By.ID, "projects").text
            assert all(name in index for name in ("toxicity", "two judges, alt-test", "infeasible plan")), index
            _screenshot(driver, shots / "index.png")
            for name, pid in pids.items():
                driver.get(f"{server.base_url}/projects/{pid}/dashboard")
                WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "plan-verdict"))
                for panel in driver.find_elements(By.CSS_SELECTOR, "section.judge svg[id^='margins-']"):
                    dots = panel.find_elements(By.CSS_SELECTOR, "circle.estimate")
                    bars = panel.find_elements(By.CSS_SELECTOR, "line.ci")
                    assert len(dots) == len(bars)
                    for dot, bar in zip(dots, bars, strict=True):
                        centre = dot.rect["x"] + dot.rect["width"] / 2
                        assert bar.rect["x"] - 1 <= centre <= bar.rect["x"] + bar.rect["width"] + 1, (name, dot.rect)
                    assert panel.find_elements(By.CSS_SELECTOR, "text.tick"), "the margins axis is numeric"
                for link in driver.find_elements(By.CSS_SELECTOR, ".downloads a[download]"):
                    r = httpx.get(link.get_attribute("href"), headers={"Authorization": f"Bearer {ADMIN_KEY}"})
                    assert r.status_code == 200 and r.text, link.get_attribute("href")
                assert console_errors(driver) == []
                _screenshot(driver, shots / f"dashboard-{name}.png")
                page = driver.find_element(By.TAG_NAME, "body").text
                if name == "alt-test":
                    assert len(driver.find_elements(By.CSS_SELECTOR, "section.judge")) == 2
                    assert "Judge strong-judge" in page and "Judge weak-judge" in page
                    assert "rho_f - rho_h" in page
                if name == "infeasible":
                    verdict = driver.find_element(By.ID, "plan-verdict")
                    assert "infeasible: the recipe needs" in verdict.text and "the corpus has 246" in verdict.text
                    assert "raise epsilon to" in verdict.text and verdict.get_attribute("class") == "infeasible"
                if name == "readme":
                    assert "human-pool score" in driver.find_element(By.ID, "pool-history").text
                    # The PNG link draws the chart's SVG on a canvas and saves it (under the page's CSP).
                    downloads = tmp_path / "downloads"
                    driver.execute_cdp_cmd(
                        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
                    )
                    driver.find_element(By.CSS_SELECTOR, 'a.png[data-chart="margins-1"]').click()
                    png = downloads / "margins-1.png"
                    WebDriverWait(driver, 30).until(lambda d, png=png: png.exists() and png.stat().st_size > 0)
                    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                    width, height = struct.unpack(">II", png.read_bytes()[16:24])
                    svg = driver.find_element(By.ID, "margins-1")
                    assert (width, height) == (
                        2 * int(svg.get_attribute("width")),
                        2 * int(svg.get_attribute("height")),
                    )
                    shutil.copy(png, shots / "margins-1.png")
                    assert console_errors(driver) == []
        finally:
            driver.quit()


def test_a_5000_item_demo_in_chromium(database_url: str, tmp_path: Path) -> None:
    """The demo a data scientist with a 5,000-item corpus would run (built through the API in bulk writes: the
    corpus in one, the judge's and primary's labels in one, each leased batch in one), as its viewer sees it:
    every chart drawn (the pool score as a line), every dot inside its bar, each term a glossary link."""
    from selenium.webdriver.common.by import By

    shots = Path(os.environ.get("ANNOPLAN_SCREENSHOT_DIR", tmp_path))
    with LiveServer(
        database_url, ADMIN_KEY, bootstrap_resamples=200, dashboard_wait_seconds=60, history_point_seconds=3600
    ) as server:
        result = CliRunner().invoke(cli, ["demo", "--url", server.base_url, "--key", ADMIN_KEY, "--n-items", "5000"])
        assert result.exit_code == 0, result.output
        pid = result.output.split()[1].rstrip(":")
        take_history_turn(database_url)  # the replay queued before the view, which waits for it
        with server.client() as c:
            viewer = c.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["key"]
            doc = c.get(f"/projects/{pid}/reliability").json()
            anchors = set(re.findall(r'<li id="([^"]+)">', c.get("/glossary").text))
        assert doc["n_items"] == 5000
        driver = chromium(tmp_path)
        try:
            log_in(driver, f"{server.base_url}/login", viewer, f"/projects/{pid}/dashboard", wait=60)
            assert doc["decision"] in driver.find_element(By.ID, "decision").text
            for panel in driver.find_elements(By.CSS_SELECTOR, "section.judge svg[id^='margins-']"):
                dots = panel.find_elements(By.CSS_SELECTOR, "circle.estimate")
                bars = panel.find_elements(By.CSS_SELECTOR, "line.ci")
                assert len(dots) == len(bars) == 4
                for dot, bar in zip(dots, bars, strict=True):
                    centre = dot.rect["x"] + dot.rect["width"] / 2
                    assert bar.rect["x"] - 1 <= centre <= bar.rect["x"] + bar.rect["width"] + 1, dot.rect
            for chart in ("pool-history", "overlap-curve", "progress", "sequences-1"):
                assert driver.find_elements(
                    By.CSS_SELECTOR, f"svg#{chart} polyline, svg#{chart} rect, svg#{chart} polygon"
                ), chart
            links = {a.get_attribute("href").rsplit("#", 1)[1] for a in driver.find_elements(By.CSS_SELECTOR, "a.term")}
            assert {"omega", "margin", "overlap", "the-decision"} <= links <= anchors, links - anchors
            assert console_errors(driver) == []
            _screenshot(driver, shots / "dashboard-5000.png")
        finally:
            driver.quit()


def test_a_page_showing_an_older_document_reloads_itself_when_the_fresh_one_is_ready(
    database_url: str, tmp_path: Path
) -> None:
    """With no wait for the fresh document, the page after a write shows the older one, marked; its script
    polls the reliability endpoint (one request at a time) and reloads into the fresh page on its own."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    items = [f"i{k}" for k in range(40)]
    with LiveServer(database_url, ADMIN_KEY, bootstrap_resamples=200, dashboard_wait_seconds=0) as server:
        with server.client() as c:
            pid = c.post("/projects", json={"name": "refresh", "labels": ["pass", "fail"]}).json()["id"]
            for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")):
                assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
            assert c.post(f"/projects/{pid}/items", json=[{"external_id": i} for i in items]).status_code == 200

            def write(rater: str, flip: int) -> int:
                rows = [
                    {"item": i, "rater": rater, "value": "pass" if (k + flip) % 3 else "fail"}
                    for k, i in enumerate(items)
                ]
                r = c.post(f"/projects/{pid}/labels", json=rows)
                assert r.status_code == 200, r.text
                return int(r.json()["label_seq"])

            for n, rater in enumerate(("judge", "prim", "h2")):
                older = write(rater, n)
            assert 'id="freshness"' not in c.get(f"/projects/{pid}/dashboard").text  # computed, now cached
            viewer = c.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["key"]
            now = write("h3", 1)
        driver = chromium(tmp_path)
        try:
            # a project key lands on the project's page
            log_in(driver, f"{server.base_url}/login", viewer, f"/projects/{pid}/dashboard")
            assert driver.find_element(By.ID, "label-seq").text == str(older)
            assert f"{now - older} label events since, refreshing" in driver.find_element(By.ID, "freshness").text
            WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "label-seq").text == str(now))
            assert driver.find_elements(By.ID, "freshness") == []
            assert console_errors(driver) == []
        finally:
            driver.quit()


def test_a_page_drawn_while_the_history_is_replayed_says_so_and_reloads_into_the_whole_history(
    database_url: str, tmp_path: Path
) -> None:
    """A project whose labels were written before the history turn took it: its first view does not wait for
    the history's replay, says it is being rebuilt, and reloads until the replayed points are drawn."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    shots = Path(os.environ.get("ANNOPLAN_SCREENSHOT_DIR", tmp_path))
    items = [f"i{k}" for k in range(3000)]
    with LiveServer(
        database_url, ADMIN_KEY, bootstrap_resamples=200, dashboard_wait_seconds=0, history_point_seconds=3600
    ) as server:
        with server.client() as c:
            c.timeout = 120
            pid = c.post("/projects", json={"name": "replayed history", "labels": ["pass", "fail"]}).json()["id"]
            for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")):
                assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
            assert c.post(f"/projects/{pid}/items", json=[{"external_id": i} for i in items]).status_code == 200
            for n, rater in enumerate(("judge", "prim", "h2", "h3")):
                rows = [
                    {"item": i, "rater": rater, "value": "pass" if (k + n) % 3 else "fail"} for k, i in enumerate(items)
                ]
                assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
            viewer = c.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["key"]
        driver = chromium(tmp_path)
        try:
            # the first view, before the history turn has queued the replay: a view queues nothing
            log_in(driver, f"{server.base_url}/login", viewer, f"/projects/{pid}/dashboard", wait=60)
            note = driver.find_element(By.ID, "history-rebuilding").text
            assert note.startswith("History being rebuilt: reading the events.") and "page reloads when" in note
            _screenshot(driver, shots / "dashboard-history-rebuilding.png")
            take_history_turn(database_url)  # the turn queues the replay; the server's queue runs it
            WebDriverWait(driver, 120).until(lambda d: d.find_elements(By.ID, "history-rebuilding") == [])
            assert driver.find_elements(By.CSS_SELECTOR, "svg#pool-history"), "the replayed line is drawn"
            assert console_errors(driver) == []
            _screenshot(driver, shots / "dashboard-history-rebuilt.png")
        finally:
            driver.quit()
