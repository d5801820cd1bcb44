"""The generic long format in Parquet (issue 38): the export read by polars is the CSV export's rows,
and imported into a new project it gives the same /reliability; files that pandas and polars write
import; bad files are a 422 naming the row, field or column with nothing written; the rows and the
uncompressed bytes are bounded from the footer before anything is decoded; no pyarrow is a 415."""

from __future__ import annotations

import csv
import importlib
import io
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.app import create_app
from service.core.settings import Settings
from tests.conftest import ADMIN_KEY
from tests.service.test_import_generic import LABELS, comparable, labelled_project, ok

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
polars = pytest.importorskip("polars")
pandas = pytest.importorskip("pandas")

PARQUET = {"content-type": "application/vnd.apache.parquet"}


def parquet(columns: dict[str, Any], **options: Any) -> bytes:
    """A Parquet file written by pyarrow itself (not the server's writer)."""
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out, **options)
    return out.getvalue()


def new_project(c: TestClient, **settings: Any) -> str:
    body = {"name": "pq", "labels": LABELS, **settings}
    return str(ok(c.post("/projects", json=body), 201).json()["id"])


def state(c: TestClient, pid: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, str, Any]]]:
    raters = sorted((r["external_id"], r["kind"]) for r in ok(c.get(f"/projects/{pid}/raters")).json()["items"])
    labels = ok(c.get(f"/projects/{pid}/export/generic", params={"format": "ndjson"})).text.splitlines()
    rows = [polars.read_ndjson(io.StringIO(line)).row(0) for line in labels]
    return raters, sorted(rows, key=str)


def assert_nothing_written(c: TestClient, pid: str) -> None:
    assert ok(c.get(f"/projects/{pid}/items")).json()["items"] == []
    assert ok(c.get(f"/projects/{pid}/raters")).json()["items"] == []
    assert ok(c.get(f"/projects/{pid}/labels")).json()["items"] == []


def test_parquet_round_trip_gives_the_same_reliability(client: TestClient) -> None:
    src = labelled_project(client)
    exported = ok(client.get(f"/projects/{src}/export/generic", params={"format": "parquet"}))
    assert exported.headers["content-type"] == "application/vnd.apache.parquet"
    frame = polars.read_parquet(io.BytesIO(exported.content))
    assert frame.columns == ["item", "rater", "kind", "value", "criterion", "confidence", "order"]
    assert frame.schema["confidence"] == polars.Float64 and frame.schema["item"] == polars.String
    as_csv = list(csv.DictReader(io.StringIO(ok(client.get(f"/projects/{src}/export/generic")).text)))
    assert [{k: "" if v is None else str(v) for k, v in r.items()} for r in frame.to_dicts()] == as_csv
    dst = new_project(client, allow_abstain=True)
    summary = ok(client.post(f"/projects/{dst}/import/generic", content=exported.content, headers=PARQUET)).json()
    assert summary["labels"]["accepted"] == len(as_csv) == frame.height
    assert comparable(ok(client.get(f"/projects/{dst}/reliability")).json()) == comparable(
        ok(client.get(f"/projects/{src}/reliability")).json()
    )
    again = ok(client.post(f"/projects/{dst}/import/generic", content=exported.content, headers=PARQUET)).json()
    assert again["labels"]["accepted"] == 0 and again["labels"]["duplicates"] == len(as_csv)
    assert state(client, dst) == state(client, src)


def test_a_changed_label_makes_the_round_trip_differ(client: TestClient) -> None:
    """The round trip's check can fail: one judge label flipped in the file changes /reliability."""
    src = labelled_project(client)
    frame = polars.read_parquet(io.BytesIO(ok(client.get(f"/projects/{src}/export/generic?format=parquet")).content))
    first = frame.with_row_index().filter((polars.col("rater") == "judge") & polars.col("value").is_in(LABELS))[
        "index"
    ][0]
    flipped = frame.with_columns(
        value=polars.when(polars.int_range(frame.height) == first)
        .then(polars.when(polars.col("value") == "pass").then(polars.lit("fail")).otherwise(polars.lit("pass")))
        .otherwise(polars.col("value"))
    )
    out = io.BytesIO()
    flipped.write_parquet(out)
    dst = new_project(client, allow_abstain=True)
    ok(client.post(f"/projects/{dst}/import/generic", content=out.getvalue(), headers=PARQUET))
    assert comparable(ok(client.get(f"/projects/{dst}/reliability")).json()) != comparable(
        ok(client.get(f"/projects/{src}/reliability")).json()
    )


def _by_polars(rows: dict[str, list[Any]]) -> bytes:
    out = io.BytesIO()
    polars.DataFrame(rows).write_parquet(out)
    return out.getvalue()


def _by_pandas(rows: dict[str, list[Any]]) -> bytes:
    out = io.BytesIO()
    pandas.DataFrame(rows).to_parquet(out, engine="pyarrow", index=False)
    return out.getvalue()


@pytest.mark.parametrize("write", [_by_polars, _by_pandas], ids=["polars", "pandas"])
def test_a_dataframe_written_by_polars_or_pandas_imports(client: TestClient, write: Callable[..., bytes]) -> None:
    """A user's frame: integer item ids, a null criterion and confidence, a column the format does not know."""
    rows = {
        "item": [1, 2, 1],
        "rater": ["gpt", "gpt", "ann"],
        "kind": ["judge", "judge", "primary"],
        "value": ["pass", "FAIL", "fail"],
        "criterion": [None, "default", None],
        "confidence": [0.9, None, None],
        "note": ["ignored", "", "x"],
    }
    pid = new_project(client)
    summary = ok(client.post(f"/projects/{pid}/import/generic", content=write(rows), headers=PARQUET)).json()
    assert summary["items_created"] == 2 and sorted(summary["raters_created"]) == ["ann", "gpt"]
    assert state(client, pid) == (
        [("ann", "primary"), ("gpt", "judge")],
        sorted(
            [
                ("1", "gpt", "judge", "pass", "default", 0.9, None),
                ("2", "gpt", "judge", "fail", "default", None, None),
                ("1", "ann", "primary", "fail", "default", None, None),
            ],
            key=str,
        ),
    )


def test_numbers_in_a_numeric_projects_value_column_read_as_its_labels(client: TestClient) -> None:
    pid = str(ok(client.post("/projects", json={"name": "n", "labels": ["1", "2", "3"]}), 201).json()["id"])
    body = parquet({"item": ["a", "b"], "rater": ["j", "j"], "kind": ["judge", "judge"], "value": [1.0, 3.0]})
    ok(client.post(f"/projects/{pid}/import/generic", content=body, headers=PARQUET))
    assert [r[3] for r in state(client, pid)[1]] == ["1", "3"]


GOOD: dict[str, list[Any]] = {
    "item": ["a", "b", "c"],
    "rater": ["j", "j", "h"],
    "kind": ["judge", "judge", "human"],
    "value": ["pass", "fail", "pass"],
}


def pq_duplicate_names() -> bytes:
    out = io.BytesIO()
    table = pa.table(
        [GOOD["item"], GOOD["item"], GOOD["rater"], GOOD["kind"], GOOD["value"]],
        names=["item", "item", "rater", "kind", "value"],
    )
    pq.write_table(table, out)
    return out.getvalue()


def _with(**columns: Any) -> bytes:
    return parquet({**GOOD, **columns})


def _without(name: str) -> bytes:
    return parquet({k: v for k, v in GOOD.items() if k != name})


BAD = [
    (_without("kind"), 422, "Parquet file: no column 'kind'; its columns are 'item', 'rater', 'value'"),
    (_with(kind=["judge", "judge", "robot"]), 422, "row 3: kind: Input should be 'judge', 'primary' or 'human'"),
    (_with(value=["pass", "fail", "maybe"]), 422, "row 3: value 'maybe' maps to none"),
    (_with(item=["a", "b", None]), 422, "row 3: item: Input should be a valid string"),
    (_with(confidence=[0.5, 0.5, 1.5]), 422, "row 3: confidence: Input should be less than or equal to 1"),
    (_with(confidence=[None, None, 0.5]), 422, "row 3: only a judge's label carries a confidence"),
    (_with(rater=["j", "j", "j"]), 422, "row 3: rater 'j' is a human rater here and a judge rater at row 1"),
    (_with(criterion=[None, None, "tone"]), 422, "row 3: unknown criterion 'tone'"),
    (
        _with(item=[["a"], ["b"], ["c"]]),
        422,
        "Parquet column 'item' is list<element: string>; it must hold one value per row",
    ),
    (_with(value=["pass", "fail", "p" * 1001]), 422, "Parquet column 'value' holds a value of 1001 bytes"),
    (b"item,rater,kind,value\na,j,judge,pass\n", 422, "body is not a readable Parquet file"),
    (parquet(GOOD)[:-30], 422, "body is not a readable Parquet file"),
    (
        parquet({**GOOD, "value": pa.array([b"pass", b"fail", b"\xff"])}),
        422,
        "column 'value' holds bytes that are not UTF-8",
    ),
    (
        pq_duplicate_names(),
        422,
        "Parquet columns must have distinct names; the file has 'item', 'item', 'rater', 'kind', 'value'",
    ),
]


@pytest.mark.parametrize(("body", "status", "needle"), BAD)
def test_a_bad_parquet_file_names_the_row_or_column_and_writes_nothing(
    client: TestClient, body: bytes, status: int, needle: str
) -> None:
    pid = new_project(client)
    r = client.post(f"/projects/{pid}/import/generic", content=body, headers=PARQUET)
    assert r.status_code == status, r.text
    assert needle in r.json()["detail"], r.json()["detail"]
    assert_nothing_written(client, pid)


def test_the_good_file_of_the_bad_cases_imports(client: TestClient) -> None:
    """The control of the cases above: unspoiled, their file writes its three labels."""
    pid = new_project(client)
    r = ok(client.post(f"/projects/{pid}/import/generic", content=parquet(GOOD), headers=PARQUET))
    assert r.json()["labels"]["accepted"] == 3


def small_client(database_url: str, **limits: int) -> TestClient:
    c = TestClient(create_app(Settings(database_url=database_url, admin_key=ADMIN_KEY, **limits)))
    c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
    return c


def test_rows_and_uncompressed_bytes_are_bounded_before_any_decoding(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of repeated values compress to a small body: the footer's counts are checked first, and
    the table is never read."""
    n = 3_000
    rows = {"item": [f"i{i}" for i in range(n)], "rater": ["j"] * n, "kind": ["judge"] * n, "value": ["pass"] * n}
    plain = parquet(rows, compression="zstd", use_dictionary=False)
    read: list[object] = []
    real = pq.read_table
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: read.append(a) or real(*a, **k))
    with small_client(database_url, max_rows=n - 1) as c:
        pid = new_project(c)
        r = c.post(f"/projects/{pid}/import/generic", content=plain, headers=PARQUET)
        assert r.status_code == 413 and r.json()["error"] == "too_many_rows", r.text
    assert len(plain) < 16 * 1024  # the body is small; its columns uncompressed are not
    with small_client(database_url, max_rows=n, max_body_bytes=16 * 1024) as c:
        pid = new_project(c)
        r = c.post(f"/projects/{pid}/import/generic", content=plain, headers=PARQUET)
        assert r.status_code == 413 and "uncompressed; the limit is 16384" in r.json()["detail"], r.text
        assert_nothing_written(c, pid)
    assert read == []
    with small_client(database_url, max_rows=n, max_body_bytes=1024 * 1024) as c:  # the control: both bounds met
        pid = new_project(c)
        assert (
            ok(c.post(f"/projects/{pid}/import/generic", content=plain, headers=PARQUET)).json()["labels"]["accepted"]
            == n
        )
    assert len(read) == 1


def test_without_pyarrow_parquet_is_a_415_and_the_export_a_422(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = new_project(client)
    body = parquet(GOOD)
    real = importlib.import_module

    def without_pyarrow(name: str, *args: Any) -> Any:
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_pyarrow)
    r = client.post(f"/projects/{pid}/import/generic", content=body, headers=PARQUET)
    assert r.status_code == 415 and "annoplan[dataframes]" in r.json()["detail"], r.text
    assert_nothing_written(client, pid)
    r = client.get(f"/projects/{pid}/export/generic", params={"format": "parquet"})
    assert r.status_code == 422 and "annoplan[dataframes]" in r.json()["detail"], r.text
    as_json = [dict(zip(GOOD, row, strict=True)) for row in zip(*GOOD.values(), strict=True)]
    assert ok(client.post(f"/projects/{pid}/import/generic", json=as_json)).json()["labels"]["accepted"] == 3


def _generic_file() -> bytes:
    rows = {"item": ["a", "b", "c"] * 50, "rater": ["j"] * 150, "kind": ["judge"] * 150, "value": ["pass"] * 150}
    return parquet({**rows, "confidence": [0.5] * 150}, compression="snappy")


def test_a_footer_that_aborts_pyarrows_column_metadata_is_read_safely() -> None:
    """Three bytes changed in this file make pyarrow 26 abort the process when its per-column metadata is
    read (a C++ exception it does not catch); the import reads the row groups' totals instead."""
    from service.core.errors import AppError
    from service.integrations.generic import generic_scores

    spoilt = bytearray(_generic_file())
    for at, byte in [(72, 231), (488, 30), (801, 107)]:
        spoilt[at] = byte
    try:
        generic_scores(bytes(spoilt), PARQUET["content-type"], max_rows=1000, max_bytes=10**6)
    except AppError as error:
        assert error.status_code in (413, 422)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8))
def test_a_corrupted_file_is_read_or_refused_with_a_4xx(changes: list[tuple[int, int]]) -> None:
    """Any bytes of a good file changed: scores or a 413/422, never another exception (a 500)."""
    from service.core.errors import AppError
    from service.integrations.generic import generic_scores

    body = bytearray(GOOD_FILE)
    for at, byte in changes:
        body[at % len(body)] = byte
    try:
        scores = generic_scores(bytes(body), PARQUET["content-type"], max_rows=1000, max_bytes=10**6)
    except AppError as error:
        assert error.status_code in (413, 422)
    else:
        assert len(scores) <= 1000


GOOD_FILE = _generic_file()
