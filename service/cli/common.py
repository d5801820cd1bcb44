"""What the commands share: the console, the one-line error, the migrated database, the API client."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from service.client import Client


# Piped output is not cut at 80 columns: tables keep every column when redirected to a file.
console = Console(width=None if sys.stdout.isatty() else max(shutil.get_terminal_size().columns, 200))


class CliError(Exception):
    """A problem the person at the terminal can fix: printed as one line, exit status 1."""


def migrated_engine() -> Engine:
    """An engine on the configured database, refusing one that holds no annoplan schema.

    A missing SQLite file is not created: ``annoplan keys create`` run in the wrong
    directory would otherwise leave an empty ``annoplan.db`` behind.
    """
    from sqlalchemy import inspect

    from service.core.db import make_engine
    from service.core.settings import get_settings

    url = get_settings().database_url
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.exists():
            raise CliError(
                f"no database at {path.resolve()}: run this where `make serve` ran, set "
                "ANNOPLAN_DATABASE_URL, or create it with `annoplan migrate`"
            )
    engine = make_engine(url)
    if not inspect(engine).has_table("api_keys"):
        engine.dispose()
        raise CliError(f"the database {url} has no annoplan schema: run `annoplan migrate` first")
    return engine


@contextmanager
def api_client(url: str, key: str, *, timeout: float) -> Iterator[Client]:
    """The annoplan API at ``url`` with ``key``, each request sent once; an error answer prints the request
    and the answer on stderr and exits 1, an unreachable server is a one-line error."""
    import httpx

    from service.client import ApiError, Client

    try:
        with Client(url, key, timeout=timeout, retries=0) as client:
            yield client
    except ApiError as error:
        r = error.response
        assert r is not None  # the client's errors are answers it received
        typer.echo(f"{r.request.method} {r.request.url}: {r.status_code} {r.text}", err=True)
        raise typer.Exit(1) from None
    except httpx.HTTPError as exc:
        raise CliError(f"annoplan at {url} could not be reached: {exc}") from None
