"""GET /projects/{pid}/report through HTTP: hand-built tables under each handling rule, the
Manski and sharp bounds against brute force, INVALID never recoded, CSV and HTML formats,
macro aggregation over criteria, empty projects, roles and the OpenAPI document."""

from __future__ import annotations

import csv
import io
import itertools
import warnings

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.metrics import cohen_kappa_score

from tests.factories import create_project

CA, INV = "CANNOT_ASSESS", "INVALID"
# (human, judge) per item. Full table, rows human, columns judge, order yes, no, CA, INVALID:
#   yes: 4 1 1 0 / no: 1 2 0 1 / CA: 1 1 1 0 / INVALID: 0 0 0 0   (N = 13)
PAIRS = (
    [("yes", "yes")] * 4
    + [("yes", "no"), ("no", "no"), ("no", "no"), ("no", "yes")]
    + [("yes", CA), ("no", INV), (CA, "yes"), (CA, "no"), (CA, CA)]
)
TABLE = [[4, 1, 1, 0], [1, 2, 0, 1], [1, 1, 1, 0], [0, 0, 0, 0]]


def make_project(
    client: TestClient,
    *,
    labels: list[str],
    criteria: list[str] | None = None,
    raters: tuple[tuple[str, str], ...] = (("judge", "judge"), ("prim", "primary")),
) -> str:
    extra = {"criteria": criteria} if criteria else {}
    return create_project(client, name="report", labels=labels, raters=raters, allow_abstain=True, **extra)


def post_pairs(client: TestClient, pid: str, pairs: list[tuple[str, str]], criterion: str | None = None) -> None:
    items = [{"external_id": f"i{i}"} for i in range(len(pairs))]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    rows = []
    for i, (human, judge) in enumerate(pairs):
        for rater, value in (("prim", human), ("judge", judge)):
            row = {"item": f"i{i}", "rater": rater, "value": value}
            if criterion is not None:
                row["criterion"] = criterion
            rows.append(row)
    response = client.post(f"/projects/{pid}/labels", json=rows)
    assert response.status_code == 200, response.text


@pytest.fixture
def abstain_pid(client: TestClient) -> str:
    pid = make_project(client, labels=["yes", "no"])
    post_pairs(client, pid, PAIRS)
    return pid


def only_table(report: dict) -> dict:
    (judge,) = report["judges"]
    (criterion,) = judge["criteria"]
    return criterion


def kappa_of(human: list[str], judge: list[str]) -> float:
    """Cohen's kappa by scikit-learn; NaN where it is undefined."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(human, judge, labels=["yes", "no"]))


def test_binary_abstentions_exclude(client: TestClient, abstain_pid: str) -> None:
    response = client.get(f"/projects/{abstain_pid}/report")
    assert response.status_code == 200
    report = response.json()
    assert report["protocol"]["handling"] == "exclude" and report["protocol"]["aggregation"] == "micro"
    assert report["protocol"]["scale"] == "binary"
    c = only_table(report)
    assert c["table"]["categories"] == ["yes", "no", CA, INV]
    assert c["table"]["counts"] == TABLE and c["table"]["n"] == 13
    assert c["scored_table"]["counts"] == [[4, 1], [1, 2]] and c["n_eff"] == 8
    assert c["human_marginals"]["counts"] == {"yes": 6, "no": 4, CA: 3, INV: 0}
    assert c["judge_marginals"]["counts"] == {"yes": 6, "no": 4, CA: 2, INV: 1}
    assert c["human_marginals"]["scored_shares"] == pytest.approx({"yes": 5 / 8, "no": 3 / 8})
    rates = c["rates"]
    assert rates["human_abstain"] == pytest.approx(3 / 13) and rates["judge_abstain"] == pytest.approx(2 / 13)
    assert rates["judge_invalid"] == pytest.approx(1 / 13) and rates["human_invalid"] == 0
    assert rates["coverage"] == pytest.approx(8 / 13)
    assert c["accuracy"]["value"] == pytest.approx(6 / 8)
    # 2x2 on the covered pairs: p_o = 6/8, p_e = (5*5 + 3*3)/64, kappa = 14/30; phi = (4*2 - 1*1)/15
    assert c["kappa"]["value"] == pytest.approx(14 / 30)
    covered = [(h, j) for h, j in PAIRS if CA not in (h, j) and INV not in (h, j)]
    assert c["kappa"]["value"] == pytest.approx(kappa_of(*zip(*covered, strict=True)))
    assert c["kappa"]["human_positive_rate"] == pytest.approx(5 / 8)
    low, high = c["kappa"]["interval"]
    assert low < c["kappa"]["value"] < high
    assert c["association"]["statistic"] == "phi" and c["association"]["value"] == pytest.approx(7 / 15)
    assert c["f1_met"]["value"] == pytest.approx(2 * 4 / (2 * 4 + 1 + 1))
    # Manski: gamma A_cov = (8/13)(6/8) = 6/13, plus the 5 uncovered pairs at most.
    bounds = c["bounds"]
    assert bounds["covered_accuracy"]["value"] == pytest.approx(0.75)
    assert bounds["manski_accuracy"]["value"] == pytest.approx([6 / 13, 11 / 13])
    # Every unknown side can be set to agree or disagree, so the sharp accuracy bound is Manski's.
    assert bounds["sharp"]["accuracy"]["value"] == pytest.approx([6 / 13, 11 / 13])


def test_sharp_kappa_bounds_match_brute_force(client: TestClient, abstain_pid: str) -> None:
    bounds = only_table(client.get(f"/projects/{abstain_pid}/report").json())["bounds"]["sharp"]
    unknown = [(h, j) for h, j in PAIRS if {h, j} & {CA, INV}]
    known = [(h, j) for h, j in PAIRS if not {h, j} & {CA, INV}]
    kappas, accuracies = [], []
    slots = [(k, side) for k, pair in enumerate(unknown) for side in (0, 1) if pair[side] in (CA, INV)]
    for choice in itertools.product(["yes", "no"], repeat=len(slots)):
        filled = [list(pair) for pair in unknown]
        for (k, side), value in zip(slots, choice, strict=True):
            filled[k][side] = value
        human, judge = zip(*(known + [tuple(p) for p in filled]), strict=True)
        kappas.append(kappa_of(list(human), list(judge)))
        accuracies.append(np.mean(np.array(human) == np.array(judge)))
    kappas = np.array(kappas)
    assert bounds["kappa"]["value"] == pytest.approx([np.nanmin(kappas), np.nanmax(kappas)])
    assert bounds["accuracy"]["value"] == pytest.approx([min(accuracies), max(accuracies)])


@pytest.mark.parametrize(
    ("query", "n_eff", "accuracy", "scored"),
    [
        ("handling=exclude", 8, 6 / 8, [[4, 1], [1, 2]]),
        # CA -> "no": (yes, CA) is a miss, (CA, yes) a miss, (CA, no) and (CA, CA) hits; INVALID dropped.
        ("handling=recode&recode_to=no", 12, 8 / 12, [[4, 2], [2, 4]]),
        # CA scored as its own category: only (CA, CA) among the abstentions is a hit.
        ("handling=three_class", 12, 7 / 12, [[4, 1, 1], [1, 2, 0], [1, 1, 1]]),
    ],
)
def test_handling_rules(
    client: TestClient, abstain_pid: str, query: str, n_eff: int, accuracy: float, scored: list[list[int]]
) -> None:
    report = client.get(f"/projects/{abstain_pid}/report?{query}").json()
    c = only_table(report)
    assert c["n_eff"] == n_eff and c["scored_table"]["counts"] == scored
    assert c["accuracy"]["value"] == pytest.approx(accuracy)
    assert report["judges"][0]["aggregate"]["accuracy"]["value"] == pytest.approx(accuracy)
    # INVALID is counted in the full table and its rate under every rule, never scored.
    assert c["table"]["counts"] == TABLE
    assert c["judge_marginals"]["counts"][INV] == 1 and c["rates"]["judge_invalid"] == pytest.approx(1 / 13)
    assert INV not in c["scored_table"]["categories"]
    assert c["protocol"]["handling"] == query.split("&")[0].removeprefix("handling=")


def test_bounds_are_stated_under_exclusion_only(client: TestClient, abstain_pid: str) -> None:
    report = client.get(f"/projects/{abstain_pid}/report?handling=recode&recode_to=no").json()
    bounds = only_table(report)["bounds"]
    assert bounds["manski_accuracy"]["value"] is None and "exclude" in bounds["manski_accuracy"]["reason"]
    checklist = {i["item"]: i for i in report["checklist"]}
    assert checklist["coverage bounds with covered accuracy"]["satisfied"] is False
    assert report["protocol"]["recode_to"] == "no"


@pytest.mark.parametrize(
    "query",
    [
        "handling=recode",  # recode_to is required
        "handling=recode&recode_to=maybe",  # not a label
        "handling=recode&recode_to=yes",  # the positive label is not a negative one
        "handling=exclude&recode_to=no",  # recode_to only with recode
        "handling=drop",
        "aggregation=weighted",
        "criterion=tone",  # unknown criterion
        "positive=maybe",
        "format=pdf",
    ],
)
def test_invalid_queries_are_422(client: TestClient, abstain_pid: str, query: str) -> None:
    response = client.get(f"/projects/{abstain_pid}/report?{query}")
    assert response.status_code == 422, query
    body = response.json()
    assert set(body) >= {"error", "detail"} and body["detail"]


def test_csv_tables_parse_and_sum_to_n(client: TestClient, abstain_pid: str) -> None:
    response = client.get(f"/projects/{abstain_pid}/report?format=csv")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert set(rows[0]) == {"criterion", "judge", "human", "human_value", "judge_value", "count"}
    assert len(rows) == 16 and sum(int(r["count"]) for r in rows) == 13
    cats = ["yes", "no", CA, INV]
    rebuilt = [[0] * 4 for _ in cats]
    for r in rows:
        assert (r["criterion"], r["judge"], r["human"]) == ("default", "judge", "prim")
        rebuilt[cats.index(r["human_value"])][cats.index(r["judge_value"])] += int(r["count"])
    assert rebuilt == TABLE


def test_html_has_the_tables_and_escapes_labels(client: TestClient) -> None:
    pid = make_project(client, labels=["<b>", "a&b"])
    post_pairs(client, pid, [("<b>", "<b>"), ("<b>", "a&b"), ("a&b", "a&b"), (CA, "<b>")])
    response = client.get(f"/projects/{pid}/report?format=html")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = response.text
    assert "<b>" not in page and "&lt;b&gt;" in page and "a&amp;b" in page
    assert page.count("<table") >= 3 and "human \\ judge" in page and "CANNOT_ASSESS" in page
    assert "Reporting checklist" in page
    for external in ("<script", "<link", "http://", "https://", "src="):
        assert external not in page


def test_macro_over_criteria_counts_included(client: TestClient) -> None:
    pid = make_project(client, labels=["yes", "no"], criteria=["c1", "c2", "c3"])
    human = ["yes", "yes", "no", "no"]
    post_pairs(client, pid, list(zip(human, ["yes", "no", "no", "no"], strict=True)), "c1")  # acc .75, kappa .5
    post_pairs(client, pid, list(zip(human, ["yes"] * 4, strict=True)), "c2")  # acc .5, judge constant
    post_pairs(client, pid, list(zip(["yes", "no", "yes", "no"], ["yes", "no", "yes", "no"], strict=True)), "c3")
    report = client.get(f"/projects/{pid}/report?aggregation=macro").json()
    assert report["protocol"]["aggregation"] == "macro" and report["protocol"]["resampling_unit"] == "criteria"
    (judge,) = report["judges"]
    per = {c["criterion"]: c for c in judge["criteria"]}
    assert per["c1"]["kappa"]["value"] == pytest.approx(0.5)
    assert per["c2"]["kappa"]["value"] is None and per["c2"]["kappa"]["reason"]
    agg = judge["aggregate"]
    assert agg["aggregation"] == agg["level"] == "macro" and agg["pooled"] is None
    assert agg["accuracy"]["value"] == pytest.approx((0.75 + 0.5 + 1.0) / 3)
    assert agg["kappa"]["value"] == pytest.approx((0.5 + 1.0) / 2)  # c2 excluded, never entered as 0
    included = {i["statistic"]: (i["included"], i["total"]) for i in agg["included"]}
    assert included["kappa"] == (2, 3) and included["accuracy"] == (3, 3)
    checklist = {i["item"]: i for i in report["checklist"]}
    assert checklist["kappa with interval"]["satisfied"] is False
    assert "c2" in checklist["kappa with interval"]["why"]

    micro = client.get(f"/projects/{pid}/report").json()["judges"][0]["aggregate"]
    assert micro["pooled"]["table"]["n"] == 12 and micro["accuracy"]["value"] == pytest.approx(9 / 12)
    # item level, rule "all": an item is yes only when every criterion is; items 1-4 agree.
    item = client.get(f"/projects/{pid}/report?aggregation=item").json()["judges"][0]["aggregate"]
    assert item["pooled"]["scored_table"]["counts"] == [[1, 0], [0, 3]]
    one = client.get(f"/projects/{pid}/report?criterion=c3&aggregation=macro").json()
    assert one["criteria"] == ["c3"] and [c["criterion"] for c in one["judges"][0]["criteria"]] == ["c3"]
    assert one["judges"][0]["aggregate"]["kappa"]["value"] == pytest.approx(1.0)


def test_project_without_labels_answers_an_undefined_report(client: TestClient, project: dict) -> None:
    pid = project["id"]
    response = client.get(f"/projects/{pid}/report")
    assert response.status_code == 200
    report = response.json()
    c = only_table(report)
    assert c["n_items"] == 0 and c["table"]["n"] == 0
    for name in ("accuracy", "f1_met"):
        assert c[name]["value"] is None and c[name]["reason"]
    assert c["kappa"]["value"] is None and c["kappa"]["reason"]
    assert c["rates"]["coverage"] is None and c["rates"]["reason"]
    checklist = {i["item"]: i["satisfied"] for i in report["checklist"]}
    assert checklist["coverage and abstention rates"] is False and checklist["handling rule"] is True
    rows = list(csv.DictReader(io.StringIO(client.get(f"/projects/{pid}/report?format=csv").text)))
    assert sum(int(r["count"]) for r in rows) == 0
    assert client.get(f"/projects/{pid}/report?format=html").status_code == 200


def test_project_without_raters_says_so(client: TestClient) -> None:
    pid = make_project(client, labels=["yes", "no"], raters=())
    report = client.get(f"/projects/{pid}/report").json()
    assert report["judges"] == [] and any("primary" in n for n in report["notes"])
    assert not any(i["satisfied"] for i in report["checklist"] if i["item"] == "confusion table and N")


def test_viewer_reads_the_report_annotator_does_not(client: TestClient, abstain_pid: str) -> None:
    viewer = client.post(f"/projects/{abstain_pid}/keys", json={"role": "viewer"}).json()["key"]
    annotator = client.post(f"/projects/{abstain_pid}/keys", json={"role": "annotator", "rater": "prim"}).json()["key"]
    url = f"/projects/{abstain_pid}/report"
    assert client.get(url, headers={"Authorization": f"Bearer {viewer}"}).status_code == 200
    assert client.get(url, headers={"Authorization": f"Bearer {annotator}"}).status_code == 403
    assert client.get("/projects/p_missing/report").status_code == 404


def test_openapi_documents_the_report(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/projects/{pid}/report"]["get"]
    content = operation["responses"]["200"]["content"]
    assert {"application/json", "text/csv", "text/html"} <= set(content)
    refs = [option["$ref"].rsplit("/", 1)[1] for option in content["application/json"]["schema"]["anyOf"]]
    assert refs == ["Report", "ScoreReport"]  # a numeric project's report: tests/service/test_score_report.py
    assert {"401", "403", "404", "422"} <= set(operation["responses"])
    names = {p["name"] for p in operation["parameters"]}
    assert {"handling", "recode_to", "aggregation", "criterion", "format"} <= names


def test_ordinal_table_reproduces_the_spec_kappas(client: TestClient) -> None:
    """docs/method.md §2 worked example: rows judge, columns human, categories 1..3 (kappa is symmetric)."""
    pid = make_project(client, labels=["1", "2", "3"])
    counts = [[20, 5, 1], [6, 30, 7], [2, 8, 21]]
    pairs = [(str(h + 1), str(j + 1)) for j, row in enumerate(counts) for h, n in enumerate(row) for _ in range(n)]
    post_pairs(client, pid, pairs)
    response = client.get(f"/projects/{pid}/report")  # three labels: the positive one must be declared
    assert response.status_code == 422 and "decision.positive_label" in response.json()["detail"]
    expected = {"nominal": 0.5555, "linear": 0.6072, "quadratic": 0.6664}
    for costs, kappa in expected.items():
        c = only_table(client.get(f"/projects/{pid}/report?costs={costs}&positive=1").json())
        assert c["kappa"]["value"] == pytest.approx(kappa, abs=5e-5), costs
        assert c["accuracy"]["value"] == pytest.approx(0.71) and c["n_items"] == 100
    decision = client.get(f"/projects/{pid}").json()["decision"]
    assert client.patch(f"/projects/{pid}", json={"decision": {**decision, "positive_label": "1"}}).status_code == 200
    c = only_table(client.get(f"/projects/{pid}/report").json())
    assert c["association"]["note"].startswith("phi of '1'")
    assert c["bounds"]["sharp"]["kappa"]["value"] is None and "binary" in c["bounds"]["sharp"]["kappa"]["reason"]
    assert c["bounds"]["manski_accuracy"]["value"] == pytest.approx([0.71, 0.71])  # full coverage
    # Combining criteria per item needs binary verdicts.
    response = client.get(f"/projects/{pid}/report?aggregation=item&positive=1")
    assert response.status_code == 422 and "binary" in response.json()["detail"]


def test_default_protocol_comes_from_the_project_settings(client: TestClient, abstain_pid: str) -> None:
    """A project that declares three-class handling and macro aggregation reports under them by default."""
    decision = client.get(f"/projects/{abstain_pid}").json()["decision"]
    r = client.patch(
        f"/projects/{abstain_pid}", json={"decision": {**decision, "handling": "three_class", "aggregation": "macro"}}
    )
    assert r.status_code == 200, r.text
    report = client.get(f"/projects/{abstain_pid}/report").json()
    assert report["protocol"]["handling"] == "three_class" and report["protocol"]["aggregation"] == "macro"
    explicit = client.get(f"/projects/{abstain_pid}/report", params={"handling": "exclude"}).json()
    assert explicit["protocol"]["handling"] == "exclude"


@pytest.mark.parametrize(
    ("labels", "positive"),
    [
        (["ok", "toxic"], "toxic"),
        (["fail", "pass"], "pass"),
        (["pass", "fail"], "pass"),
        (["yes", "no"], "yes"),
        (["NOT_MET", "MET"], "MET"),
        (["bad", "good"], "good"),
    ],
)
def test_default_positive_label_of_a_binary_project(client: TestClient, labels: list[str], positive: str) -> None:
    """The MET word when one label is one, else the last label; a declared label wins."""
    pid = make_project(client, labels=labels)
    post_pairs(client, pid, [(labels[0], labels[0]), (labels[1], labels[1]), (labels[1], labels[0])])
    report = client.get(f"/projects/{pid}/report").json()
    assert report["protocol"]["positive"] == positive
    decision = client.get(f"/projects/{pid}").json()["decision"]
    other = labels[0] if positive == labels[1] else labels[1]
    assert client.patch(f"/projects/{pid}", json={"decision": {**decision, "positive_label": other}}).status_code == 200
    assert client.get(f"/projects/{pid}/report").json()["protocol"]["positive"] == other


def test_positive_label_must_be_a_label(client: TestClient) -> None:
    body = {"name": "x", "labels": ["a", "b"], "decision": {"positive_label": "c"}}
    response = client.post("/projects", json=body)
    assert response.status_code == 422 and "positive_label" in response.text
    pid = make_project(client, labels=["a", "b"])
    decision = client.get(f"/projects/{pid}").json()["decision"]
    response = client.patch(f"/projects/{pid}", json={"decision": {**decision, "positive_label": "zzz"}})
    assert response.status_code == 422 and "positive_label" in response.json()["detail"]
    assert client.get(f"/projects/{pid}").json()["decision"]["positive_label"] is None


def test_one_kappa_interval_method_per_report_and_the_name_in_the_title(client: TestClient, abstain_pid: str) -> None:
    """Criterion, pooled table and aggregate name one method; for one criterion they are one interval."""
    report = client.get(f"/projects/{abstain_pid}/report").json()
    (judge,) = report["judges"]
    kappas = [c["kappa"] for c in judge["criteria"]] + [judge["aggregate"]["kappa"]]
    kappas += [judge["aggregate"]["pooled"]["kappa"]]
    assert len({k["interval_method"] for k in kappas}) == 1
    assert kappas[0]["interval_method"].startswith("percentile bootstrap")
    assert kappas[0]["interval"] == kappas[1]["interval"] == kappas[2]["interval"]
    name = client.get(f"/projects/{abstain_pid}").json()["name"]
    assert report["project_name"] == name
    html = client.get(f"/projects/{abstain_pid}/report?format=html").text
    assert f"<title>annoplan report: {name}</title>" in html
