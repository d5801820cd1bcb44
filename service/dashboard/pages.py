"""The dashboard's HTML: the projects index (one row per project, with its decision, omega, progress and
last label), one project's page (a panel per judge), and the login form."""

from __future__ import annotations

import math
from functools import partial
from html import escape
from typing import Any

from sqlalchemy.orm import Session

from service.core.middleware import CSRF_FIELD
from service.dashboard.charts import FIXED_ONLY, anytime
from service.dashboard.glossary import GLOSSARY_PATH, term_link
from service.dashboard.svg import Chart, chart_svg
from service.data.models import Project
from service.data.queries import last_label_times
from service.documents.history_replays import HistoryReplay
from service.documents.looks import shown_reliability
from service.documents.reliability import DocumentCache, document_key
from service.documents.scores import score_reliability_document
from service.planning.plans import current_plan
from service.schemas.documents import (
    JudgeValidation,
    ReliabilityDocument,
    ScoreJudgeRead,
    ScoreReliabilityDocument,
    Slices,
)
from service.schemas.pairwise import PairwiseBlock
from service.schemas.versions import DriftRead

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:720px;color:#222}
.decision{font-size:1.3em;padding:.3em .5em;border-radius:6px;background:#eef}
.pass{background:#d7f5c8} .reject{background:#f8d0d0} .inconclusive,.insufficient_data{background:#fbeec0}
h2{font-size:1.15em;margin-top:1.8em} h3{font-size:1em;margin:1em 0 .3em} .note{color:#555;font-size:.9em}
.infeasible{background:#f8d0d0;padding:.4em;border-radius:4px} .judge{border-top:2px solid #ccd;margin-top:1.5em}
table{border-collapse:collapse} td,th{padding:.2em .6em;text-align:left;border-bottom:1px solid #ddd}
.downloads{font-size:.85em} .refreshing{background:#e8eefc;padding:.4em;border-radius:4px}"""


def dashboard_page(
    project: Project,
    doc: ReliabilityDocument,
    charts: tuple[Chart, ...],
    notes: dict[str, str],
    etag: str,
    *,
    behind: int,
    replay: HistoryReplay | None = None,
    slices: Slices | str | None = None,
    logout: str | None = None,
    drift: list[DriftRead] | None = None,
) -> str:
    """One project's dashboard: decision per judge with its margins, drift watches, plan and recipe, pool score,
    overlap curve.

    ``notes`` holds the sentences of the ``plan`` and ``recipe_now`` verdicts and the ``monitoring`` mode;
    ``behind`` counts the label events the project has had since the document's label_seq (0: fresh);
    ``replay``: the pool-score history's one-time replay, while it is under way; ``slices``: the first judge's
    decision per slice of the project's ``decision.slices`` feature (docs/method.md §3b), failing slices first,
    or why there is none yet;
    ``logout``: the logout form's CSRF token when the page was opened by a login (no form for a Bearer key);
    ``drift``: the watched judges.
    """
    by_id = {c.id: c for c in charts}
    judges = doc.judges
    pool = doc.human_pool
    summary = (
        "".join(
            f'<tr><td>{escape(v.judge)}</td><td class="{escape(v.decision)}">{escape(_marked(v))}</td>'
            f"<td>{_fmt(v.omega)}</td></tr>"
            for v in judges
        )
        or f'<tr><td colspan="3">{escape(doc.decision)}: {escape(doc.reason or "")}</td></tr>'
    )
    panels = "".join(
        _judge_panel(project, v, by_id[f"margins-{k + 1}"], by_id[f"sequences-{k + 1}"]) for k, v in enumerate(judges)
    )
    history = by_id["pool-history"]
    defined = [(x, y) for x, y in history.rows if y is not None]
    if len(defined) >= 2:
        pool_chart = _figure(project, history)
    else:
        at = f" at label_seq {defined[0][0]:g}" if defined else ""
        pool_chart = (
            f'<p id="pool-history" class="note">human-pool score {_fmt(pool.estimate)}{at}; '
            "the line is drawn from the second point of the label sequence with a defined score.</p>"
        )
    if not doc.plan:
        progress = "<p>No plan yet.</p>"
    else:
        progress = (
            _figure(project, by_id["progress"]) if by_id["progress"].rows else "<p>No secondary annotator yet.</p>"
        )
    curve = by_id["overlap-curve"]
    if curve.rows:
        curve_figure = _figure(project, curve)
    elif doc.plan:
        curve_figure = (
            '<p id="overlap-curve" class="note">No overlap rate of the curve gives each secondary '
            "annotator an item of this corpus.</p>"
        )
    else:
        curve_figure = (
            '<p id="overlap-curve" class="note">No plan yet: the curve is simulated for the plan in force.</p>'
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>annoplan: {escape(project.name)}</title><style>{STYLE}</style>
</head><body data-etag="{escape(etag)}" data-reliability-url="/projects/{escape(project.id)}/reliability"
 data-refreshing="{"true" if behind else "false"}" data-history-rebuilding="{"true" if replay else "false"}">
<div class="note"><a href="/dashboard">all projects</a> &middot; <a href="{GLOSSARY_PATH}">glossary</a>{logout_form(logout)}</div>
<h1>{escape(project.name)}</h1>
<p>{term_link("label_seq", "label_seq")} <span id="label-seq">{doc.label_seq}</span> &middot; {doc.n_items} items &middot;
 criterion {escape(doc.criterion)} &middot; {term_link("rule", "Rule")} {escape(doc.rule)},
 {term_link("coefficient", "Coefficient")} {escape(doc.coefficient)}, pass when
 {term_link("omega", "Omega")} &ge; {doc.omega_threshold}</p>
{_freshness(doc, behind)}<div id="decision"><table><tr><th>judge</th><th>{term_link("decision", "The decision")}</th><th>{term_link("omega", "Omega")} (share of humans won; certified won under anytime monitoring)</th></tr>{summary}</table></div>
<p id="monitoring" class="note">{escape(notes["monitoring"])} ({term_link("monitoring", "Monitoring")})</p>
{slice_table(slices)}{_selective(project, by_id["selective-coverage"])}{panels}
{_pairwise_panel(doc.pairwise)}{_drift_panel(drift or [])}<h2>{term_link("Plan", "Plan")} and {term_link("overlap", "Overlap")}</h2>
<p id="plan-verdict" class="{_verdict_class(notes["plan"])}">{escape(notes["plan"])}</p>
<p id="recipe-now" class="{_verdict_class(notes["recipe_now"])}">{escape(notes["recipe_now"])}</p>
<h3>Progress of each {term_link("secondary annotator", "Secondary annotator")} through the plan</h3>{progress}
<h2>{term_link("Human-pool score", "Human-pool score")} over label_seq</h2>
<p class="note">The mean over held-out humans of their agreement with the other humans
 ({escape(doc.coefficient)}) on the labels in hand at each point of the label sequence;
 95% interval now [{_fmt((pool.ci or [None, None])[0])}, {_fmt((pool.ci or [None, None])[1])}].</p>
{_rebuilding(replay)}{pool_chart}
<h2>Reliability vs {term_link("overlap", "Overlap")}</h2>
<p class="note">Simulated for the plan in force: the share of simulated studies whose human-pool score lands
 within delta of the score at full overlap, against the overlap items each secondary labels; the red dashed
 line is the 0.95 target, the purple one the plan's own overlap m.</p>
{curve_figure}
<script src="/static/dashboard.js"></script>
<script src="/static/chart_png.js"></script>
</body></html>"""


def index_page(rows: list[dict[str, Any]], next_page: str | None, *, logout: str | None = None) -> str:
    """The projects the key can see: name, decision per judge, omega, progress and the last label's time."""
    body = (
        "".join(
            f'<tr><td><a href="/projects/{escape(r["id"])}/dashboard">{escape(r["name"])}</a></td>'
            f"<td>{escape(r['decision'])}</td><td>{escape(r['omega'])}</td><td>{escape(r['progress'])}</td>"
            f"<td>{escape(r['last_label'])}</td></tr>"
            for r in rows
        )
        or '<tr><td colspan="5">No project yet: create one with POST /projects (see the API docs).</td></tr>'
    )
    more = f'<p><a id="next" href="{escape(next_page)}">more projects</a></p>' if next_page else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>annoplan: projects</title><style>{STYLE}</style></head><body>
<div class="note"><a href="{GLOSSARY_PATH}">glossary</a>{logout_form(logout)}</div>
<h1>Projects</h1>
<table id="projects"><tr><th>project</th><th>{term_link("decision", "The decision")}</th><th>{term_link("omega", "Omega")}</th>
<th>progress (least advanced {term_link("secondary", "Secondary annotator")})</th>
<th>last label (UTC)</th></tr>{body}</table>{more}
<p class="note"><a href="/docs">API documentation</a> &middot; <a href="{GLOSSARY_PATH}">glossary</a></p>
</body></html>"""


def login_page(csrf_token: str, message: str = "") -> str:
    """The login form: the API key is posted once (never in a URL); the cookie then holds a login token."""
    note = f'<p style="color:#a40000">{escape(message)}</p>' if message else ""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>annoplan login</title></head>
<body style="font-family:system-ui,sans-serif;margin:2em"><h1>annoplan</h1>{note}
<form method="post" action="/login"><label>API key <input id="key" name="key" type="password" autocomplete="off"></label>
<input type="hidden" name="{CSRF_FIELD}" value="{escape(csrf_token)}"><button id="login" type="submit">Log in</button></form></body></html>"""


def logout_form(csrf_token: str | None) -> str:
    """The logout button (a POST with the login's CSRF token), or nothing without a login."""
    if csrf_token is None:
        return ""
    return (
        f' <form id="logout" method="post" action="/logout" style="display:inline">'
        f'<input type="hidden" name="{CSRF_FIELD}" value="{escape(csrf_token)}">'
        '<button type="submit">Log out</button></form>'
    )


def error_page(status_code: int, detail: str) -> str:
    """A minimal HTML error page; the detail (which may quote the request) is escaped."""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>annoplan: {status_code}</title></head>
<body><h1>{status_code}</h1><p>{escape(detail)}</p></body></html>"""


def _judge_panel(project: Project, validation: JudgeValidation, margins: Chart, sequences: Chart) -> str:
    decision = validation.decision
    reason = f" ({escape(validation.reason)})" if validation.reason else ""
    return f"""<section class="judge" id="judge-{escape(margins.id.removeprefix("margins-"))}">
<h2>Judge {escape(validation.judge)}</h2>
<p class="decision {escape(decision)}">{term_link("decision", "The decision")}: <b>{escape(_marked(validation))}</b>{reason} &middot; {term_link("omega", "Omega")} {_fmt(validation.omega)}</p>
{_rewritten(validation)}<h3>{escape(margins.title)}</h3>
<p class="note">{term_link("Margins", "Margin")} of the held-out humans: {escape(_margins_note(validation))}</p>
{_figure(project, margins)}{_sequences(project, validation, sequences)}</section>"""


def _rewritten(validation: JudgeValidation) -> str:
    """The mark of a shown decision that the labels now decide otherwise (docs/method.md §8.3); empty otherwise."""
    rewritten = validation.rewritten_at
    if not rewritten:
        return ""
    return (
        f'<p class="rewritten" id="rewritten">rewritten since label_seq {rewritten.label_seq}: '
        f"{escape(rewritten.changed)}</p>\n"
    )


def _margins_note(validation: JudgeValidation) -> str:
    """What the margins chart's dots and bars are, and how a rater is won: the e-values in anytime mode (with
    the fixed-sample intervals, valid at the planned overlap only, beside), else the fixed-sample rule."""
    if not anytime(validation):
        test = (
            " (by a one-sided test at q, Benjamini-Yekutieli over the raters)" if validation.rule == "alt-test" else ""
        )
        return (
            "Each dot is the estimate and each bar its fixed-sample 95% interval, "
            f"{FIXED_ONLY}; the judge wins a rater whose value lies above -epsilon{test}."
        )
    fixed = "; ".join(
        f"{r.rater} [{_fmt((r.ci or [None, None])[0])}, {_fmt((r.ci or [None, None])[1])}]" for r in validation.raters
    )
    return (
        "Each dot is the mean of the per-item differences in arrival order and each bar its confidence "
        "sequence now, valid at every look at level alpha for that rater. A rater is won or lost when its "
        "e-value crosses its e-BH threshold over the humans (what the decision reads); where its band does "
        "not yet tell the same, its status says so. "
        f"Fixed-sample 95% intervals, {FIXED_ONLY}: {fixed or 'none'}."
    )


def _sequences(project: Project, validation: JudgeValidation, chart: Chart) -> str:
    monitoring = validation.monitoring
    if not monitoring:
        return ""
    statuses = ", ".join(f"{r.rater} {r.status}" for r in monitoring.raters)
    looks = monitoring.looks
    return (
        f'<h3>{escape(chart.title)}</h3><p class="note">{escape(monitoring.mode)} monitoring: '
        f"{escape(monitoring.decision)} after {looks} look{'s' if looks != 1 else ''} ({escape(statuses)}); a rater is "
        "won or lost when its e-value crosses the threshold, and the band (a "
        f"{term_link('confidence sequence', 'Confidence sequence')}) is drawn at level alpha for all looks at once.</p>"
        f"{_figure(project, chart)}"
    )


def slice_table(slices: Slices | str | None) -> str:
    """The slices as a table, failing ones first (the block's order), under its headline; or why there are none
    yet (a feature no item has: the page says so instead of failing)."""
    if slices is None:
        return ""
    if isinstance(slices, str):
        headline, rows, correction = slices, "", ""
    else:
        headline, correction = slices.headline, slices.correction
        rows = "".join(
            f'<tr><td>{escape(s.value)}</td><td class="{escape(s.decision)}">{escape(s.decision)}</td>'
            f"<td>{_fmt(s.omega)}</td><td>{_fmt(s.d)}</td><td>{s.n_items}</td></tr>"
            for s in slices.slices
        )
    return (
        f'<h2>Slices</h2><p id="slices-headline">{escape(headline)}</p>'
        f'<table id="slices"><tr><th>slice</th><th>decision</th><th>omega</th><th>d</th><th>usable items</th></tr>'
        f'{rows}</table><p class="note">Corrected across slices: {escape(correction)} (docs/method.md §3b).</p>'
    )


def _selective(project: Project, chart: Chart) -> str:
    """The selective coverage curve (docs/method.md §3c), when a judge's labels carry confidences."""
    if not chart.rows:
        return ""
    return f'<h2>Selective evaluation</h2><div id="selective">{_figure(project, chart)}</div>'


def _interval(ci: list[float | None]) -> str:
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


def _pairwise_panel(block: PairwiseBlock | None) -> str:
    """A pairwise project's judges (docs/method.md §13): position consistency and bias, accuracy against the
    human majority in both orders, and the systems' Bradley-Terry strengths; aggregates only."""
    if block is None:
        return ""
    if not block.judges:
        return f'<h2>Pairwise judges</h2><p id="pairwise" class="note">{escape(block.reason or "")}</p>'
    judges, rankings = [], []
    for j in block.judges:
        pos, acc = j.position, j.accuracy
        right = (None, None, None) if acc is None else (acc.right_ab, acc.right_ba, acc.right_both)
        bias = (
            f"{pos.first_favoured} first / {pos.second_favoured} second"
            + (f", favours the {pos.bias_direction} (p {pos.bias_p:.3g})" if pos.bias_direction else "")
            if pos.consistency is not None
            else escape(pos.reason or "")
        )
        judges.append(
            f"<tr><td>{escape(j.judge)}</td><td>{pos.n_items}</td><td>{_fmt(pos.consistency)}</td>"
            f"<td>{bias}</td><td>{_fmt(right[0])}</td><td>{_fmt(right[1])}</td><td>{_fmt(right[2])}</td></tr>"
        )
        for r in j.rankings:
            if r.source == "humans" and j is not block.judges[0]:
                continue  # the humans' ranking is every judge's: shown once
            name = escape(j.judge)
            whose = {"judge": name, "humans": "the humans' majority", "humans+judge": f"the humans and {name} (PPI)"}[
                r.source
            ]
            rows = (
                "".join(
                    f"<tr><td>{escape(s.system)}</td><td>{_fmt(s.win_rate)}</td><td>{_fmt(s.strength)}</td>"
                    f"<td>{_interval(s.ci)}</td></tr>"
                    for s in r.systems
                )
                or f'<tr><td colspan="4">{escape(r.reason or "")}</td></tr>'
            )
            rankings.append(
                f"<h3>Systems ranked by {whose} ({r.n_comparisons} comparisons)</h3><table><tr><th>system</th>"
                f"<th>win rate</th><th>strength</th><th>95% interval</th></tr>{rows}</table>"
            )
    return f"""<h2>Pairwise judges</h2>
<p class="note">Each judge shown an item's answers in both orders (AB, BA): the share with the same verdict in
 both, the flips that kept the answer shown first or second (exact binomial p), and its accuracy against the
 human majority of {block.n_reference} items with A first, B first and in both orders; the decision above reads
 the AB order (docs/method.md &sect;13).</p>
<table id="pairwise"><tr><th>judge</th><th>items in both orders</th><th>consistency</th><th>flips</th>
<th>right AB</th><th>right BA</th><th>right both</th></tr>{"".join(judges)}</table>
<div id="pairwise-systems">{"".join(rankings)}</div>
"""


def _drift_panel(drift: list[DriftRead]) -> str:
    """The watched judges: agreement with the primary and whether the drift detector has alarmed (§12)."""
    if not drift:
        return ""
    rows = "".join(
        f"<tr><td>{escape(d.judge)}</td><td>{d.baseline:g}</td><td>{d.drop:g}</td><td>{d.n_labels}</td>"
        f"<td>{_fmt(d.agreement)}</td>"
        + (
            f'<td class="reject">drifted at label_seq {d.alarm_label_seq}</td></tr>'
            if d.drifted
            else f'<td class="pass">no alarm (log M {_fmt(d.log_detector)} of {_fmt(math.log(d.threshold))})</td></tr>'
        )
        for d in drift
    )
    return f"""<h2>Drift watches</h2>
<p class="note">Each watched judge's agreement with the primary, pairs in the order their later label arrived;
 a CUSUM e-detector alarms at horizon/alpha, so without drift any alarm within the horizon has probability at
 most alpha (docs/method.md &sect;12).</p>
<table id="drift"><tr><th>judge</th><th>baseline</th><th>drop</th><th>pairs</th><th>agreement</th><th>status</th></tr>
{rows}</table>
"""


def _figure(project: Project, chart: Chart) -> str:
    base = f"/projects/{escape(project.id)}/dashboard/charts/{escape(chart.id)}"
    return (
        f'{chart_svg(chart)}<p class="downloads">download: <a href="{base}.csv" download>CSV</a> &middot; '
        f'<a href="{base}.svg" download>SVG</a> &middot; '
        f'<a class="png" href="#" data-chart="{escape(chart.id)}">PNG</a></p>'
    )


def _freshness(doc: ReliabilityDocument, behind: int) -> str:
    """Nothing for a fresh document; else the note that this look is older than the labels in hand."""
    if not behind:
        return ""
    return (
        f'<p id="freshness" class="refreshing">Shown as of label_seq {doc.label_seq}: {behind} label '
        f"event{'s' if behind != 1 else ''} since, refreshing. Everything on this page (decision, margins, "
        "intervals) is valid as of that label_seq; the page reloads when the fresh document is ready.</p>"
    )


def _rebuilding(replay: HistoryReplay | None) -> str:
    """Nothing for a whole history; else that the points before the first stored one are being replayed."""
    if replay is None:
        return ""
    total = "reading the events" if replay.total is None else f"{replay.done:,} of {replay.total:,} events"
    return (
        f'<p id="history-rebuilding" class="refreshing">History being rebuilt: {total}. The line below '
        "draws only the points stored so far; the page reloads when the replay is done.</p>\n"
    )


def _verdict_class(note: str) -> str:
    return "infeasible" if "infeasible:" in note else ""


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def index_rows(
    session: Session, projects: list[Project], documents: DocumentCache, *, n_resamples: int, wait: float
) -> list[dict[str, str]]:
    """Each project's name, decision per judge, omega, progress and last label time, from the document a
    dashboard shows (:func:`~service.documents.looks.shown_reliability`: maybe an older one, marked)."""
    last = last_label_times(session, [p.id for p in projects])
    rows = []
    for project in projects:
        if project.scale == "numeric":  # its score document, cached as /reliability caches it
            criterion = project.criteria[0]
            key = document_key(session, project, current_plan(session, project.id), criterion, "reliability")
            doc = documents.get_or_build(key, partial(score_reliability_document, session, project, criterion))
        else:
            doc, _ = shown_reliability(session, project, documents, n_resamples=n_resamples, wait=wait)
        when = last[project.id].strftime("%Y-%m-%d %H:%M") if project.id in last else "no label yet"
        row = {"id": project.id, "name": project.name, **_status(doc), "last_label": when}
        if doc.label_seq < project.label_seq:
            row["decision"] += f" (at label_seq {doc.label_seq}; refreshing)"
        rows.append(row)
    return rows


def _status(doc: ReliabilityDocument | ScoreReliabilityDocument) -> dict[str, str]:
    judges: list[JudgeValidation] | list[ScoreJudgeRead] = doc.judges
    if judges:
        decision = "; ".join(f"{v.judge}: {_marked(v)}" for v in judges)
        omega = "; ".join("n/a" if v.omega is None else f"{v.omega:.2f}" for v in judges)
    else:
        decision, omega = f"{_marked(doc)} ({doc.reason})", "n/a"
    plan = doc.plan
    progress = f"{plan.m_done_min} / {plan.m_target} items" if plan and plan.m_target else "no plan"
    if plan and (plan.m_budget or 0) > (plan.m_target or 0):
        progress += f" (lists grow to {plan.m_budget} while the decision is open)"
    return {"decision": decision, "omega": omega, "progress": progress}


def _marked(validation: JudgeValidation | ReliabilityDocument | ScoreJudgeRead | ScoreReliabilityDocument) -> str:
    """A decision as every surface says it: with its provisional mark while it is provisional, and the decision
    first shown when it differs (docs/method.md §8.3); a numeric decision has neither."""
    if isinstance(validation, ScoreJudgeRead | ScoreReliabilityDocument):
        return validation.decision
    marked = f"{validation.decision} (provisional)" if validation.provisional else validation.decision
    rewritten = validation.rewritten_at
    if rewritten:
        shown = rewritten.shown
        marked += f" (rewritten: {shown.decision} shown at label_seq {shown.label_seq})"
    return marked
