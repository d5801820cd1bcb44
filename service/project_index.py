"""The projects index: one row per project, with its decision, omega, progress and last label, as display text."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from service.dashboard_charts import shown_reliability
from service.models import Project
from service.queries import last_label_times
from service.reliability import DocumentCache


def index_rows(session: Session, projects: list[Project], documents: DocumentCache, *,
               n_resamples: int, wait: float) -> list[dict[str, str]]:
    """Each project's name, decision per judge, omega, progress and last label time, from the document a
    dashboard shows (:func:`~service.dashboard_charts.shown_reliability`: maybe an older one, marked)."""
    last = last_label_times(session, [p.id for p in projects])
    rows = []
    for project in projects:
        doc, _ = shown_reliability(session, project, documents, n_resamples=n_resamples, wait=wait)
        when = last[project.id].strftime("%Y-%m-%d %H:%M") if project.id in last else "no label yet"
        row = {"id": project.id, "name": project.name, **_status(doc), "last_label": when}
        if doc["label_seq"] < project.label_seq:
            row["decision"] += f" (at label_seq {doc['label_seq']}; refreshing)"
        rows.append(row)
    return rows


def _status(doc: dict[str, Any]) -> dict[str, str]:
    judges = doc["judges"]
    if judges:
        decision = "; ".join(f"{v['judge']}: {v['decision']}" for v in judges)
        omega = "; ".join("n/a" if v["omega"] is None else f"{v['omega']:.2f}" for v in judges)
    else:
        decision, omega = f"{doc['decision']} ({doc['reason']})", "n/a"
    plan = doc.get("plan")
    progress = f"{plan['m_done_min']} / {plan['m_target']} items" if plan and plan.get("m_target") else "no plan"
    return {"decision": decision, "omega": omega, "progress": progress}
