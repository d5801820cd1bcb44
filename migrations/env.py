"""Alembic environment: the database URL comes from the service settings (or the caller)."""

from __future__ import annotations

from alembic import context

from service.core.db import make_engine
from service.core.settings import get_settings
from service.data.models import Base

config = context.config


def run_migrations() -> None:
    """Migrate the configured database; ``render_as_batch`` lets ALTERs run on SQLite too."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or get_settings().database_url
    engine = make_engine(url)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    # SQLite's batch ALTER copies a table and drops the old one; with foreign keys on, that drop
    # cascades (a dropped raters table deletes every label). Off while migrating (outside a
    # transaction, where SQLite honours it), on again afterwards.
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
    try:
        context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    finally:
        if sqlite:
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")


run_migrations()
