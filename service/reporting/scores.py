"""The report of a numeric project (docs/method.md §2b, §3d, §7): the score document's decisions and agreement,
per criterion, under the declared protocol; as JSON, CSV (one row per judge-human pair) or an HTML page."""

from __future__ import annotations

import io
from html import escape

from sqlalchemy.orm import Session

from service.core.csv_safety import SafeWriter
from service.core.errors import Invalid
from service.data.models import Project
from service.documents.scores import score_reliability_document
from service.documents.slices import score_slices_block
from service.schemas.scores import ScoreCriterionReport, ScoreProtocol, ScoreReport

SCORE_CSV_COLUMNS = (
    "criterion",
    "judge",
    "human",
    "n_items",
    "ccc",
    "ccc_low",
    "ccc_high",
    "bias",
    "bias_low",
    "bias_high",
    "lower_limit",
    "upper_limit",
    "mae",
    "rmse",
)


def score_report(session: Session, project: Project, criteria: list[str]) -> ScoreReport:
    """Each criterion's decisions and agreement on the numbers, as ``/reliability`` computes them (§2b, §3d)."""
    notes = []
    criteria_out = []
    first = None
    for criterion in criteria:
        doc = score_reliability_document(session, project, criterion)
        first = first or doc
        criteria_out.append(
            ScoreCriterionReport(
                criterion=criterion,
                n_items=doc.n_items,
                n_special=doc.n_special,
                judges=doc.judges,
                icc=doc.icc,
                interval_alpha=doc.interval_alpha,
                interval_alpha_reason=doc.interval_alpha_reason,
                pairs=doc.pairs,
            )
        )
        if not doc.judges:
            notes.append(f"{criterion}: {doc.reason}")
    assert first is not None  # a project has at least one criterion
    by = project.decision_settings.slices
    if by is not None:
        try:
            block = score_slices_block(session, project, criteria[0], by)
            notes.append(f"slices ({by}, {criteria[0]}, {block.correction}): {block.headline}")
        except Invalid as exc:
            notes.append(f"slices ({by}): {exc.detail}")
    notes.append(
        "the decisions are fixed-sample (valid once, at the planned overlap); the anytime-monitored ones are in "
        "/reliability's monitoring"
    )
    return ScoreReport(
        scale="numeric",
        project=project.id,
        project_name=project.name,
        label_seq=project.label_seq,
        protocol=ScoreProtocol(
            scale="numeric",
            value_range=first.value_range,
            handling="exclude",
            aggregation="per criterion",
            intervals="analytic: F for the ICCs, Fisher z for the CCC, t for the Bland-Altman bias and limits",
            rule=first.rule,
            epsilon=first.epsilon,
            q=first.q,
            omega_threshold=first.omega_threshold,
        ),
        criteria=criteria_out,
        notes=notes,
    )


def _cell(value: float | None) -> str:
    return "" if value is None else repr(value)


def score_report_csv(report: ScoreReport) -> str:
    """One row per (criterion, judge, human) pair: its CCC, Bland-Altman bias and limits, MAE and RMSE."""
    out = io.StringIO()
    writer = SafeWriter(out)
    writer.writerow(SCORE_CSV_COLUMNS)
    for c in report.criteria:
        for p in c.pairs:
            writer.writerow(
                (
                    c.criterion,
                    p.judge,
                    p.human,
                    p.n_items,
                    *(_cell(v) for v in (p.ccc, *p.ccc_ci, p.bias, *p.bias_ci, p.lower, p.upper, p.mae, p.rmse)),
                )
            )
    return out.getvalue()


def _num(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4g}"


def score_report_html(report: ScoreReport) -> str:
    """A plain, self-contained HTML page of the numeric report; every value is escaped."""
    p = report.protocol
    fields = [("scale", p.scale), ("range", str(p.value_range)), ("rule", p.rule), ("epsilon", f"{p.epsilon:g}")]
    fields += [("handling", p.handling), ("intervals", p.intervals)]
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>annoplan report: {escape(report.project_name)}</title></head><body>",
        f"<h1>Report: {escape(report.project_name)} <small>({escape(report.project)})</small></h1>",
        f"<p>Labels up to event {report.label_seq}.</p><h2>Protocol</h2><dl>",
        *(f"<dt>{escape(n)}</dt><dd>{escape(v)}</dd>" for n, v in fields),
        "</dl>",
        *(f"<p>{escape(n)}</p>" for n in report.notes),
    ]
    for c in report.criteria:
        parts.append(f"<h2>Criterion {escape(c.criterion)} ({c.n_items} items)</h2>")
        parts.append("<table><tr><th>judge</th><th>decision</th><th>omega</th><th>why</th></tr>")
        parts += [
            f"<tr><td>{escape(j.judge)}</td><td>{escape(j.decision)}</td><td>{_num(j.omega)}</td>"
            f"<td>{escape(j.reason)}</td></tr>"
            for j in c.judges
        ]
        parts.append("</table><table><tr><th>judge</th><th>human</th><th>n</th><th>CCC</th><th>bias</th>")
        parts.append("<th>limits of agreement</th><th>MAE</th><th>RMSE</th></tr>")
        parts += [
            f"<tr><td>{escape(q.judge)}</td><td>{escape(q.human)}</td><td>{q.n_items}</td><td>{_num(q.ccc)}</td>"
            f"<td>{_num(q.bias)}</td><td>[{_num(q.lower)}, {_num(q.upper)}]</td><td>{_num(q.mae)}</td>"
            f"<td>{_num(q.rmse)}</td></tr>"
            for q in c.pairs
        ]
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)
