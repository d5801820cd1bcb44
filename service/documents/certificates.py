"""Certificates: the label snapshot and settings of a project, frozen into an in-toto statement."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import orjson
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from planner.certificate import BIT_GENERATOR, label_snapshot, sha256_hex
from service.core.errors import Conflict, Invalid, NotFound, echo
from service.data.models import Certificate, Item, LabelEvent, Plan, Project, Rater
from service.data.outbox import emit
from service.documents.monitoring import planned_budget
from service.matrices.arrival import arrival_order, listed_items, seeded_item_keys
from service.matrices.matrix import corpus
from service.planning.lists import plan_inclusion
from service.planning.plans import current_plan
from service.planning.strata import feature_name
from service.schemas.certificates import CertificateCreate

MAX_RESAMPLES = 100_000
"""The most bootstrap resamples a certificate may name (as `CertificateCreate.n_resamples` allows)."""


def certificate_work(statement: dict[str, Any], n_rows: int) -> dict[str, int]:
    """The factors of verifying ``statement`` against ``n_rows`` label rows: rows, resamples, judges.

    422 ``invalid_certificate`` for a ``seeds.n_resamples`` that is not a count in 1..MAX_RESAMPLES;
    a statement without one is left for the verifier to refuse.
    """
    predicate = statement.get("predicate")
    predicate = predicate if isinstance(predicate, dict) else {}
    seeds = predicate.get("seeds")
    n_resamples = seeds.get("n_resamples", 1) if isinstance(seeds, dict) else 1
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or not 1 <= n_resamples <= MAX_RESAMPLES:
        raise Invalid(
            f"seeds.n_resamples must be a count from 1 to {MAX_RESAMPLES:,}, got {echo(n_resamples)}",
            code="invalid_certificate",
        )
    return {"label rows": n_rows, "resamples": n_resamples, "decisions": decision_count(predicate)}


def decision_count(predicate: dict[str, Any]) -> int:
    """The validations a certificate's result runs: one per judge, and one per slice when it has slices (§3b)."""
    raters = predicate.get("raters")
    judges = sum(kind == "judge" for kind in raters.values()) if isinstance(raters, dict) else 1
    slices = predicate.get("slices")
    values = slices.get("values") if isinstance(slices, dict) else None
    if isinstance(values, dict):  # earlier certificates: item id -> value
        values = [[item, value] for item, value in values.items()]
    named = values if isinstance(values, list) else []
    n_slices = len({str(pair[-1]) for pair in named if isinstance(pair, list) and pair})
    return max(judges, 1) + n_slices


def snapshot_at(session: Session, project_id: str, label_seq: int) -> list[dict[str, Any]]:
    """Every cell's current label as of ``label_seq``, from the append-only events (docs/method.md §10)."""
    events = session.execute(
        select(Item.external_id, Rater.external_id, LabelEvent.criterion, LabelEvent.value, LabelEvent.seq)
        .join(Item, Item.id == LabelEvent.item_id)
        .join(Rater, Rater.id == LabelEvent.rater_id)
        .where(LabelEvent.project_id == project_id, LabelEvent.seq <= label_seq, LabelEvent.shown_order != "BA")
    )
    return label_snapshot(
        ({"item": i, "rater": r, "criterion": c, "value": v, "seq": s} for i, r, c, v, s in events), label_seq=label_seq
    )


def certificate_settings(
    session: Session, project: Project, body: CertificateCreate, *, n_resamples: int
) -> dict[str, Any]:
    """What a certificate's result depends on; 4xx when it cannot be certified (nothing is written)."""
    label_seq = project.label_seq if body.label_seq is None else body.label_seq
    if label_seq > project.label_seq:
        raise Invalid(f"label_seq {label_seq} is beyond the project's last label ({project.label_seq})")
    criterion = body.criterion or project.criteria[0]
    if criterion not in project.criteria:
        raise Invalid(f"unknown criterion {echo(criterion)}; the project has {project.criteria}")
    kinds = dict(session.execute(select(Rater.external_id, Rater.kind).where(Rater.project_id == project.id)).all())
    if "judge" not in kinds.values():
        raise Conflict("this project has no judge rater: there is no decision to certify", code="no_judge")
    if sum(kind in ("primary", "human") for kind in kinds.values()) < 2:
        raise Conflict("a certificate needs at least two human raters (primary or human)", code="too_few_humans")
    decision = project.decision_settings
    plan = current_plan(session, project.id)  # its seed may pass 2^53: a decimal string in canonical JSON
    settings: dict[str, Any] = {
        "project": {"id": project.id, "name": project.name},
        "label_seq": label_seq,
        "criterion": criterion,
        "protocol": {
            "scale": project.scale,
            "labels": list(project.labels),
            "handling": "exclude",
            "aggregation": "per criterion",
            "resampling_unit": "item",
            "confidence_level": 0.95,
        },
        "raters": kinds,
        "decision": {
            "coefficient": decision.coefficient,
            "rule": decision.rule,
            "epsilon": decision.resolved_epsilon(),
            "omega_threshold": decision.omega_threshold,
            "q": decision.q,
            "inconclusive_level": decision.inconclusive_level,
            "alpha_sig": decision.alpha_sig,
        },
        "plan": None
        if plan is None
        else {
            "id": plan.id,
            "purpose": plan.purpose,
            "source": plan.source,
            "design": plan.design,
            "m": plan.m,
            "seed": str(plan.seed),
        },
        "seeds": {
            "seed": body.seed,
            "bit_generator": BIT_GENERATOR,
            "n_resamples": n_resamples if body.n_resamples is None else body.n_resamples,
        },
    }
    if project.scale == "numeric":  # the numbers' range: absent from label certificates, which still verify
        settings["protocol"]["value_range"] = dict(project.value_range or {})
    # As /reliability computes it (docs/method.md §9); absent when default, so earlier certificates still verify.
    if decision.estimator != "paired":
        settings["decision"]["estimator"] = decision.estimator
    latest = latest_cells(session, project, criterion, label_seq)
    # The statement names an item by its place among the certified items (those with a label of the
    # criterion, sorted: the result's own order), never by its id: viewers read certificates.
    external = dict(session.execute(select(Item.id, Item.external_id).where(Item.project_id == project.id)).all())
    labeled = sorted({item for (item, _), (_, _, present) in latest.items() if present}, key=external.__getitem__)
    place = {item: n for n, item in enumerate(labeled)}
    inclusion = panel_inclusion(session, plan, place)
    if inclusion:
        settings["weights"] = {"inclusion": inclusion}
    if decision.slices:  # absent when the project does not slice, so earlier certificates still verify
        settings["slices"] = slice_settings(session, project, decision.slices, decision.slice_epsilon, place)
    if decision.coefficient == "po" and decision.resolved_monitoring() == "anytime":  # the decision in force
        settings["monitoring"] = monitoring_settings(session, project, label_seq, plan, latest, place)
    return settings


def latest_cells(
    session: Session, project: Project, criterion: str, label_seq: int
) -> dict[tuple[int, int], tuple[int, int, bool]]:
    """Each (item, rater) cell of ``criterion`` as of ``label_seq``: its last event's seq, arrival rank, and
    whether it holds a value."""
    latest: dict[tuple[int, int], tuple[int, int, bool]] = {}
    events = session.execute(
        select(LabelEvent.item_id, LabelEvent.rater_id, LabelEvent.seq, LabelEvent.rank, LabelEvent.value).where(
            LabelEvent.project_id == project.id, LabelEvent.criterion == criterion, LabelEvent.seq <= label_seq
        )
    )
    for item, rater, seq, rank, value in events:
        if (item, rater) not in latest or seq > latest[(item, rater)][0]:
            latest[(item, rater)] = (seq, seq if rank is None else rank, value not in (None, ""))
    return latest


def monitoring_settings(
    session: Session,
    project: Project,
    label_seq: int,
    plan: Plan | None,
    latest: dict[tuple[int, int], tuple[int, int, bool]],
    place: dict[int, int],
) -> dict[str, Any]:
    """What the monitored decision at ``label_seq`` reads beyond the labels (docs/method.md §8.2, §10): the
    opening (the first look, or ``label_seq`` when no look came before it), the arrival rank of every label
    of an overlap item or a planned list's item ranked after the opening, the secondaries' planned lists (when
    any; -1 for a list item without a label: a gap), the overlap items in the seeded order that breaks ties,
    the monitor's level, multiplicity and budget; items by their ``place`` among the certified items."""
    decision = project.decision_settings
    opening = min(arrival_order(project, label_seq).opening, label_seq)
    kinds = dict(session.execute(select(Rater.id, Rater.kind).where(Rater.project_id == project.id)).all())
    labeled: dict[int, set[str]] = {}
    for (item, rater), (_, _, present) in latest.items():
        if present:
            labeled.setdefault(item, set()).add("judge" if kinds[rater] == "judge" else f"h{rater}")
    overlap = {item for item, who in labeled.items() if "judge" in who and len(who) >= 3}
    raters = dict(session.execute(select(Rater.id, Rater.external_id).where(Rater.project_id == project.id)).all())
    item_ids = corpus(session, project)[0]
    keys = seeded_item_keys(item_ids.size, arrival_order(project, label_seq).seed)
    tiebreak = [place[int(i)] for i in item_ids[np.argsort(keys, kind="stable")] if int(i) in overlap]
    lists = listed_items(session, project)
    listed = {(int(item), rater) for rater, items, _ in lists for item in items}
    ranks = sorted(
        [place[item], raters[rater], rank]
        for (item, rater), (_, rank, present) in latest.items()
        if present and (item in overlap or (item, rater) in listed) and rank > opening
    )
    settings = {
        "mode": "anytime",
        "alpha": decision.alpha_sig,
        "multiplicity": decision.multiplicity,
        "budget": planned_budget(plan),
        "opening": opening,
        "ranks": ranks,
        "tiebreak": tiebreak,
    }
    if lists:  # absent without planned lists, so earlier certificates still verify
        settings["lists"] = {
            raters[rater]: {"since": since, "items": [place.get(int(i), -1) for i in items]}
            for rater, items, since in lists
        }
    return settings


def slice_settings(
    session: Session, project: Project, by: str, slice_epsilon: dict[str, float] | None, place: dict[int, int]
) -> dict[str, Any]:
    """The project's slices as a certificate freezes them (§3b, §10): ``by``, ``[place, value]`` for each certified
    item with a value, the epsilons.

    A value is named as ``/reliability?by=`` names it: a string as itself, any other JSON value as its JSON text.
    """
    name = feature_name(by)
    assert name, by  # DecisionSettings accepts only "feature:<name>"
    features = session.execute(select(Item.id, Item.features).where(Item.project_id == project.id))
    values = sorted(
        [place[item], value if isinstance(value, str) else orjson.dumps(value).decode()]
        for item, found in features
        if item in place and (value := (found or {}).get(name)) is not None
    )
    epsilons = dict(sorted((slice_epsilon or {}).items()))
    return {"by": by, "values": values, "slice_epsilon": epsilons}


def panel_inclusion(session: Session, plan: Plan | None, place: dict[int, int]) -> list[list[float]] | None:
    """``[place, inclusion probability]`` of each certified item under a Neyman plan (what /reliability weights by)."""
    by_item = plan_inclusion(session, plan)
    if not by_item or plan is None:
        return None
    return sorted([place[int(item)], probability] for item, probability in by_item.items() if int(item) in place)


def existing_certificate(session: Session, project_id: str, settings: dict[str, Any]) -> Certificate | None:
    """The certificate already issued for these settings (label_seq included), if any."""
    return session.scalar(
        select(Certificate).where(
            Certificate.project_id == project_id,
            Certificate.label_seq == settings["label_seq"],
            Certificate.settings_sha256 == sha256_hex(settings),
        )
    )


def stored_certificate(
    session: Session,
    settings: dict[str, Any],
    statement: dict[str, Any],
    *,
    issued_at: datetime,
    retry_window_seconds: float,
) -> tuple[Certificate, bool]:
    """Store ``statement``, computed for ``settings``, and queue ``certificate.created``; ``(certificate,
    created)`` — a twin (same label_seq and settings) stored first wins."""
    pid, result = settings["project"]["id"], statement["predicate"]["result"]
    cid = statement["predicate"]["certificate"]["id"]
    row = Certificate(
        id=cid,
        project_id=pid,
        label_seq=settings["label_seq"],
        settings_sha256=sha256_hex(settings),
        criterion=settings["criterion"],
        decision=result["decision"],
        statement=statement,
        created_at=issued_at,
    )
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError:  # a concurrent twin was issued first
        twin = existing_certificate(session, pid, settings)
        assert twin is not None
        return twin, False
    emit(
        session,
        pid,
        "certificate.created",
        {
            "certificate": cid,
            "label_seq": settings["label_seq"],
            "criterion": settings["criterion"],
            "decision": result["decision"],
            "omega": result["omega"],
            "report_sha256": statement["subject"][1]["digest"]["sha256"],
        },
        retry_window_seconds=retry_window_seconds,
    )
    return row, True


def project_certificate(session: Session, project_id: str, cid: str) -> Certificate:
    """One certificate of the project; 404 otherwise."""
    row = session.get(Certificate, cid)
    if row is None or row.project_id != project_id:
        raise NotFound(f"certificate {echo(cid)} not found")
    return row


def certificates_page(session: Session, project_id: str, *, offset: int, limit: int) -> list[Certificate]:
    """Up to ``limit`` of the project's certificates from ``offset``, oldest first."""
    return list(
        session.scalars(
            select(Certificate)
            .where(Certificate.project_id == project_id)
            .order_by(Certificate.created_at, Certificate.id)
            .offset(offset)
            .limit(limit)
        )
    )
