"""``annoplan import``: an eval tool's file into a project through the API (docs/integrations.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import api_client

IMPORT_SOURCES = ("generic", "promptfoo", "inspect", "langfuse", "langsmith")
"""The files ``annoplan import`` reads, as ``POST /projects/{pid}/import/<source>`` does (docs/integrations.md)."""
IMPORT_TYPES = {
    ".csv": "text/csv",
    ".ndjson": "application/x-ndjson",
    ".jsonl": "application/x-ndjson",
    ".parquet": "application/vnd.apache.parquet",
}
"""A generic file's content type by its suffix (otherwise JSON)."""


def import_file(
    source: Annotated[str, typer.Argument(help=f"The file's tool: {', '.join(IMPORT_SOURCES)}.")],
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The file, as the tool wrote it.")],
    project: Annotated[str, typer.Option(help="The annoplan project id.")],
    judge: Annotated[list[str] | None, typer.Option(help="A scorer to import as a judge (repeat it).")] = None,
    human: Annotated[list[str] | None, typer.Option(help="A scorer to import as a human (repeat it).")] = None,
    api_source: Annotated[
        str | None, typer.Option(help="The kind of API-sourced scores (Langfuse API, LangSmith api).")
    ] = None,
    score: Annotated[str | None, typer.Option(help="Import only the scores of this name (key).")] = None,
    criterion: Annotated[str | None, typer.Option(help="The criterion of scores whose name is not one.")] = None,
    primary: Annotated[str | None, typer.Option(help="External id of the human rater to make the primary.")] = None,
    url: Annotated[str, typer.Option(envvar="ANNOPLAN_URL", help="The annoplan server.")] = "http://127.0.0.1:8000",
    key: Annotated[str, typer.Option(envvar="ANNOPLAN_KEY", help="An admin key or a pm key of the project.")] = "",
) -> None:
    """Import a tool's file into a project, all or nothing, and print what it wrote; safe to rerun.

    Example: annoplan import promptfoo results.json --project p_... (with ANNOPLAN_KEY set)
    """
    if source not in IMPORT_SOURCES:
        raise typer.BadParameter(f"{source!r} is not one of {', '.join(IMPORT_SOURCES)}", param_hint="SOURCE")
    if not key:
        raise typer.BadParameter("pass --key (or ANNOPLAN_KEY)")
    content_type = IMPORT_TYPES.get(file.suffix.lower(), "application/json") if source == "generic" else None
    params = {
        "judges": judge or None,
        "humans": human or None,
        "api_source": api_source,
        "score": score,
        "criterion": criterion,
        "primary": primary,
    }
    kept = {k: v for k, v in params.items() if v is not None}
    body = file.read_bytes()
    with api_client(url, key, timeout=600) as c:
        done = c.import_file(project, source, body, content_type or "application/json", **kept)
    labels = done.labels
    typer.echo(
        f"{labels.accepted} labels written, {labels.duplicates} unchanged (label_seq {labels.label_seq}); "
        f"{done.items_created} items and {len(done.raters_created)} raters created"
        + (f" ({', '.join(done.raters_created)})" if done.raters_created else "")
    )
    for skipped in done.skipped:
        typer.echo(f"  not imported: {skipped.scorer} ({skipped.scores} scores): {skipped.reason}")
