"""annoplan's Alembic migrations, shipped in the package so that an installed annoplan migrates
without the repository (``annoplan migrate``); the repository's ``alembic.ini`` points here too."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config

SCRIPT_LOCATION = Path(__file__).resolve().parent


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config on this package's scripts; ``url`` or else the service settings' database."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_LOCATION))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))  # ConfigParser interpolates %
    return cfg
