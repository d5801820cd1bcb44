"""The ``annoplan`` command line: every command runs, prints what it says, and has an example."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli import app
from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer

runner = CliRunner()


@pytest.mark.parametrize("command", [[], ["serve"], ["migrate"], ["keys", "create"], ["plan"], ["simulate"], ["demo"]])
def test_every_command_has_help_with_an_example(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    if command:
        assert "Example" in result.output


def test_plan_from_priors_prints_spec_recipe() -> None:
    result = runner.invoke(app, ["plan", "--n-items", "1000", "--n-raters", "3", "--p-h", "0.85", "--p-j", "0.9"])
    assert result.exit_code == 0, result.output
    assert "117" in result.output  # SPEC.md §4 check: m_cert = 117
    assert "0.0350" in result.output and "0.2188" in result.output


def test_plan_from_a_label_csv(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    rows = [("judge", i, "ab"[i % 2]) for i in range(60)]
    rows += [(h, i, "ab"[(i + (i % 7 == 0)) % 2]) for h in ("h1", "h2") for i in range(60)]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["item", "rater", "value"])
        w.writerows((f"i{i}", r, v) for r, i, v in rows)
    result = runner.invoke(app, ["plan", "--labels-csv", str(path), "--judge", "judge"])
    assert result.exit_code == 0, result.output
    assert "pilot" in result.output


def test_plan_csv_without_the_judge_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("item,rater,value\ni1,h1,a\n")
    result = runner.invoke(app, ["plan", "--labels-csv", str(path), "--judge", "judge"])
    assert result.exit_code != 0
    assert "judge 'judge' is not a rater" in result.output


def test_simulate_writes_csv(tmp_path: Path) -> None:
    out = tmp_path / "sim.csv"
    result = runner.invoke(app, ["simulate", "--n-items", "200", "--trials", "30", "--rho", "0.1", "--rho", "0.5",
                                 "--design", "random", "--out", str(out)])
    assert result.exit_code == 0, result.output
    cells = list(csv.DictReader(out.open()))
    assert [float(c["rho"]) for c in cells] == [0.1, 0.5]
    assert all(c["design"] == "random" and int(c["trials"]) == 30 for c in cells)


def test_keys_create_makes_a_working_admin_key(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from service.settings import get_settings

    monkeypatch.setenv("ANNOPLAN_DATABASE_URL", database_url)
    get_settings.cache_clear()
    try:
        result = runner.invoke(app, ["keys", "create", "--role", "admin"])
        assert result.exit_code == 0, result.output
        secret = result.output.strip()
        bad = runner.invoke(app, ["keys", "create", "--role", "viewer"])
        assert bad.exit_code != 0 and "needs one" in bad.output
    finally:
        get_settings.cache_clear()
    with LiveServer(database_url, ADMIN_KEY) as server, server.client(secret) as c:
        assert c.get("/projects").status_code == 200


def test_demo_populates_a_project(database_url: str) -> None:
    with LiveServer(database_url, ADMIN_KEY, bootstrap_resamples=100) as server:
        result = runner.invoke(app, ["demo", "--url", server.base_url, "--key", ADMIN_KEY, "--n-items", "300"])
        assert result.exit_code == 0, result.output
        pid = result.output.split()[1].rstrip(":")
        with server.client() as c:
            doc = c.get(f"/projects/{pid}/reliability").json()
            assert doc["n_items"] == 300
            assert doc["decision"] in ("pass", "reject", "inconclusive")
            assert doc["plan"]["remaining_labels"] == 0
            assert {r["rater"] for r in doc["raters"]} == {"ann-1", "ann-2", "ann-3", "ann-4"}
