"""One story on every surface (issue 28 item 5): in anytime mode omega, the reason (banner), the per-rater
statuses, the margins chart (its confidence sequence, not the fixed interval) and the sequences caption
agree; a fixed-sample interval says it is valid at the planned overlap only; a human shown won whose band
still crosses -epsilon says so; the projects index and the decision.changed webhook carry provisional."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.dashboard.charts import FIXED_ONLY, margins_chart, status_text
from service.documents.monitoring import band_agrees, decision_in_force, monitored_reason
from service.schemas.documents import JudgeValidation, Monitoring, RaterMargin, RaterMonitoring
from service.schemas.projects import DecisionSettings
from tests.service.test_monitoring_api import interleaved_project


def _rater(name: str, status: str, low: float, high: float) -> dict[str, Any]:
    return {
        "rater": name,
        "status": status,
        "n": 100,
        "d": (low + high) / 2,
        "cs": [low, high],
        "band_agrees": band_agrees(status, low, high, 0.1),
    }


def _block(decision: str, statuses: list[tuple[str, float, float]], needed: int = 2) -> dict[str, Any]:
    return {
        "mode": "anytime",
        "decision": decision,
        "reason": f"{needed} of {len(statuses)} humans certified won",  # the planner's reason: the count needed
        "looks": 300,
        "decided_at_label_seq": 812,
        "needed_won": needed,
        "epsilon": 0.1,
        "raters": [_rater(f"h{k}", s, lo, hi) for k, (s, lo, hi) in enumerate(statuses)],
    }


def test_band_agrees_is_true_exactly_when_the_band_tells_the_status() -> None:
    """By hand, epsilon = .1: won needs the band above -.1, lost below, open across."""
    assert band_agrees("won", -0.05, 0.2, 0.1) and not band_agrees("won", -0.15, 0.2, 0.1)
    assert band_agrees("lost", -0.5, -0.12, 0.1) and not band_agrees("lost", -0.5, 0.0, 0.1)
    assert band_agrees("open", -0.2, 0.1, 0.1) and not band_agrees("open", -0.05, 0.1, 0.1)
    assert not band_agrees("open", -0.3, -0.2, 0.1)
    assert band_agrees("open", float("nan"), float("nan"), 0.1) and not band_agrees("won", float("nan"), 1.0, 0.1)


def test_the_banner_counts_what_the_statuses_show_not_the_count_needed() -> None:
    """The case of issue 28: a pass decided when 2 of 4 were won, a third won since. The banner said
    '2 of 4 humans certified won' while the caption listed 3 won; both now say 3, and omega is 3/4."""
    block = _block("pass", [("won", -0.05, 0.2), ("won", -0.02, 0.1), ("won", -0.08, 0.3), ("open", -0.3, 0.1)])
    fixed = {"decision": "inconclusive", "reason": "", "omega": 0.5, "raters": []}
    shown = decision_in_force(block, None, DecisionSettings(), fixed, None)  # type: ignore[arg-type]
    assert shown["decision"] == "pass" and shown["provisional"] is False
    assert "3 of 4 humans certified won, 0 lost, 1 open" in shown["reason"]
    assert "since label_seq 812" in shown["reason"] and "2 won needed" in shown["reason"]
    assert shown["omega"] == 0.75 and shown["fixed_omega"] == 0.5
    open_block = _block("continue", [("won", 0.0, 0.2), ("lost", -0.5, -0.2), ("open", -0.3, 0.1)])
    open_block["reason"] = "not enough humans certified yet"
    assert monitored_reason(open_block).endswith("1 of 3 humans certified won, 1 lost, 1 open (2 won needed to pass)")


def test_a_won_human_whose_band_crosses_minus_epsilon_says_so_in_the_chart() -> None:
    block = _block("pass", [("won", -0.15, 0.2), ("won", -0.02, 0.1), ("open", -0.3, 0.1)])
    raters = [RaterMonitoring.model_construct(**r) for r in block["raters"]]
    crossing, clear, _ = raters
    assert "by the e-values; the band still crosses -epsilon" in status_text(crossing)
    assert status_text(clear) == "won"
    monitoring = Monitoring.model_construct(**{**block, "raters": raters})
    validation = JudgeValidation.model_construct(
        rule="margin",
        epsilon=0.1,
        judge="j",
        monitoring=monitoring,
        raters=[RaterMargin.model_construct(rater="h0", d=0.3, ci=[0.2, 0.4], m=5, won=True, reason="")],
    )
    chart = margins_chart(validation, 1)
    assert "confidence sequence now (valid at every look)" in chart.title
    assert [row[:4] for row in chart.rows] == [(r["rater"], r["d"], *r["cs"]) for r in block["raters"]]
    assert chart.rows[0][5] == status_text(crossing)
    monitoring.mode = "fixed"
    fixed = margins_chart(validation, 1)
    assert FIXED_ONLY in fixed.title and fixed.rows[0][:4] == ("h0", 0.3, 0.2, 0.4)


def test_every_surface_of_an_anytime_project_tells_one_story(client: TestClient) -> None:
    pid, _ = interleaved_project(client, n_items=240)
    doc = client.get(f"/projects/{pid}/reliability").json()
    block = doc["monitoring"]
    statuses = [r["status"] for r in block["raters"]]
    won = statuses.count("won")
    assert doc["decision"] == block["decision"] == "pass"
    assert doc["omega"] == pytest.approx(won / len(statuses)) and doc["fixed_omega"] is not None
    assert f"{won} of {len(statuses)} humans certified won" in doc["reason"]
    for r in block["raters"]:
        assert r["band_agrees"] == band_agrees(r["status"], *r["cs"], doc["epsilon"])
    page = client.get(f"/projects/{pid}/dashboard").text
    panel = page[page.index('id="judge-1"') :]
    assert f"{won} of {len(statuses)} humans certified won" in panel  # the banner
    caption = re.search(r"anytime monitoring: pass after \d+ looks? \(([^)]*)\)", panel)
    assert caption is not None and caption.group(1).count(" won") == won  # the caption: the same count
    assert f"omega {won / len(statuses):.3f}" in re.sub(r"<[^>]+>", "", panel)  # the words, without their links
    assert f"Fixed-sample 95% intervals, {FIXED_ONLY}" in panel
    rows = list(csv.DictReader(io.StringIO(client.get(f"/projects/{pid}/dashboard/charts/margins-1.csv").text)))
    for row, r in zip(rows, block["raters"], strict=True):
        assert row["rater"] == r["rater"] and row["status"] == status_text(RaterMonitoring.model_validate(r))
        assert [float(row["cs_low"]), float(row["cs_high"])] == pytest.approx(r["cs"])
    index = client.get("/dashboard").text
    line = index[index.index(f'href="/projects/{pid}/dashboard"') :].split("</tr>")[0]
    assert f"judge: pass</td><td>{won / len(statuses):.2f}" in line


def test_a_provisional_pass_shows_its_mark_on_the_index_and_the_panel(client: TestClient) -> None:
    pid, _ = interleaved_project(client, n_items=240)
    assert client.patch(f"/projects/{pid}", json={"decision": {"monitoring": "fixed"}}).status_code == 200
    doc = client.get(f"/projects/{pid}/reliability").json()
    assert doc["decision"] == "pass" and doc["provisional"] is True  # no plan: provisional
    assert doc["omega"] == doc["fixed_omega"]
    index = client.get("/dashboard").text
    line = index[index.index(f'href="/projects/{pid}/dashboard"') :].split("</tr>")[0]
    assert "judge: pass (provisional)" in line
    page = client.get(f"/projects/{pid}/dashboard").text
    assert "<b>pass (provisional)</b>" in page
    assert FIXED_ONLY in page  # the margins chart's fixed-sample interval says when it holds
