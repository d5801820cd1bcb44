"""Label export and list pagination: cursors walk every row exactly once, and the NDJSON and
CSV exports carry the same rows as the JSON pages."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime

import pytest
from fastapi.testclient import TestClient

ROW_KEYS = ("item", "rater", "criterion", "value", "seq", "batch", "created_at", "retracted", "order")


def ok(r, status: int = 200):
    assert r.status_code == status, r.text
    return r


def walk(client: TestClient, path: str, limit: int, **params: object) -> list[dict]:
    """Every row of a paginated list, following ``next_cursor`` with pages of ``limit``."""
    rows: list[dict] = []
    cursor = None
    for _ in range(10_000):
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        page = ok(client.get(path, params=query)).json()
        assert set(page) == {"items", "next_cursor"}
        assert len(page["items"]) <= limit
        rows += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return rows
        assert page["items"], "an empty page must not carry a cursor"
    raise AssertionError("pagination does not end")


@pytest.fixture
def logged(client: TestClient) -> str:
    """A two-criteria project with 23 events of which 19 are current labels, on 8 items."""
    pid = ok(
        client.post(
            "/projects",
            json={"name": "e", "labels": ["lo", "mid", "hi"], "scale": "ordinal", "criteria": ["acc", "tone"]},
        ),
        201,
    ).json()["id"]
    for ext, kind in [("j", "judge"), ("p", "primary"), ("h", "human")]:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"it,{k}"} for k in range(8)]))
    values = ["lo", "mid", "hi"]
    first = [
        {"item": f"it,{k}", "rater": r, "criterion": c, "value": values[(k + len(r) + len(c)) % 3]}
        for k in range(8)
        for r, c in [("j", "acc"), ("p", "acc")]
    ] + [{"item": f"it,{k}", "rater": "h", "criterion": "tone", "value": "mid"} for k in range(3)]
    assert ok(client.post(f"/projects/{pid}/labels", json=first)).json()["label_seq"] == 19
    corrections = [
        {**row, "value": "INVALID" if row["rater"] == "j" else "hi" if row["value"] != "hi" else "lo"}
        for row in first[:4]
    ]
    assert ok(client.post(f"/projects/{pid}/labels", json=corrections)).json() == {
        "accepted": 4,
        "duplicates": 0,
        "label_seq": 23,
    }
    return pid


def everything(client: TestClient, pid: str, **params: object) -> list[dict]:
    page = ok(client.get(f"/projects/{pid}/labels", params={"limit": 1000, **params})).json()
    assert page["next_cursor"] is None
    return page["items"]


def test_fixture_has_the_expected_shape(client, logged):
    assert len(everything(client, logged, history="true")) == 23
    assert len(everything(client, logged)) == 19


WALK_FILTERS = [
    {"history": "true"},
    {"history": "false"},
    {"history": "true", "rater": "j"},
    {"history": "false", "criterion": "acc", "since_seq": 5},
    {"history": "true", "since_seq": 17},
]


def test_label_pages_walk_every_row_once(client, logged, subtests):
    for params in WALK_FILTERS:
        with subtests.test(msg=str(params)):
            full = everything(client, logged, **params)
            assert full, "the filter selects rows"
            for limit in sorted({1, 2, 3, 5, len(full) - 1, len(full), len(full) + 1} - {0}):
                pages = walk(client, f"/projects/{logged}/labels", limit, **params)
                assert pages == full, limit
                seqs = [r["seq"] for r in pages]
                assert seqs == sorted(set(seqs)), "seq strictly increasing: no row twice, none skipped"


def test_exact_multiple_of_the_page_size_ends_without_an_empty_page(client, logged):
    full = everything(client, logged, history="true")
    assert len(full) == 23
    first = ok(client.get(f"/projects/{logged}/labels", params={"history": "true", "limit": 23})).json()
    assert first["next_cursor"] is None and first["items"] == full


def test_pages_stay_consistent_while_labels_are_appended(client, logged):
    """A walk that started before new labels arrive still sees each row once, new ones at the end."""
    path = f"/projects/{logged}/labels"
    page = ok(client.get(path, params={"history": "true", "limit": 10})).json()
    seen = page["items"]
    ok(client.post(path, json=[{"item": "it,7", "rater": "h", "criterion": "acc", "value": "lo"}]))
    cursor = page["next_cursor"]
    while cursor:
        page = ok(client.get(path, params={"history": "true", "limit": 10, "cursor": cursor})).json()
        seen += page["items"]
        cursor = page["next_cursor"]
    assert [r["seq"] for r in seen] == list(range(1, 25))


def test_cursor_is_opaque_and_reusable(client, logged):
    path = f"/projects/{logged}/labels"
    cursor = ok(client.get(path, params={"history": "true", "limit": 4})).json()["next_cursor"]
    assert isinstance(cursor, str) and cursor
    again = [ok(client.get(path, params={"history": "true", "limit": 4, "cursor": cursor})).json() for _ in range(2)]
    assert again[0] == again[1]
    assert [r["seq"] for r in again[0]["items"]] == [5, 6, 7, 8]


def test_items_raters_and_projects_pages_walk_every_row_once(client):
    pids = [
        ok(client.post("/projects", json={"name": f"p{k}", "labels": ["a", "b"]}), 201).json()["id"] for k in range(5)
    ]
    pid = pids[0]
    ok(
        client.post(
            f"/projects/{pid}/items", json=[{"external_id": f"x{k:02d}", "features": {"k": k}} for k in range(23)]
        )
    )
    for k in range(7):
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": f"r{k}", "kind": "human"}), 201)
    cases = [
        (f"/projects/{pid}/items", "external_id", [f"x{k:02d}" for k in range(23)]),
        (f"/projects/{pid}/raters", "external_id", [f"r{k}" for k in range(7)]),
        ("/projects", "id", pids),
    ]
    for path, key, expected in cases:
        for limit in (1, 2, 3, 7, 22, 23, 24, 100):
            got = [row[key] for row in walk(client, path, limit)]
            assert got == expected, (path, limit)


def test_default_page_size_is_100(client):
    pid = ok(client.post("/projects", json={"name": "big", "labels": ["a", "b"]}), 201).json()["id"]
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"x{k}"} for k in range(150)]))
    page = ok(client.get(f"/projects/{pid}/items")).json()
    assert len(page["items"]) == 100 and page["next_cursor"] is not None
    rest = ok(client.get(f"/projects/{pid}/items", params={"cursor": page["next_cursor"]})).json()
    assert len(rest["items"]) == 50 and rest["next_cursor"] is None


# --- NDJSON and CSV exports ---------------------------------------------------------------


def normalised(row: dict) -> tuple:
    """A row with types fixed up for comparison across formats (CSV has only strings)."""
    return (
        row["item"],
        row["rater"],
        row["criterion"],
        row["value"],
        int(row["seq"]),
        row["batch"] or None,
        datetime.fromisoformat(row["created_at"]),
    )


def from_ndjson(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line]


def from_csv(text: str) -> list[dict]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    assert tuple(reader.fieldnames or ()) == ROW_KEYS
    return list(reader)


EXPORT_FILTERS = [
    {"history": "true"},
    {"history": "false"},
    {"history": "true", "rater": "p", "since_seq": 3},
    {"history": "false", "criterion": "tone"},
    {"history": "true", "since_seq": 23},
]


def test_ndjson_and_csv_exports_parse_back_to_the_json_rows(client, logged, subtests):
    for fmt in ("ndjson", "csv"):
        for params in EXPORT_FILTERS:
            with subtests.test(msg=f"{fmt} {params}"):
                expected = everything(client, logged, **params)
                r = ok(client.get(f"/projects/{logged}/labels", params={**params, "format": fmt}))
                media = "application/x-ndjson" if fmt == "ndjson" else "text/csv"
                assert r.headers["content-type"].split(";")[0] == media
                rows = from_ndjson(r.text) if fmt == "ndjson" else from_csv(r.text)
                if fmt == "ndjson":
                    assert all(tuple(row) == ROW_KEYS for row in rows)
                    assert all(isinstance(row["seq"], int) and row["batch"] is None for row in rows)
                assert [normalised(x) for x in rows] == [normalised(x) for x in expected]


def test_streamed_exports_are_not_cut_at_the_page_size(client, logged):
    for fmt, parse in (("ndjson", from_ndjson), ("csv", from_csv)):
        r = ok(client.get(f"/projects/{logged}/labels", params={"history": "true", "format": fmt, "limit": 2}))
        assert len(parse(r.text)) == 23, fmt


def test_csv_export_can_be_uploaded_again_as_duplicates(client, logged):
    """The CSV export quotes commas in ids, so it is a valid label upload of the same cells."""
    exported = ok(client.get(f"/projects/{logged}/labels", params={"format": "csv"})).text
    table = from_csv(exported)
    assert any("," in row["item"] for row in table)
    body = io.StringIO()
    writer = csv.writer(body)
    writer.writerow(["item", "rater", "criterion", "value"])
    writer.writerows([row["item"], row["rater"], row["criterion"], row["value"]] for row in table)
    r = ok(client.post(f"/projects/{logged}/labels", content=body.getvalue(), headers={"content-type": "text/csv"}))
    assert r.json() == {"accepted": 0, "duplicates": 19, "label_seq": 23}


def test_empty_exports(client, logged):
    assert everything(client, logged, since_seq=23) == []
    assert ok(client.get(f"/projects/{logged}/labels", params={"since_seq": 23, "format": "ndjson"})).text == ""
    assert from_csv(ok(client.get(f"/projects/{logged}/labels", params={"since_seq": 23, "format": "csv"})).text) == []


def test_batch_ids_are_exported_in_every_format(client, project):
    """Labels written for a batch carry its id in the JSON, NDJSON and CSV exports alike."""
    pid = project["id"]
    r = client.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 7})
    assert r.status_code == 201, r.text
    lease = ok(client.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 3})).json()
    assert len(lease["items"]) == 3
    rows = [{"item": i, "rater": "h2", "value": "pass", "batch": lease["id"]} for i in lease["items"]]
    rows.append({"item": lease["items"][0], "rater": "judge", "value": "fail"})
    assert ok(client.post(f"/projects/{pid}/labels", json=rows)).json()["accepted"] == 4
    as_json = everything(client, pid, history="true")
    assert [r["batch"] for r in as_json] == [lease["id"]] * 3 + [None]
    as_ndjson = from_ndjson(
        ok(client.get(f"/projects/{pid}/labels", params={"history": "true", "format": "ndjson"})).text
    )
    as_csv = from_csv(ok(client.get(f"/projects/{pid}/labels", params={"history": "true", "format": "csv"})).text)
    expected = [normalised(x) for x in as_json]
    assert [normalised(x) for x in as_ndjson] == expected
    assert [normalised(x) for x in as_csv] == expected


# --- Parquet ------------------------------------------------------------------------------


def test_parquet_export_reads_back_as_the_json_rows_with_polars(client, logged, subtests):
    """Written by pyarrow on the server, read back by polars' own Parquet reader: the JSON rows, typed."""
    polars = pytest.importorskip("polars")
    retracted = [{"item": "it,0", "rater": "h", "criterion": "tone"}]
    ok(client.post(f"/projects/{logged}/labels/retractions", json=retracted))
    for params in [*EXPORT_FILTERS, {"history": "true", "since_seq": 24}]:
        with subtests.test(msg=str(params)):
            expected = everything(client, logged, **params)
            r = ok(client.get(f"/projects/{logged}/labels", params={**params, "format": "parquet"}))
            assert r.headers["content-type"] == "application/vnd.apache.parquet"
            frame = polars.read_parquet(io.BytesIO(r.content))
            assert tuple(frame.columns) == ROW_KEYS
            assert str(frame.schema["seq"]) == "Int64" and str(frame.schema["retracted"]) == "Boolean"
            assert frame.schema["created_at"] == polars.Datetime("us", "UTC")
            rows = frame.to_dicts()
            for row in rows:
                row["created_at"] = row["created_at"].isoformat().replace("+00:00", "Z")
            assert rows == expected
    history = everything(client, logged, history="true")
    assert history[-1]["retracted"] is True and history[-1]["value"] is None  # the case the loop covered


def test_parquet_without_pyarrow_is_a_422_before_any_work(client, logged, monkeypatch):
    import importlib

    real = importlib.import_module

    def without_pyarrow(name: str, *args: object) -> object:
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_pyarrow)
    r = client.get(f"/projects/{logged}/labels", params={"format": "parquet", "rater": "nobody"})
    assert r.status_code == 422 and "annoplan[dataframes]" in r.json()["detail"], r.text
