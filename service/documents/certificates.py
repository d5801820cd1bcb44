"""Certificates: the label snapshot and settings of a project, frozen into an in-toto statement."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from planner.certificate import BIT_GENERATOR, certificate_statement, label_snapshot, sha256_hex
from service.core.errors import Conflict, Invalid, NotFound, echo
from service.data.models import Certificate, Item, LabelEvent, Plan, Project, Rater, new_public_id, utcnow
from service.data.outbox import emit
from service.documents.monitoring import planned_budget
from service.matrices.arrival import arrival_order, seeded_item_keys
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
    n_slices = len({str(v) for v in values.values()}) if isinstance(values, dict) else 0
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
    if project.scale == "numeric" and decision.slices:
        raise Conflict(
            "a numeric project is not decided by slice yet: certify it without decision.slices", code="numeric_scale"
        )
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
    inclusion = panel_inclusion(session, plan)
    if inclusion:
        settings["weights"] = {"inclusion": inclusion}
    if decision.slices:  # absent when the project does not slice, so earlier certificates still verify
        settings["slices"] = slice_settings(session, project, decision.slices, decision.slice_epsilon)
    if decision.coefficient == "po" and decision.resolved_monitoring() == "anytime":  # the decision in force
        settings["monitoring"] = monitoring_settings(session, project, criterion, label_seq, plan)
    return settings


def monitoring_settings(
    session: Session, project: Project, criterion: str, label_seq: int, plan: Plan | None
) -> dict[str, Any]:
    """What the monitored decision at ``label_seq`` reads beyond the labels (docs/method.md §8.2, §10): the
    opening (the first look, or ``label_seq`` when no look came before it), the arrival rank of every label
    of an overlap item ranked after the opening, the overlap items in the seeded order that breaks ties, the
    monitor's level, multiplicity and budget."""
    decision = project.decision_settings
    opening = min(arrival_order(project, label_seq).opening, label_seq)
    latest: dict[tuple[int, int], tuple[int, int, bool]] = {}  # cell -> (seq, rank, has a value) as of label_seq
    events = session.execute(
        select(LabelEvent.item_id, LabelEvent.rater_id, LabelEvent.seq, LabelEvent.rank, LabelEvent.value).where(
            LabelEvent.project_id == project.id, LabelEvent.criterion == criterion, LabelEvent.seq <= label_seq
        )
    )
    for item, rater, seq, rank, value in events:
        if (item, rater) not in latest or seq > latest[(item, rater)][0]:
            latest[(item, rater)] = (seq, seq if rank is None else rank, value not in (None, ""))
    kinds = dict(session.execute(select(Rater.id, Rater.kind).where(Rater.project_id == project.id)).all())
    labeled: dict[int, set[str]] = {}
    for (item, rater), (_, _, present) in latest.items():
        if present:
            labeled.setdefault(item, set()).add("judge" if kinds[rater] == "judge" else f"h{rater}")
    overlap = {item for item, who in labeled.items() if "judge" in who and len(who) >= 3}
    external = dict(session.execute(select(Item.id, Item.external_id).where(Item.project_id == project.id)).all())
    raters = dict(session.execute(select(Rater.id, Rater.external_id).where(Rater.project_id == project.id)).all())
    item_ids = corpus(session, project)[0]
    keys = seeded_item_keys(item_ids.size, arrival_order(project, label_seq).seed)
    tiebreak = [external[int(i)] for i in item_ids[np.argsort(keys, kind="stable")] if int(i) in overlap]
    ranks = sorted(
        [external[item], raters[rater], rank]
        for (item, rater), (_, rank, present) in latest.items()
        if present and item in overlap and rank > opening
    )
    return {
        "mode": "anytime",
        "alpha": decision.alpha_sig,
        "multiplicity": decision.multiplicity,
        "budget": planned_budget(plan),
        "opening": opening,
        "ranks": ranks,
        "tiebreak": tiebreak,
    }


def slice_settings(
    session: Session, project: Project, by: str, slice_epsilon: dict[str, float] | None
) -> dict[str, Any]:
    """The project's slices as a certificate freezes them (§3b, §10): ``by``, each item's value, the epsilons.

    A value is named as ``/reliability?by=`` names it: a string as itself, any other JSON value as its JSON text.
    """
    name = feature_name(by)
    assert name, by  # DecisionSettings accepts only "feature:<name>"
    features = session.execute(select(Item.external_id, Item.features).where(Item.project_id == project.id))
    values = {
        ext: value if isinstance(value, str) else orjson.dumps(value).decode()
        for ext, found in features
        if (value := (found or {}).get(name)) is not None
    }
    epsilons = dict(sorted((slice_epsilon or {}).items()))
    return {"by": by, "values": dict(sorted(values.items())), "slice_epsilon": epsilons}


def panel_inclusion(session: Session, plan: Plan | None) -> dict[str, float] | None:
    """External item id -> inclusion probability under a Neyman plan (what /reliability weights by)."""
    by_item = plan_inclusion(session, plan)
    if not by_item or plan is None:
        return None
    external = session.execute(select(Item.id, Item.external_id).where(Item.project_id == plan.project_id))
    return {ext: by_item[int(iid)] for iid, ext in sorted(external, key=lambda row: row[1]) if int(iid) in by_item}


def existing_certificate(session: Session, project_id: str, settings: dict[str, Any]) -> Certificate | None:
    """The certificate already issued for these settings (label_seq included), if any."""
    return session.scalar(
        select(Certificate).where(
            Certificate.project_id == project_id,
            Certificate.label_seq == settings["label_seq"],
            Certificate.settings_sha256 == sha256_hex(settings),
        )
    )


def issue_certificate(
    session: Session, settings: dict[str, Any], snapshot: list[dict[str, Any]], *, retry_window_seconds: float
) -> tuple[Certificate, bool]:
    """Store the statement and queue ``certificate.created``; ``(certificate, created)`` — an existing twin wins."""
    pid, now = settings["project"]["id"], utcnow()
    cid = new_public_id("cert")
    statement = certificate_statement(snapshot, settings, certificate={"id": cid, "issued_at": now.isoformat()})
    result = statement["predicate"]["result"]
    row = Certificate(
        id=cid,
        project_id=pid,
        label_seq=settings["label_seq"],
        settings_sha256=sha256_hex(settings),
        criterion=settings["criterion"],
        decision=result["decision"],
        statement=statement,
        created_at=now,
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
