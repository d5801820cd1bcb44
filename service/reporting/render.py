"""The report rendered for people and spreadsheets: the per-criterion tables as CSV, and an HTML page."""

from __future__ import annotations

import io
from html import escape

from service.core.csv_safety import SafeWriter
from service.schemas.report import Comparison, Report, Stat

CSV_COLUMNS = ("criterion", "judge", "human", "human_value", "judge_value", "count")


def report_csv(report: Report) -> str:
    """One row per (criterion, judge, human value, judge value) cell of the full tables, zeros included."""
    out = io.StringIO()
    writer = SafeWriter(out)
    writer.writerow(CSV_COLUMNS)
    for judge in report.judges:
        for c in judge.criteria:
            for human_value, row in zip(c.table.categories, c.table.counts, strict=True):
                for judge_value, count in zip(c.table.categories, row, strict=True):
                    writer.writerow((c.criterion, judge.judge, judge.human, human_value, judge_value, count))
    return out.getvalue()


# --------------------------------------------------------------------------- HTML

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #bbb;padding:.25em .6em;text-align:right}
th{background:#f1f1f1}caption{text-align:left;font-weight:bold;padding:.3em 0}.ok{color:#075}.no{color:#a00}
dl{display:grid;grid-template-columns:max-content auto;gap:.15em 1em}dt{font-weight:bold}dd{margin:0}
"""


def _num(value: float | None, digits: int = 4) -> str:
    return "undefined" if value is None else f"{value:.{digits}g}"


def _value(value: float | None, reason: str | None) -> str:
    return escape(_num(value) if value is not None else f"undefined ({reason})")


def _stat(stat: Stat) -> str:
    return _value(stat.value, stat.reason)


def _pair(value: tuple[float, float] | None, reason: str | None) -> str:
    return escape(f"[{_num(value[0])}, {_num(value[1])}]" if value is not None else f"undefined ({reason})")


def _decision_table(c: Comparison, caption: str) -> str:
    cats = c.table.categories
    head = "".join(f"<th>{escape(v)}</th>" for v in cats)
    rows = "".join(
        f"<tr><th>{escape(h)}</th>" + "".join(f"<td>{n}</td>" for n in row) + f"<td>{sum(row)}</td></tr>"
        for h, row in zip(cats, c.table.counts, strict=True)
    )
    totals = "".join(f"<td>{sum(col)}</td>" for col in zip(*c.table.counts, strict=True))
    return (
        f"<table><caption>{escape(caption)}</caption>"
        f"<tr><th>human \\ judge</th>{head}<th>total</th></tr>{rows}"
        f"<tr><th>total</th>{totals}<td>{c.table.n}</td></tr></table>"
    )


def _statistics(c: Comparison) -> str:
    k, b, r = c.kappa, c.bounds, c.rates
    rows = [
        ("N / scored N", f"{c.n_items} / {c.n_eff}"),
        ("accuracy", _stat(c.accuracy)),
        (c.association.statistic, _value(c.association.value, c.association.reason)),
        ("kappa", _value(k.value, k.reason)),
        (f"kappa {k.confidence_level:.0%} interval", _pair(k.interval, k.reason)),
        ("positive rate human / judge", f"{_num(k.human_positive_rate)} / {_num(k.judge_positive_rate)}"),
        ("F1 (positive label)", _stat(c.f1_met)),
        ("abstain human / judge", f"{_num(r.human_abstain)} / {_num(r.judge_abstain)}"),
        ("invalid human / judge", f"{_num(r.human_invalid)} / {_num(r.judge_invalid)}"),
        ("coverage", _num(r.coverage)),
        ("covered accuracy", _stat(b.covered_accuracy)),
        ("Manski bounds (accuracy)", _pair(b.manski_accuracy.value, b.manski_accuracy.reason)),
        *((f"sharp bounds ({m})", _pair(v.value, v.reason)) for m, v in b.sharp.items()),
    ]
    return "<table>" + "".join(f"<tr><th>{escape(n)}</th><td>{v}</td></tr>" for n, v in rows) + "</table>"


def _protocol(report: Report) -> str:
    p = report.protocol
    fields = [
        ("scale", p.scale),
        ("population", p.population),
        ("handling rule", p.handling),
        ("recoded to", p.recode_to or "-"),
        ("positive label", p.positive),
        ("costs", p.costs),
        ("aggregation", p.aggregation + (f" (rule {p.rule})" if p.rule else "")),
        ("resampling unit", p.resampling_unit),
    ]
    return "<dl>" + "".join(f"<dt>{escape(n)}</dt><dd>{escape(v)}</dd>" for n, v in fields) + "</dl>"


def report_html(report: Report) -> str:
    """A plain, self-contained HTML page of the report; every value is escaped."""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>annoplan report: {escape(report.project_name)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Report: {escape(report.project_name)} <small>({escape(report.project)})</small></h1>",
        f"<p>Labels up to event {report.label_seq}; criteria: {escape(', '.join(report.criteria))}.</p>",
        "<h2>Protocol</h2>",
        _protocol(report),
    ]
    parts += [f"<p>{escape(n)}</p>" for n in report.notes]
    for judge in report.judges:
        parts.append(f"<h2>Judge {escape(judge.judge)} against {escape(judge.human)}</h2>")
        for c in judge.criteria:
            parts.append(f"<h3>Criterion {escape(c.criterion)}</h3>")
            parts.append(_decision_table(c, f"Verdicts on {c.criterion}: rows human, columns judge"))
            parts.append(_statistics(c))
        a = judge.aggregate
        parts.append(f"<h3>Aggregated ({escape(a.aggregation)}) over {escape(', '.join(a.criteria))}</h3>")
        if a.pooled is not None:
            parts.append(_decision_table(a.pooled, f"Pooled verdicts ({a.aggregation})"))
            parts.append(_statistics(a.pooled))
        included = ", ".join(f"{i.statistic} {i.included}/{i.total}" for i in a.included)
        parts.append(
            "<table>"
            f"<tr><th>accuracy</th><td>{_stat(a.accuracy)}</td></tr>"
            f"<tr><th>phi</th><td>{_value(a.association.value, a.association.reason)}</td></tr>"
            f"<tr><th>kappa</th><td>{_value(a.kappa.value, a.kappa.reason)}</td></tr>"
            f"<tr><th>kappa interval</th><td>{_pair(a.kappa.interval, a.kappa.reason)} "
            f"({escape(a.kappa.interval_method or '')})</td></tr>"
            f"<tr><th>criteria included</th><td>{escape(included)}</td></tr></table>"
        )
    parts.append("<h2>Reporting checklist (docs/method.md §7)</h2>")
    parts.append("<table><tr><th>item</th><th>satisfied</th><th>why</th></tr>")
    for item in report.checklist:
        mark = "<span class='ok'>yes</span>" if item.satisfied else "<span class='no'>no</span>"
        parts.append(f"<tr><td>{escape(item.item)}</td><td>{mark}</td><td>{escape(item.why)}</td></tr>")
    parts.append("</table></body></html>")
    return "".join(parts)
