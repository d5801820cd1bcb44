"""Neyman strata from an item feature the project supplied on upload (docs/method.md §9).

``strata: "feature:<name>"`` stratifies the overlap on the value of ``features[<name>]``:
one stratum per distinct value (``true`` and ``1`` differ), each with its ``S_h`` from the
prior (and the judge-primary agreement seen in it) or from the pilot pairs in it.
"""

from __future__ import annotations

import numpy as np
import orjson
from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.designs import joint_strata
from planner.neyman import pilot_stratum_sds, prior_stratum_sds
from service.core.errors import Conflict, Invalid, echo
from service.data.models import Item
from service.matrices.matrix import LabelMatrix
from service.matrices.ratings import RatingsMatrix
from service.schemas.plans import PlanCreate

FEATURE_PREFIX = "feature:"
MAX_FEATURE_STRATA = 100  # more distinct values than this is not a stratification (an id, a score)
SHOWN = 5  # example items or values named in an error


def feature_name(strata: str) -> str | None:
    """The feature of ``strata: "feature:<name>"``, None for the label-based strata."""
    return strata[len(FEATURE_PREFIX) :] if strata.startswith(FEATURE_PREFIX) else None


def feature_values(
    session: Session, matrix: LabelMatrix | RatingsMatrix, name: str
) -> tuple[list[str | None], list[str]]:
    """Per item (matrix order) its value of ``name`` as canonical JSON (None: absent or null), and its external id."""
    rows = {
        int(iid): (ext, features)
        for iid, ext, features in session.execute(
            select(Item.id, Item.external_id, Item.features).where(Item.id.in_(matrix.item_ids.tolist()))
        )
    }
    values: list[str | None] = []
    external: list[str] = []
    for iid in matrix.item_ids.tolist():
        ext, features = rows[int(iid)]
        value = (features or {}).get(name)
        values.append(None if value is None else orjson.dumps(value).decode())
        external.append(ext)
    return values, external


def feature_strata(session: Session, matrix: LabelMatrix, name: str) -> tuple[np.ndarray, list[str]]:
    """Stratum code per item (matrix order) and each stratum's name; 422 when the feature cannot stratify."""
    values, external = feature_values(session, matrix, name)
    missing = [ext for ext, v in zip(external, values, strict=True) if v is None]
    if len(missing) == len(values):
        raise Invalid(f"no item has the feature {echo(name)}: upload items with it under 'features' first")
    if missing:
        raise Invalid(
            f"{len(missing)} of {len(values)} items have no value for the feature {echo(name)} "
            f"(e.g. {', '.join(echo(e) for e in missing[:SHOWN])}): every item needs one to be stratified"
        )
    strata = joint_strata([str(v) for v in values])
    levels = sorted({str(v) for v in values})  # joint_strata numbers values in sorted order
    sizes = np.bincount(strata, minlength=len(levels))
    if len(levels) > MAX_FEATURE_STRATA:
        raise Invalid(
            f"the feature {echo(name)} has {len(levels)} distinct values; stratify on at most "
            f"{MAX_FEATURE_STRATA} (group its values into a coarser feature)"
        )
    single = [levels[h] for h in np.flatnonzero(sizes < 2)]
    if single:
        raise Invalid(
            f"{len(single)} value(s) of the feature {echo(name)} hold a single item "
            f"({', '.join(echo(v) for v in single[:SHOWN])}): a stratum needs at least 2 items; "
            "merge rare values"
        )
    return strata, [f"{name} = {echo(orjson.loads(v))}" for v in levels]


def feature_stratum_sds(
    body: PlanCreate, matrix: LabelMatrix, strata: np.ndarray, agree: np.ndarray | None
) -> tuple[list[float], str]:
    """``S_h`` per feature stratum and where it came from (docs/method.md §9).

    Prior: the channel's ``P(r_k = primary)`` given the judge-primary agreement share seen in
    the stratum (the prior's share where no item has both labels). Pilot: the secondaries'
    agreement with the primary on the stratum's pilot items, add-one smoothed.
    """
    n_strata = int(strata.max()) + 1
    if body.source == "prior":
        assert body.p_h is not None and body.p_j is not None
        share = np.full(n_strata, np.nan)
        if agree is not None and (agree >= 0).any():
            seen = agree >= 0
            counts = np.bincount(strata[seen], minlength=n_strata)
            agreeing = np.bincount(strata[seen], weights=agree[seen], minlength=n_strata)
            share = np.where(counts > 0, agreeing / np.maximum(counts, 1), np.nan)
        sds = prior_stratum_sds(share, p_h=body.p_h, p_j=body.p_j, n_labels=matrix.n_labels)
        return sds.tolist(), "prior, with the judge-primary agreement seen in each stratum"
    primary, secondaries = matrix.columns("primary"), matrix.columns("human")
    if not primary or not secondaries:
        raise Conflict("a pilot Neyman plan needs the primary's and a secondary's labels", code="no_pilot")
    p = matrix.codes[:, primary[0]][:, None]
    s = matrix.codes[:, secondaries]
    pair = (p >= 0) & (s >= 0)
    row = np.broadcast_to(strata[:, None], s.shape)
    pairs = np.bincount(row[pair], minlength=n_strata)
    agreements = np.bincount(row[pair & (s == p)], minlength=n_strata)
    sds = pilot_stratum_sds(agreements, pairs)
    return sds.tolist(), "pilot pairs of each stratum (secondary vs primary), add-one smoothed"
