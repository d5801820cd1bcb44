"""Each worker's sessions, carrying the caches its requests share: label matrices, modal strata and
kept monitorings."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from service.core.caches import RecentlyUsed
from service.core.db import make_sessionmaker
from service.documents.monitoring import KEPT_MONITORINGS, MONITOR_KEY
from service.matrices.modal_strata import MODAL_KEY, ModalStore
from service.matrices.store import STORE_KEY, MatrixStore


def worker_sessionmaker(engine: Engine, store: MatrixStore | None = None) -> sessionmaker[Session]:
    """Sessions sharing this worker's label matrices (``store``, or a new one), modal strata and
    monitorings."""
    info: dict[str, object] = {
        STORE_KEY: store or MatrixStore(),
        MODAL_KEY: ModalStore(),
        MONITOR_KEY: RecentlyUsed(KEPT_MONITORINGS),
    }
    return make_sessionmaker(engine, info)
