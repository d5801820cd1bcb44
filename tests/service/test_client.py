"""service.client against a live server (issue 38): every method once, sync and async; errors
as typed exceptions carrying the API's body; chunked uploads that a retry cannot write twice."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.client import AsyncClient, Client, Conflict, Invalid, NotFound, Unauthorized
from tests.conftest import ADMIN_KEY, fresh_database
from tests.live_server import LiveServer

ITEMS = [f"i{i:02d}" for i in range(30)]


@pytest.fixture(scope="module")
def server(template_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    url = fresh_database(template_url, Path(tmp_path_factory.mktemp("client")))
    with LiveServer(url, ADMIN_KEY, bootstrap_resamples=50) as live:
        yield live


def panel_labels(flip_every: int) -> list[dict[str, str]]:
    rows = []
    for i, item in enumerate(ITEMS):
        truth = "pass" if i % 3 else "fail"
        rows += [{"item": item, "rater": r, "value": truth} for r in ("prim", "h2")]
        rows.append({"item": item, "rater": "h3", "value": truth if i % 5 else "pass"})
        judged = ("fail" if truth == "pass" else "pass") if i % flip_every == 0 else truth
        rows.append({"item": item, "rater": "judge", "value": judged})
    return rows


def test_the_sync_client_walks_a_project_end_to_end(server: LiveServer) -> None:
    with Client(server.base_url, ADMIN_KEY) as c:
        project = c.create_project("client", ["pass", "fail"])
        pid = project.id
        assert c.project(pid).name == "client" and pid in [p.id for p in c.projects()]
        assert c.update_project(pid, name="renamed").name == "renamed"
        assert c.upsert_items(pid, [{"external_id": i} for i in ITEMS], chunk=7).created == len(ITEMS)
        assert [i.external_id for i in c.items(pid)] == ITEMS
        for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
            assert c.add_rater(pid, ext, kind).kind == kind
        assert c.update_rater(pid, "h3", name="Third").name == "Third"
        assert sorted(r.external_id for r in c.raters(pid)) == ["h2", "h3", "judge", "prim"]
        rows = panel_labels(4)
        first = c.upload_labels(pid, rows, chunk=25)  # 120 rows in 5 requests
        assert (first.accepted, first.duplicates, first.label_seq) == (120, 0, 120)
        again = c.upload_labels(pid, rows, chunk=50)
        assert (again.accepted, again.duplicates, again.label_seq) == (0, 120, 120)
        labels = c.labels(pid)
        assert len(labels.rows) == 120 and labels.to_pandas().shape == (120, 9)
        assert len(c.labels(pid, rater="judge").rows) == 30
        polled = c.reliability(pid)
        assert polled.modified and polled.document is not None and polled.document.label_seq == 120
        assert c.reliability(pid, polled.etag) == type(polled)(None, polled.etag, False)
        waited = c.wait_for_reliability(pid, polled.etag, interval=0.05, timeout=0.2)
        assert not waited.modified
        c.upload_labels(pid, [{"item": "i00", "rater": "h2", "value": "pass"}])
        changed = c.wait_for_reliability(pid, polled.etag, interval=0.05, timeout=10)
        assert changed.modified and changed.document is not None and changed.document.label_seq == 121
        plan = c.create_plan(pid, source="prior", p_h=0.85, p_j=0.9, design="random", seed=3)
        assert c.plan(pid).id == plan.id
        c.add_rater(pid, "h4", "human")  # the others have labelled every item
        batch = c.create_batch(pid, rater="h4", size=2)
        assert batch.id is not None and len(batch.items) == 2 and c.batch(pid, batch.id).rater == "h4"
        c.release_batch(pid, batch.id)
        report = c.report(pid)
        assert report.model_dump()
        assert "<html" in c.report_text(pid, "html").lower()
        statement = c.create_certificate(pid, n_resamples=20)
        assert c.certificate(pid, statement.predicate["certificate"]["id"]) == statement
        history = [r.model_dump(mode="json") for r in c.labels(pid, history=True).rows]
        verified = c.verify_certificate(certificate=statement.model_dump(by_alias=True), labels=history)
        assert verified.match, verified


def test_errors_are_typed_and_carry_the_api_body(server: LiveServer) -> None:
    with Client(server.base_url, ADMIN_KEY) as c:
        pid = c.create_project("errors", ["pass", "fail"]).id
        c.add_rater(pid, "p", "primary")
        with pytest.raises(Conflict) as conflict:
            c.add_rater(pid, "q", "primary")
        assert conflict.value.status == 409 and conflict.value.error == "primary_exists"
        with pytest.raises(Invalid) as invalid:
            c.upload_labels(pid, [{"item": "nope", "rater": "p", "value": "pass"}])
        assert "row 1: unknown item 'nope'" in invalid.value.detail and invalid.value.body["error"]
        with pytest.raises(NotFound):
            c.project("no-such-project")
    with Client(server.base_url, "not-a-key") as c, pytest.raises(Unauthorized) as unauthorized:
        c.projects()
    assert unauthorized.value.status == 401


def test_a_retried_chunk_keeps_its_idempotency_key(server: LiveServer) -> None:
    """A transport failure after the server wrote a chunk: the retry replays, it does not write again."""
    with Client(server.base_url, ADMIN_KEY) as setup:
        pid = setup.create_project("retry", ["pass", "fail"]).id
        setup.upsert_items(pid, [{"external_id": i} for i in ITEMS])
        setup.add_rater(pid, "judge", "judge")
    seen: list[str] = []
    real = httpx.HTTPTransport()

    class FlakyAfterWrite(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = real.handle_request(request)
            response.read()
            seen.append(request.headers.get("Idempotency-Key", ""))
            if len(seen) == 1:
                raise httpx.ReadError("connection lost after the write")
            return response

    http = httpx.Client(base_url=server.base_url, transport=FlakyAfterWrite())
    with Client(server.base_url, ADMIN_KEY, http=http) as c:
        rows = [{"item": i, "rater": "judge", "value": "pass"} for i in ITEMS]
        result = c.upload_labels(pid, rows)
        assert seen[0] == seen[1] != ""
        assert result.accepted == len(ITEMS)  # the replayed answer of the first, written, attempt
        assert len(c.labels(pid).rows) == len(ITEMS) and c.project(pid).label_seq == len(ITEMS)


def test_the_async_client_does_the_same(server: LiveServer) -> None:
    async def run() -> None:
        async with AsyncClient(server.base_url, ADMIN_KEY) as c:
            pid = (await c.create_project("async", ["pass", "fail"])).id
            assert (await c.upsert_items(pid, [{"external_id": i} for i in ITEMS], chunk=10)).created == 30
            for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
                await c.add_rater(pid, ext, kind)
            accepted = await c.upload_labels(pid, panel_labels(5), chunk=40)
            assert accepted.accepted == 120 and len((await c.labels(pid)).rows) == 120
            polled = await c.reliability(pid)
            assert polled.document is not None and not (await c.reliability(pid, polled.etag)).modified
            exported = await c.export_generic(pid)
            assert exported.startswith("item,rater,kind,value,criterion")
            with pytest.raises(Invalid):
                await c.upload_labels(pid, [{"item": "i00", "rater": "judge", "value": "maybe"}])

    asyncio.run(run())


def test_labels_to_polars_and_to_pandas_hold_the_same_rows() -> None:
    polars = pytest.importorskip("polars")
    pytest.importorskip("pandas")
    from datetime import UTC, datetime

    from service.client import Labels
    from service.schemas.labels import LabelRow

    at = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    rows = [
        LabelRow(item="q1", rater="judge", criterion="default", value="pass", seq=1, batch=None, created_at=at),
        LabelRow(item="q1", rater="h2", criterion="default", value=None, seq=2, batch="b1", retracted=True),
    ]
    frame = Labels(rows).to_polars()
    assert isinstance(frame, polars.DataFrame) and frame.columns == list(LabelRow.model_fields)
    assert frame.to_dicts() == [r.model_dump() for r in rows]
    pandas_rows = Labels(rows).to_pandas().astype(object).where(lambda d: d.notna(), None).to_dict("records")
    assert frame.to_dicts() == pandas_rows
    assert Labels([]).to_polars().columns == list(LabelRow.model_fields)


def test_annoplan_import_writes_a_tools_file_as_the_client_does(server: LiveServer) -> None:
    """`annoplan import <source> FILE` goes through Client.import_file: the raters and labels of the
    endpoint, nothing again on a rerun, and a bad file's 422 printed with nothing written."""
    from typer.testing import CliRunner

    from service.cli import app as cli

    fixture = Path(__file__).parents[1] / "fixtures" / "integrations" / "promptfoo_results.json"
    runner = CliRunner()
    env = {"ANNOPLAN_KEY": ADMIN_KEY}
    with Client(server.base_url, ADMIN_KEY) as c:
        by_cli, by_client = (c.create_project(name, ["pass", "fail"]).id for name in ("cli", "client"))
        args = ["import", "promptfoo", str(fixture), "--project", by_cli, "--url", server.base_url]
        first = runner.invoke(cli, [*args, "--primary", "promptfoo-human"], env=env)
        assert first.exit_code == 0, first.output
        assert first.output.startswith("5 labels written, 0 unchanged (label_seq 5); 3 items and 2 raters created")
        assert "(promptfoo-llm-rubric, promptfoo-human)" in first.output and "contains (2 scores)" in first.output
        c.import_file(by_client, "promptfoo", fixture.read_bytes(), primary="promptfoo-human")

        def state(pid: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
            raters = sorted((r.external_id, r.kind) for r in c.raters(pid))
            return raters, sorted((r.item, r.rater, r.value) for r in c.labels(pid).rows)

        assert state(by_cli) == state(by_client) and len(state(by_cli)[1]) == 5
        again = runner.invoke(cli, [*args, "--primary", "promptfoo-human"], env=env)
        assert again.exit_code == 0 and again.output.startswith("0 labels written, 5 unchanged"), again.output
        empty = c.create_project("bad", ["pass", "fail"]).id
        bad = runner.invoke(
            cli, ["import", "inspect", str(fixture), "--project", empty, "--url", server.base_url], env=env
        )
        assert bad.exit_code == 1 and ": 422 " in bad.output, bad.output
        assert c.labels(empty).rows == [] and c.raters(empty) == []
        unknown = runner.invoke(cli, ["import", "csv", str(fixture), "--project", empty], env=env)
        assert unknown.exit_code == 2 and "generic, promptfoo" in unknown.output


@pytest.mark.parametrize("form", ["csv", "parquet"])
def test_an_export_imported_by_the_cli_into_a_new_project_gives_the_same_reliability(
    server: LiveServer, tmp_path: Path, form: str
) -> None:
    """The round trip as a user runs it: the generic export saved to a file, `annoplan import generic FILE`
    into a new project, then the same /reliability; the labels' Parquet export is Labels.to_polars()."""
    polars = pytest.importorskip("polars")
    from typer.testing import CliRunner

    from service.cli import app as cli
    from tests.service.test_import_generic import comparable

    with Client(server.base_url, ADMIN_KEY) as c:
        src = c.create_project(f"src-{form}", ["pass", "fail"]).id
        c.upsert_items(src, [{"external_id": i} for i in ITEMS])
        for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
            c.add_rater(src, ext, kind)
        c.upload_labels(src, panel_labels(4))
        file = tmp_path / f"labels.{form}"
        if form == "csv":
            file.write_text(c.export_generic(src))
        else:
            file.write_bytes(c.export_generic_parquet(src))
        dst = c.create_project(f"dst-{form}", ["pass", "fail"]).id
        args = ["import", "generic", str(file), "--project", dst, "--url", server.base_url]
        done = CliRunner().invoke(cli, args, env={"ANNOPLAN_KEY": ADMIN_KEY})
        assert done.exit_code == 0, done.output
        assert done.output.startswith("120 labels written, 0 unchanged (label_seq 120); 30 items and 4 raters")

        def reliability(pid: str) -> object:
            document = c.reliability(pid).document
            assert document is not None
            return comparable(document.model_dump(mode="json"))

        assert reliability(dst) == reliability(src)
        exported = httpx.get(
            f"{server.base_url}/projects/{dst}/labels",
            params={"format": "parquet"},
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        )
        assert exported.status_code == 200, exported.text
        assert polars.read_parquet(exported.content).to_dicts() == c.labels(dst).to_polars().to_dicts()


def test_the_documented_example_runs_and_prints_what_it_says(server: LiveServer, tmp_path: Path) -> None:
    """docs/integrations.md's client example, run as it stands against the live server: each ``# ->`` line
    is what the ``print`` before it printed."""
    import os
    import re
    import subprocess
    import sys

    from tests.conftest import ROOT

    page = (ROOT / "docs" / "integrations.md").read_text()
    (code,) = re.findall(r"runs as it stands.*?```python\n(.*?)```", page, flags=re.S)
    code = code.replace("http://127.0.0.1:8000", server.base_url).replace('"my-admin-key"', repr(ADMIN_KEY))
    promised = [line.strip().removeprefix("# -> ") for line in code.splitlines() if line.strip().startswith("# -> ")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's client, wherever the venv points
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == promised and len(promised) >= 5
