"""Each worker's modal strata of the labels in hand (docs/method.md §5, Seq designs): per item of a
project, the mode of its primary's and human secondaries' labels of one criterion, kept per
project and brought up to date from the label events since, so that a secondary's first batch
under a sequential design reads the items labeled since the last draw, not every label.

A worker computes them ahead of its requests (:class:`StrataWarmer`): at its start for the projects
with the newest plans, and for each plan stored since (by this worker or another), so a batch
request finds them kept and only brings them up to date."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from planner.seq_designs import modal_strata
from service.core.background import PollingThread
from service.core.caches import RecentlyUsed
from service.core.sql import driver_rows, in_values
from service.data.labels import ONE_ORDER
from service.data.models import Plan, Project, Rater
from service.matrices.matrix import value_codes
from service.matrices.store import current_matrix, item_sorter

MODAL_KEY = "annoplan_modal_strata"
"""``Session.info`` key of the worker's :class:`ModalStore`."""
REBUILD_AFTER = 100_000
"""Label events since the kept strata beyond which they are computed again from the label matrix."""
WARM_POLL_SECONDS = 2.0
"""How often a worker looks for plans stored by other workers, whose projects' strata it then computes."""

STOP_SECONDS = 30.0
"""How long a stopping worker waits for a warm-up in progress (reading a million items' labels takes seconds)."""

log = logging.getLogger("annoplan.modal_strata")


@dataclass(frozen=True)
class InHand:
    """Modal strata of a project's labels in hand as of ``label_seq``, in corpus order (``item_ids``)."""

    label_seq: int
    labels: tuple[str, ...]
    item_ids: np.ndarray
    sorter: np.ndarray  # np.argsort(item_ids)
    modal: np.ndarray  # int16, 0..L (L: no label in hand)
    primary: int | None  # the primary's rater id
    primary_labeled: np.ndarray  # bool: the primary has a label in hand (not an abstention)
    secondary_labeled: np.ndarray  # bool: some human secondary has a label in hand

    def labeled_through(self, cursor: int) -> int:
        """The largest item id ``c >= cursor`` such that the primary has a label in hand on every item
        with an id in ``(cursor, c]`` (``cursor`` itself when the next item has none)."""
        start = int(np.searchsorted(self.item_ids, cursor, side="right", sorter=self.sorter))
        step = 1024
        while start < self.sorter.size:
            rows = self.sorter[start : start + step]
            gap = np.flatnonzero(~self.primary_labeled[rows])
            if gap.size:
                return int(self.item_ids[self.sorter[start + gap[0] - 1]]) if start + gap[0] else cursor
            start, step = start + rows.size, step * 4
        return int(self.item_ids[self.sorter[-1]]) if self.sorter.size else cursor


class ModalStore:
    """The modal strata of the projects drawn for most recently, each brought up to date on read."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._kept: RecentlyUsed[tuple[str, str], InHand] = RecentlyUsed(size)
        self._turns: dict[tuple[str, str], threading.Lock] = {}
        self._turns_lock = threading.Lock()

    def strata(self, session: Session, project: Project, criterion: str) -> InHand:
        """The modal strata of ``criterion`` at ``project.label_seq`` as ``session`` sees it.

        One thread at a time per project and criterion: a request arriving while the warmer computes
        them waits for that and then brings them up to date, instead of computing them a second time.
        """
        key = (project.id, criterion)
        with self._turns_lock:
            turn = self._turns.setdefault(key, threading.Lock())
        with turn:
            fresh = _updated(session, project, criterion, self._kept.get(key))
            self._kept.put(key, fresh)
        return fresh


def modal_in_hand(session: Session, project: Project, criterion: str) -> InHand:
    """The modal strata of ``criterion`` now: from the session's :class:`ModalStore` when it has one."""
    store = session.info.get(MODAL_KEY)
    if isinstance(store, ModalStore):
        return store.strata(session, project, criterion)
    return _from_matrix(session, project, criterion)


def _raters(session: Session, project: Project) -> list[int]:
    """Ids of the primary (first) and the human secondaries whose labels are in hand for the strata."""
    rows = session.execute(
        select(Rater.id, Rater.kind)
        .where(Rater.project_id == project.id, Rater.kind.in_(("primary", "human")))
        .order_by(Rater.id)
    ).all()
    primary = [rid for rid, kind in rows if kind == "primary"][:1]
    return primary + [rid for rid, kind in rows if kind == "human"]


def _updated(session: Session, project: Project, criterion: str, kept: InHand | None) -> InHand:
    """``kept`` brought to ``project.label_seq``: the items with events since get their mode again from
    their current labels, or, where no secondary has a label in hand, from the primary's last event
    (no read of current labels for the items only the primary labels, most of a corpus); computed
    from the label matrix when there is nothing (usable) to update."""
    if (
        kept is None
        or kept.labels != tuple(project.labels)
        or kept.item_ids.size != project.item_count
        or not kept.label_seq <= project.label_seq <= kept.label_seq + REBUILD_AFTER
    ):
        return _from_matrix(session, project, criterion)
    if kept.label_seq == project.label_seq:
        return kept
    events = driver_rows(
        session,
        "SELECT item_id, rater_id, value FROM label_events "
        "WHERE project_id = ? AND seq > ? AND seq <= ? AND criterion = ? ORDER BY seq",
        (project.id, kept.label_seq, project.label_seq, criterion),
    )
    raters = _raters(session, project)
    if not events or not raters:
        return replace(kept, label_seq=project.label_seq)
    if raters[0] != kept.primary:
        return _from_matrix(session, project, criterion)
    item = np.fromiter((e[0] for e in events), np.int64, len(events))
    by = np.fromiter((e[1] for e in events), np.int64, len(events))
    changed = np.unique(item)
    at = kept.sorter[np.searchsorted(kept.item_ids, changed, sorter=kept.sorter).clip(max=kept.item_ids.size - 1)]
    if not (kept.item_ids[at] == changed).all():
        return _from_matrix(session, project, criterion)
    modal, labeled, seen = kept.modal.copy(), kept.primary_labeled.copy(), kept.secondary_labeled.copy()
    # Items no secondary holds a label of or labeled since: their mode is the primary's last label.
    asked = seen[at]
    asked[np.searchsorted(changed, item[np.isin(by, raters[1:])])] = True
    mine = np.flatnonzero(by == raters[0])
    last = mine[::-1][np.unique(item[mine][::-1], return_index=True)[1]]  # the primary's last event per item
    row = np.searchsorted(changed, item[last])
    keep = ~asked[row]
    code_of = value_codes(project)
    code = np.fromiter((code_of.get(events[k][2], -1) for k in last[keep]), np.int64, int(keep.sum()))
    in_hand = (code >= 0) & (code < len(project.labels))
    modal[at[row[keep]]] = np.where(in_hand, code, len(project.labels))
    labeled[at[row[keep]]] = in_hand
    if asked.any():
        rows = at[asked]
        modal[rows], labeled[rows], seen[rows] = _modes(session, project, criterion, changed[asked], raters)
    modal.flags.writeable = labeled.flags.writeable = seen.flags.writeable = False
    return InHand(project.label_seq, kept.labels, kept.item_ids, kept.sorter, modal, kept.primary, labeled, seen)


def _modes(
    session: Session, project: Project, criterion: str, items: np.ndarray, raters: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``modal_strata`` of ``items`` from their current labels by ``raters`` (the primary first), whether
    the primary has a label in hand on each, and whether some other of ``raters`` has."""
    code_of = value_codes(project)
    n_labels = len(project.labels)
    codes = np.full((items.size, len(raters)), -1, dtype=np.int64)
    column = {rid: k for k, rid in enumerate(raters)}
    marks = ", ".join("?" * len(raters))
    among, values = in_values(session, "item_id", items.tolist())
    rows = driver_rows(
        session,
        # Item and rater ids are the project's own: read by the primary key, no project_id.
        f"SELECT item_id, rater_id, value FROM current_labels WHERE criterion = ? AND {ONE_ORDER} AND {among} "
        f"AND rater_id IN ({marks})",
        (criterion, values, *raters),
    )
    if rows:
        row = np.searchsorted(items, np.fromiter((r[0] for r in rows), np.int64, len(rows)))
        col = np.fromiter((column[r[1]] for r in rows), np.int64, len(rows))
        code = np.fromiter((code_of.get(r[2], -1) for r in rows), np.int64, len(rows))
        codes[row, col] = np.where(code < n_labels, code, -1)
    modes = modal_strata(codes, primary=0, n_labels=n_labels).astype(np.int16)
    return modes, codes[:, 0] >= 0, np.asarray((codes[:, 1:] >= 0).any(axis=1))


def _from_matrix(session: Session, project: Project, criterion: str) -> InHand:
    """The modal strata of the whole label matrix (reads it when the worker does not keep it): the
    primary's label where no secondary has one, the mode of the rest."""
    matrix = current_matrix(session, project, criterion)
    primaries = matrix.columns("primary")[:1]
    columns = primaries + matrix.columns("human")
    if primaries and matrix.raw.shape[0]:
        codes = matrix.codes
        labeled = codes[:, primaries[0]] >= 0
        modal = np.where(labeled, codes[:, primaries[0]], matrix.n_labels).astype(np.int16)
        seen = np.zeros(labeled.size, dtype=bool)  # items some secondary labeled: a mode to take (else the primary's)
        for column in columns[1:]:
            seen |= codes[:, column] >= 0
        rows = np.flatnonzero(seen)
        if rows.size:
            modal[rows] = modal_strata(codes[rows][:, columns], primary=0, n_labels=matrix.n_labels)
    else:
        modal = np.full(matrix.raw.shape[0], matrix.n_labels, dtype=np.int16)
        labeled = seen = np.zeros(matrix.raw.shape[0], dtype=bool)
    modal.flags.writeable = labeled.flags.writeable = seen.flags.writeable = False
    primary = matrix.raters[primaries[0]].id if primaries else None
    return InHand(
        matrix.label_seq,
        tuple(project.labels),
        matrix.item_ids,
        item_sorter(session, project, matrix),  # the worker's one sort order of the items
        modal,
        primary,
        labeled,
        seen,
    )


class StrataWarmer(PollingThread):
    """A worker's thread computing the modal strata (and reading the label matrix they come from) of
    the projects with the newest plans, off the request path: at start, at :meth:`poke` (a plan
    stored by this worker) and every ``WARM_POLL_SECONDS`` (plans stored by other workers). Each
    plan is warmed once; a request arriving first computes the strata itself, as before."""

    thread_name = "annoplan-strata-warmer"

    def __init__(self, sessions: sessionmaker[Session], *, poll_seconds: float = WARM_POLL_SECONDS) -> None:
        super().__init__(poll_seconds=poll_seconds, stop_seconds=STOP_SECONDS, log=log)
        self.sessions = sessions
        self._warmed: set[str] = set()  # plan ids

    def newest_plans(self) -> list[tuple[str, str]]:
        """(plan id, project id) of the plans in force of the projects planned most recently, as many
        projects as a worker keeps strata of, newest first."""
        store = self.sessions.kw["info"].get(MODAL_KEY)
        size = store.size if isinstance(store, ModalStore) else 8
        with self.sessions() as session:
            rows = session.execute(
                select(Plan.id, Plan.project_id).order_by(Plan.created_at.desc(), Plan.id.desc()).limit(8 * size)
            ).all()
        newest: dict[str, str] = {}
        for plan_id, project_id in rows:
            newest.setdefault(project_id, plan_id)
        return [(plan_id, project_id) for project_id, plan_id in list(newest.items())[:size]]

    def run_once(self) -> list[str]:
        """Warm the projects of the newest plans not warmed yet; their project ids."""
        warmed = []
        for plan_id, project_id in self.newest_plans():
            if plan_id in self._warmed or self.stopping:
                continue
            with self.sessions() as session:
                project = session.get(Project, project_id)
                if project is not None:
                    modal_in_hand(session, project, project.criteria[0])
                    warmed.append(project_id)
            self._warmed.add(plan_id)
        return warmed
