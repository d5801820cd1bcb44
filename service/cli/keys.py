"""``annoplan keys create|list|revoke``: API keys, written straight to the configured database."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

if TYPE_CHECKING:
    pass

from service.cli.common import CliError, console, migrated_engine

keys = typer.Typer(help="API keys.", no_args_is_help=True)


@keys.command("create")
def keys_create(
    role: Annotated[str, typer.Option(help="admin, pm, annotator or viewer.")],
    project: Annotated[str | None, typer.Option(help="Project id (all roles but admin).")] = None,
    rater: Annotated[str | None, typer.Option(help="Rater external id (annotator keys).")] = None,
    name: Annotated[str | None, typer.Option(help="A note to recognise the key by.")] = None,
    expires_at: Annotated[
        str | None,
        typer.Option(help="When the key stops working: ISO 8601 with a timezone, e.g. 2027-01-31T00:00:00Z."),
    ] = None,
) -> None:
    """Create an API key in the configured database and print its secret (shown once).

    Example: annoplan keys create --role admin --expires-at 2027-01-31T00:00:00Z
    """
    from datetime import datetime

    from sqlalchemy import select

    from service.core.db import make_sessionmaker, session_scope
    from service.data.keys import create_key
    from service.data.models import Project, Rater
    from service.schemas.keys import Role

    if role not in set(Role):
        raise typer.BadParameter(f"role must be one of {', '.join(Role)}")
    if (role == "admin") != (project is None):
        raise typer.BadParameter("admin keys take no --project; every other role needs one")
    if (role == "annotator") != (rater is not None):
        raise typer.BadParameter("--rater is required for annotator keys and only for them")
    expiry = None
    if expires_at is not None:
        try:
            expiry = datetime.fromisoformat(expires_at)
        except ValueError:
            raise typer.BadParameter(f"--expires-at {expires_at!r} is not an ISO 8601 moment") from None
        if expiry.tzinfo is None:
            raise typer.BadParameter("--expires-at needs a timezone, e.g. 2027-01-31T00:00:00Z")
        if expiry <= datetime.now(expiry.tzinfo):
            raise typer.BadParameter("--expires-at must be in the future")
    engine = migrated_engine()
    with session_scope(make_sessionmaker(engine), write=True) as session:
        if project is not None and session.get(Project, project) is None:
            raise typer.BadParameter(f"no project {project!r}")
        rater_id = None
        if rater is not None:
            rater_id = session.scalar(select(Rater.id).where(Rater.project_id == project, Rater.external_id == rater))
            if rater_id is None:
                raise typer.BadParameter(f"no rater {rater!r} in project {project!r}")
        _, secret = create_key(
            session, role=Role(role), project_id=project, rater_id=rater_id, name=name, expires_at=expiry
        )
    engine.dispose()
    typer.echo(secret)


@keys.command("list")
def keys_list(
    all_keys: Annotated[bool, typer.Option("--all", help="Show revoked keys too.")] = False,
) -> None:
    """List the keys of the configured database (ids, roles, scope; never secrets).

    Example: annoplan keys list --all
    """
    from service.core.db import make_sessionmaker, session_scope
    from service.data.keys import listed_keys

    engine = migrated_engine()
    with session_scope(make_sessionmaker(engine)) as session:
        rows = listed_keys(session, include_revoked=all_keys)
    engine.dispose()
    table = Table(title="annoplan API keys")
    for column in ("id", "role", "project", "rater", "name", "created", "revoked", "expires"):
        table.add_column(column)
    for key, rater in rows:
        table.add_row(
            key.id,
            key.role,
            key.project_id or "",
            rater or "",
            key.name or "",
            key.created_at.isoformat(timespec="seconds"),
            key.revoked_at.isoformat(timespec="seconds") if key.revoked_at else "",
            key.expires_at.isoformat(timespec="seconds") if key.expires_at else "",
        )
    console.print(table)


@keys.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's id, as `annoplan keys list` shows it.")]) -> None:
    """Revoke a key (admin keys too); it stops working at once.

    Example: annoplan keys revoke k_3f9a...
    """
    from service.core.db import make_sessionmaker, session_scope
    from service.core.errors import AppError
    from service.data.keys import revoke_key

    engine = migrated_engine()
    try:
        with session_scope(make_sessionmaker(engine), write=True) as session:
            revoke_key(session, key_id)
    except AppError as exc:
        raise CliError(exc.detail) from None
    finally:
        engine.dispose()
    typer.echo(f"revoked {key_id}")
