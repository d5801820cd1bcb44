"""``annoplan verify``: a certificate re-derived offline from a label export."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    pass


def _label_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a label export: CSV (a header row), NDJSON (one object a line) or a JSON array or page."""
    from service.core.csv_safety import restored_cell

    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":  # exports neutralise formula-like cells; read back the original text
        return [{k: restored_cell(v or "") for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]
    try:
        if path.suffix.lower() in (".ndjson", ".jsonl"):
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise typer.BadParameter(f"{path.name} is not valid JSON: {error}") from None
    rows = data.get("items") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise typer.BadParameter(f"{path.name} must hold label rows (an array, or a page with 'items')")
    return rows


def verify(
    certificate: Annotated[
        Path, typer.Argument(help="The certificate (an in-toto statement, JSON).", exists=True, dir_okay=False)
    ],
    labels: Annotated[
        Path,
        typer.Argument(
            help="A label export: .csv, .ndjson or .json (current labels or history).", exists=True, dir_okay=False
        ),
    ],
) -> None:
    """Re-derive a certificate offline from a label export; print {"match", "mismatches"} as JSON.

    Exit status 0 when it matches, 1 when it does not, 2 for unusable input.

    Example: annoplan verify cert.json labels.csv
    """
    from planner.certificate import verify_certificate

    try:
        statement = json.loads(certificate.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise typer.BadParameter(f"{certificate.name} is not valid JSON: {error}") from None
    try:
        check = verify_certificate(statement, _label_rows(labels))
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    typer.echo(
        json.dumps(
            {
                "match": check.match,
                "notes": list(check.notes),
                "mismatches": [
                    {"field": m.field, "reason": m.reason, "certified": m.certified, "found": m.found}
                    for m in check.mismatches
                ],
            },
            indent=2,
        )
    )
    if not check.match:
        raise typer.Exit(1)
