"""The dashboard page: decision, margins, pool score over time, progress, reliability vs overlap."""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from planner.decision import validate_judge
from planner.simulate import COEFFICIENTS, simulate
from service.charts import interval_chart, line_chart, progress_bar
from service.matrix import cell_indices, corpus
from service.models import Plan, Project
from service.reliability import num
from service.schemas import DecisionSettings
from service.security_headers import CSRF_FIELD
from service.sql import driver_rows

HISTORY_POINTS = 8
CURVE_RHOS = (0.02, 0.05, 0.1, 0.15, 0.25, 0.35, 0.5)


def pool_history(session: Session, project: Project, criterion: str) -> list[tuple[float, float | None]]:
    """The human-pool score at up to 8 points of the label sequence, replayed from the events."""
    events = driver_rows(
        session,
        "SELECT seq, item_id, rater_id, value FROM label_events WHERE project_id = ? AND criterion = ? ORDER BY seq",
        (project.id, criterion),
    )
    item_ids, raters = corpus(session, project)
    judges = [k for k, r in enumerate(raters) if r.kind == "judge"]
    humans = [k for k, r in enumerate(raters) if r.kind in ("primary", "human")]
    if not events or not judges or len(humans) < 2:
        return []
    decision = DecisionSettings(**project.decision)
    seqs = np.fromiter((e[0] for e in events), np.int64, len(events))
    rows, cols, codes = cell_indices(project, item_ids, raters, [e[1:] for e in events])
    flat = rows * len(raters) + cols
    raw = np.full((item_ids.size, len(raters)), -1, dtype=np.int64)
    cuts = np.unique(np.quantile(seqs, np.linspace(0, 1, HISTORY_POINTS + 1)[1:], method="higher"))
    points: list[tuple[float, float | None]] = []
    start = 0
    for cut in cuts:
        end = int(np.searchsorted(seqs, cut, side="right"))
        # Events in seq order: the last event of a cell in this stretch is its value at the cut.
        _, last = np.unique(flat[start:end][::-1], return_index=True)
        latest = start + (end - start - 1 - last)
        raw.flat[flat[latest]] = codes[latest]
        start = end
        v = validate_judge(np.where(raw >= len(project.labels), -1, raw), judge=judges[0], humans=humans,
                           n_labels=len(project.labels), rule=decision.rule, coefficient=decision.coefficient,
                           epsilon=decision.resolved_epsilon(), n_resamples=20, rng=0)
        points.append((float(cut), num(v.human_pool.estimate)))
    return points


def overlap_curve(project: Project, plan: Plan | None) -> list[tuple[float, float | None]]:
    """Simulated reliability of the human-pool score against overlap rate, for the plan in force."""
    if plan is None:
        return []
    recipe = plan.recipe
    moments = recipe.get("moments", {})
    coefficient = project.decision.get("coefficient", "po")
    n_items = min(int(recipe.get("n_items", 500)), 1000)
    # A small corpus has no item per secondary at the lowest rates: those points are left out.
    rhos = [rho for rho in CURVE_RHOS if round(rho * n_items) >= 1]
    if not rhos:
        return []
    result = simulate(
        n_items=n_items, n_humans=max(int(recipe.get("n_humans", 3)), 2),
        n_labels=len(project.labels), p_h=moments.get("p_h", 0.85), p_j=moments.get("p_j", 0.9),
        rho=rhos, design=plan.design,
        coefficient=coefficient if coefficient in COEFFICIENTS else "po",
        delta=project.target.get("delta", 0.05), trials=100, rng=plan.seed % 2**32,
    )
    return [(c.rho, num(c.reliability)) for c in result.cells]


def dashboard_page(project: Project, doc: dict[str, Any], history: list, curve: list, etag: str) -> str:
    """The whole dashboard as one HTML page with inline SVG; ``/static/dashboard.js`` polls for changes."""
    margins = interval_chart(
        "margins",
        [(r["rater"], r["d"] if r["d"] is not None else r.get("rho_f"), *(r["ci"] or [None, None])) for r in doc["raters"]],
        marks=[(-(doc.get("epsilon") or 0.0), "-epsilon"), (0.0, "0")],
    )
    plan = doc.get("plan") or {}
    progress = progress_bar("progress", plan.get("m_done_min", 0), plan.get("m_target") or 0) if plan else \
        "<p>No plan yet.</p>"
    omega = "n/a" if doc.get("omega") is None else f"{doc['omega']:.2f}"
    pool = doc.get("human_pool", {})
    recipe_now = doc.get("recipe_now", {})
    more = recipe_now.get("more_overlap_needed")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>annoplan: {escape(project.name)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:640px}} .decision{{font-size:1.6em;padding:.4em;border-radius:6px;background:#eef}}
.pass{{background:#d7f5c8}} .reject{{background:#f8d0d0}} .inconclusive,.insufficient_data{{background:#fbeec0}} h2{{font-size:1.1em;margin-top:1.6em}}</style>
</head><body data-etag="{escape(etag)}" data-reliability-url="/projects/{escape(project.id)}/reliability">
<h1>{escape(project.name)}</h1>
<div id="decision" class="decision {escape(doc['decision'])}">decision: <b>{escape(doc['decision'])}</b> &middot; omega {omega}
 (threshold {doc.get('omega_threshold')}) &middot; rule {escape(str(doc.get('rule')))}, coefficient {escape(str(doc.get('coefficient')))}</div>
<p>{escape(doc.get('reason') or '')}</p>
<p>label_seq <span id="label-seq">{doc['label_seq']}</span>; human-pool score {_fmt(pool.get('estimate'))}
 [{_fmt((pool.get('ci') or [None, None])[0])}, {_fmt((pool.get('ci') or [None, None])[1])}];
 overlap still needed by the pilot recipe: {'n/a' if more is None else more} items per annotator.</p>
<h2>Per-rater margins d_k with 95% intervals</h2>{margins}
<h2>Human-pool score over label_seq</h2>{line_chart("pool-history", history, x_label="label_seq", y_label="pool score")}
<h2>Plan progress (least advanced secondary)</h2>{progress}
<h2>Reliability vs overlap rate (simulated for the plan in force)</h2>
{line_chart("overlap-curve", curve, x_label="overlap rate rho", y_label="reliability", y_range=(0.0, 1.0), target=0.95)}
<script src="/static/dashboard.js"></script>
</body></html>"""


def login_page(csrf_token: str, message: str = "") -> str:
    """The login form: the API key goes into an HttpOnly cookie, never into a URL."""
    note = f'<p style="color:#a40000">{escape(message)}</p>' if message else ""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>annoplan login</title></head>
<body style="font-family:system-ui,sans-serif;margin:2em"><h1>annoplan</h1>{note}
<form method="post" action="/login"><label>API key <input id="key" name="key" type="password" autocomplete="off"></label>
<input type="hidden" name="{CSRF_FIELD}" value="{escape(csrf_token)}"><button id="login" type="submit">Log in</button></form></body></html>"""


def error_page(status_code: int, detail: str) -> str:
    """A minimal HTML error page; the detail (which may quote the request) is escaped."""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>annoplan: {status_code}</title></head>
<body><h1>{status_code}</h1><p>{escape(detail)}</p></body></html>"""


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"
