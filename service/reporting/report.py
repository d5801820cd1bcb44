"""The protocol-aware report (docs/method.md §7): each judge against the primary human, per criterion
and aggregated, with the reporting checklist. Labels come from the database; every statistic
comes from ``planner.protocol``; this module only pairs verdicts and assembles the document."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.aggregation import Aggregate, aggregate
from planner.codes import code_type
from planner.protocol import Protocol, Summary, summarize, summarize_codes
from planner.verdicts import VerdictTable
from service.core.errors import Invalid, echo
from service.core.offload import off_worker
from service.data.models import Project, Rater
from service.documents.reliability import DocumentCache
from service.documents.slices import slices_block
from service.matrices.matrix import LabelMatrix
from service.matrices.store import current_matrix
from service.schemas.report import (
    AggregateOut,
    Association,
    Bound,
    Bounds,
    ChecklistItem,
    Comparison,
    Costs,
    CriterionComparison,
    Handling,
    Included,
    JudgeReport,
    Kappa,
    Level,
    Marginals,
    ProtocolOut,
    Rates,
    Report,
    Rule,
    Stat,
    TableOut,
)

CONFIDENCE_LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0  # a fixed seed: the same labels always give the same report
PAIRED = "items labelled by both the judge and the primary human"
PAIRED_ALL = "items labelled by both the judge and the primary human on every criterion in the report"
BOUND_METRICS = ("accuracy", "kappa", "f1_met", "phi")


@dataclass(frozen=True)
class ReportOptions:
    """The protocol a report is requested under (the query parameters of the endpoint)."""

    handling: Handling = "exclude"
    recode_to: str | None = None
    positive: str | None = None
    costs: Costs = "nominal"
    aggregation: Level = "micro"
    rule: Rule = "all"
    criterion: str | None = None


def _reason(summary_reasons: tuple[tuple[str, str], ...], name: str, default: str) -> str:
    reasons = dict(summary_reasons)
    return reasons.get(name) or reasons.get("all") or default


def _stat(value: float | None, reasons: tuple[tuple[str, str], ...], name: str) -> Stat:
    if value is not None:
        return Stat(value=value)
    return Stat(value=None, reason=_reason(reasons, name, f"{name} is undefined on these pairs"))


def _protocol_out(protocol: Protocol, population: str, rule: str | None) -> ProtocolOut:
    return ProtocolOut(
        scale=protocol.scale,
        population=f"{population}; {protocol.population}",
        handling=protocol.handling,
        recode_to=protocol.recode_to,
        labels=list(protocol.labels),
        positive=protocol.positive,
        costs=protocol.costs,
        ordering=list(protocol.ordering),
        cost_matrix=[list(row) for row in protocol.cost_matrix],
        aggregation=protocol.aggregation,
        resampling_unit=protocol.resampling_unit,
        rule=rule,
    )


def _association(value: float | None, reason: str | None, labels: tuple[str, ...], positive: str) -> Association:
    if len(labels) == 2:
        note = "phi; on binary verdicts it equals Pearson, Spearman, Kendall tau_b and MCC (docs/method.md §2)"
    else:
        note = f"phi of {positive!r} versus the other labels (the labels are not binary)"
    return Association(value=value, reason=None if value is not None else reason, note=note)


def _bounds(summary: Summary) -> Bounds:
    """Manski and sharp bounds of the full set; given under exclusion only, as the planner does."""
    protocol = summary.protocol
    covered = Stat(
        value=summary.covered_accuracy,
        reason=None if summary.covered_accuracy is not None else "no pair where both sides gave a regular label",
    )
    if protocol.handling != "exclude":
        why = (
            f"bounds describe full-set accuracy under handling=exclude; handling={protocol.handling} "
            "scores the abstained pairs instead"
        )
    elif summary.n_items == 0:
        why = "no pairs"
    else:
        why = None
    if why is not None:
        sharp = {m: Bound(value=None, reason=why) for m in BOUND_METRICS}
        return Bounds(covered_accuracy=covered, manski_accuracy=Bound(value=None, reason=why), sharp=sharp)
    if len(protocol.labels) == 2:
        found = {
            "accuracy": summary.sharp_accuracy_bounds,
            "kappa": summary.kappa_bounds,
            "f1_met": summary.f1_met_bounds,
            "phi": summary.phi_bounds,
        }
        sharp = {
            m: Bound(value=v, reason=None if v else f"no allocation of the abstained pairs defines {m}")
            for m, v in found.items()
        }
    else:
        why = "sharp bounds are enumerated for binary labels only"
        sharp = {m: Bound(value=None, reason=why) for m in BOUND_METRICS}
    return Bounds(covered_accuracy=covered, manski_accuracy=Bound(value=summary.accuracy_bounds), sharp=sharp)


def _marginals(summary: Summary, axis: int) -> Marginals:
    full = summary.table.array().sum(axis=axis)
    shares = summary.human_marginals if axis == 1 else summary.judge_marginals
    return Marginals(
        counts={c: int(v) for c, v in zip(summary.table.categories, full, strict=True)},
        scored_shares=dict(zip(summary.scored_table.categories, shares, strict=False)),
    )


def _table_out(table: VerdictTable) -> TableOut:
    return TableOut(categories=list(table.categories), counts=[list(r) for r in table.counts], n=table.n)


def _bootstrap_method(result: Aggregate) -> str:
    """The one kappa interval method of a report, named with its resampling unit."""
    return f"percentile bootstrap, {BOOTSTRAP_RESAMPLES} resamples of {result.protocol.resampling_unit}"


def comparison(summary: Summary, population: str, bootstrap: Aggregate, rule: str | None = None) -> Comparison:
    """Every reported quantity of one judge-vs-human summary (docs/method.md §7, "Report").

    ``bootstrap`` is the aggregate whose kappa equals this table's (the criterion alone, or
    the pooled criteria): its percentile bootstrap is the report's one kappa interval method.
    """
    reasons = summary.reasons
    if summary.kappa is None:
        kappa_reason = _reason(reasons, "kappa", "kappa is undefined on these pairs")
    elif bootstrap.kappa_interval is None:
        kappa_reason = "every bootstrap replicate of kappa was undefined"
    else:
        kappa_reason = None
    return Comparison(
        protocol=_protocol_out(summary.protocol, population, rule),
        table=_table_out(summary.table),
        scored_table=_table_out(summary.scored_table),
        n_items=summary.n_items,
        n_eff=summary.n_eff,
        human_marginals=_marginals(summary, 1),
        judge_marginals=_marginals(summary, 0),
        rates=Rates(
            human_abstain=summary.human_abstain_rate,
            judge_abstain=summary.judge_abstain_rate,
            human_invalid=summary.human_invalid_rate,
            judge_invalid=summary.judge_invalid_rate,
            coverage=summary.coverage,
            reason=None if summary.n_items else "no pairs",
        ),
        accuracy=_stat(summary.accuracy, reasons, "accuracy"),
        association=_association(
            summary.phi, _reason(reasons, "phi", "phi is undefined"), summary.protocol.labels, summary.protocol.positive
        ),
        kappa=Kappa(
            value=summary.kappa,
            standard_error=summary.kappa_se,
            interval=bootstrap.kappa_interval.as_list() if bootstrap.kappa_interval else None,
            interval_method=_bootstrap_method(bootstrap),
            confidence_level=CONFIDENCE_LEVEL,
            human_positive_rate=summary.human_positive_rate,
            judge_positive_rate=summary.judge_positive_rate,
            reason=kappa_reason,
        ),
        f1_met=_stat(summary.f1_met, reasons, "f1_met"),
        bounds=_bounds(summary),
    )


def _aggregate_out(result: Aggregate, population: str) -> AggregateOut:
    reasons = result.reasons
    pooled = comparison(result.pooled, population, result, result.rule) if result.pooled is not None else None
    if result.kappa is None:
        kappa_reason = _reason(reasons, "kappa", "kappa is undefined")
    elif result.kappa_interval is None:
        kappa_reason = "every bootstrap replicate of kappa was undefined"
    else:
        kappa_reason = None
    return AggregateOut(
        aggregation=result.protocol.aggregation,
        level=result.protocol.aggregation,
        criteria=list(result.criteria),
        protocol=_protocol_out(result.protocol, population, result.rule),
        accuracy=_stat(result.accuracy, reasons, "accuracy"),
        association=_association(
            result.phi, _reason(reasons, "phi", "phi is undefined"), result.protocol.labels, result.protocol.positive
        ),
        kappa=Kappa(
            value=result.kappa,
            standard_error=None,
            interval=result.kappa_interval.as_list() if result.kappa_interval else None,
            interval_method=_bootstrap_method(result),
            confidence_level=CONFIDENCE_LEVEL,
            human_positive_rate=pooled.kappa.human_positive_rate if pooled else None,
            judge_positive_rate=pooled.kappa.judge_positive_rate if pooled else None,
            reason=kappa_reason,
        ),
        f1_met=_stat(result.f1_met, reasons, "f1_met"),
        included=[Included(statistic=s, included=i, total=t) for s, i, t in result.included],
        pooled=pooled,
    )


# Words that name the MET side of a binary label set, whichever order the labels come in.
POSITIVE_WORDS = frozenset({"pass", "passed", "yes", "y", "met", "true", "correct", "positive", "accept", "1"})


def default_positive(labels: list[str]) -> str | None:
    """The positive label of a binary set when none is declared: the one label that is a
    MET word (``pass``, ``yes``, ``met``, ``true``, ``correct``, ...), else the last label
    (negative first: ``["ok", "toxic"]``); None for more than two labels (they must declare it)."""
    if len(labels) != 2:
        return None
    named = [v for v in labels if v.strip().casefold() in POSITIVE_WORDS]
    return named[0] if len(named) == 1 else labels[-1]


def _positive(project: Project, options: ReportOptions) -> str:
    """The positive (MET) label: the requested one, the project's declared one, or the default."""
    if options.positive is not None:
        return options.positive
    declared = project.decision.get("positive_label") or default_positive(project.labels)
    if declared is not None:
        return str(declared)
    raise Invalid(
        f"this project has {len(project.labels)} labels, so reports need its positive (MET) label: "
        f"set decision.positive_label (PATCH /projects/{project.id}) or pass ?positive= "
        f"(one of {project.labels})"
    )


@dataclass(frozen=True)
class CriterionPairs:
    """What a report reads of one criterion's labels: the raw codes (as in
    :class:`~service.matrices.matrix.LabelMatrix`, -1 missing) of the primary human and of each judge
    ``(n_items, n_judges)``, on the items the human and at least one judge labelled."""

    criterion: str
    item_ids: np.ndarray
    human: np.ndarray
    judges: np.ndarray


def criterion_pairs(matrix: LabelMatrix) -> CriterionPairs:
    """The primary human's and the judges' labels of ``matrix``: a small part of it to hand to a child process."""
    human = matrix.raw[:, matrix.columns("primary")[0]]
    judges = matrix.raw[:, matrix.columns("judge")]
    rows = (human >= 0) & np.any(judges >= 0, axis=1)
    return CriterionPairs(
        criterion=matrix.criterion,
        item_ids=matrix.item_ids[rows],
        human=human[rows].astype(code_type(matrix.n_labels)),
        judges=judges[rows].astype(code_type(matrix.n_labels)),
    )


def _summaries(
    criteria: list[CriterionPairs],
    judge: int,
    labels: list[str],
    options: ReportOptions,
    keep: np.ndarray | None = None,
) -> dict[str, Summary]:
    """Per criterion: the summary of judge ``judge`` against the human on the items both labelled
    (``options.positive`` resolved)."""
    out = {}
    positive = options.positive
    assert positive is not None, "the caller resolves the positive label"
    for pairs in criteria:
        both = (pairs.judges[:, judge] >= 0) & (pairs.human >= 0)
        if keep is not None:
            both &= np.isin(pairs.item_ids, keep, assume_unique=True)
        out[pairs.criterion] = summarize_codes(
            pairs.human[both],
            pairs.judges[both, judge],
            labels=labels,
            positive=positive,
            handling=options.handling,
            recode_to=options.recode_to,
            costs=options.costs,
            items=pairs.item_ids[both],
            confidence_level=CONFIDENCE_LEVEL,
        )
    return out


def _common_items(criteria: list[CriterionPairs], judge: int) -> np.ndarray:
    """Item ids labelled by both the judge and the human on every criterion (the item-level population)."""
    common = criteria[0].item_ids
    for pairs in criteria:
        both = (pairs.judges[:, judge] >= 0) & (pairs.human >= 0)
        common = np.intersect1d(common, pairs.item_ids[both], assume_unique=True)
    return common


def _aggregate(per_criterion: dict[str, Summary], options: ReportOptions, level: str | None = None) -> Aggregate:
    return aggregate(
        per_criterion,
        aggregation=level or options.aggregation,
        rule=options.rule,
        confidence_level=CONFIDENCE_LEVEL,
        n_resamples=BOOTSTRAP_RESAMPLES,
        rng=BOOTSTRAP_SEED,
    )


def _criteria_iv(project: Project, options: ReportOptions) -> list[str]:
    if options.criterion is None:
        return list(project.criteria)
    if options.criterion not in project.criteria:
        raise Invalid(f"unknown criterion {echo(options.criterion)}; the project has {project.criteria}")
    return [options.criterion]


def declared_protocol(project: Project, criteria: list[str], options: ReportOptions) -> ProtocolOut:
    """The requested protocol, validated by the planner on empty verdicts (422 when invalid)."""
    if options.handling == "recode" and options.recode_to is None:
        negatives = [v for v in project.labels if v != _positive(project, options)]
        raise Invalid(f"handling=recode needs recode_to, the label CANNOT_ASSESS counts as: one of {negatives}")
    try:
        per_criterion = {
            c: summarize(
                np.array([], dtype=str),
                np.array([], dtype=str),
                labels=project.labels,
                positive=_positive(project, options),
                handling=options.handling,
                recode_to=options.recode_to,
                costs=options.costs,
                items=[],
            )
            for c in criteria
        }
        result = _aggregate(per_criterion, options)
    except ValueError as exc:
        raise Invalid(str(exc)) from exc
    population = PAIRED_ALL if options.aggregation == "item" else PAIRED
    return _protocol_out(result.protocol, population, result.rule)


def _item(name: str, failures: list[str], why: str) -> ChecklistItem:
    """A checklist item: satisfied when nothing fails; otherwise why not, shortened to read."""
    if not failures:
        return ChecklistItem(item=name, satisfied=True, why=why)
    text = "; ".join(failures)
    return ChecklistItem(item=name, satisfied=False, why=text if len(text) <= 600 else text[:597] + "...")


def _checklist(judges: list[JudgeReport], criteria: list[str], declared: ProtocolOut) -> list[ChecklistItem]:
    """Which reporting items of docs/method.md §7 this report satisfies, and why (docs/method.md §7, "Report")."""
    tables = [(j.judge, c) for j in judges for c in j.criteria]
    none = [] if tables else ["no judge/primary-human pair to tabulate"]
    empty = none or [f"{j} on {c.criterion}: no pairs" for j, c in tables if c.n_items == 0]
    if none or len(declared.labels) != 2:
        association = none or ["labels are not binary: phi is given for the positive label versus the rest"]
    else:
        association = [
            f"{j} on {c.criterion}: {c.association.reason}" for j, c in tables if c.association.value is None
        ]
    intervals = none or [f"{j} on {c.criterion}: {c.kappa.reason}" for j, c in tables if c.kappa.interval is None] + [
        f"{j.judge} aggregated: {j.aggregate.kappa.reason}" for j in judges if j.aggregate.kappa.interval is None
    ]
    if declared.handling != "exclude":
        bounds = [f"bounds are given under handling=exclude; this report uses handling={declared.handling}"]
    else:
        bounds = empty
    return [
        _item(
            "confusion table and N",
            none,
            "full tables with CANNOT_ASSESS and INVALID rows and columns, N and the scored N",
        ),
        _item("both marginals", none, "human and judge verdict counts and scored shares in every table"),
        _item("coverage and abstention rates", empty, "abstention and invalid rates of both sides, joint coverage"),
        _item("handling rule", [], f"handling={declared.handling} in every protocol block"),
        _item(
            "aggregation level and resampling unit",
            [],
            f"aggregation={declared.aggregation}, resampling unit: {declared.resampling_unit}",
        ),
        _item("one binary association statistic", association, "phi, reported once"),
        _item(
            "kappa with interval",
            intervals,
            "kappa with one interval method throughout (a percentile bootstrap of the resampling "
            "unit), next to both positive rates",
        ),
        _item("per-criterion tables", none, f"one table per judge and criterion ({', '.join(criteria)})"),
        _item("coverage bounds with covered accuracy", bounds, "Manski and sharp bounds next to covered accuracy"),
        _item(
            "INVALID outputs counted, never recoded",
            [],
            "INVALID has its own row, column and rates, and is never scored",
        ),
    ]


def report_key(session: Session, project: Project, options: ReportOptions) -> str:
    """What a report depends on, as an ETag: the labels (``label_seq``), the corpus, the raters (ids,
    kinds, external ids), the project's labels, criteria, scale and decision settings, and ``options``."""
    raters = session.execute(
        select(Rater.id, Rater.kind, Rater.external_id).where(Rater.project_id == project.id).order_by(Rater.id)
    ).all()
    raw = repr(
        (
            "report",
            project.id,
            project.name,
            project.label_seq,
            project.item_count,
            [tuple(r) for r in raters],
            list(project.labels),
            list(project.criteria),
            project.scale,
            sorted(project.decision.items()),
            options,
        )
    )
    return '"' + hashlib.sha256(raw.encode()).hexdigest()[:32] + '"'


def cached_report(
    session: Session, project: Project, options: ReportOptions, documents: DocumentCache, key: str | None = None
) -> Report:
    """The report under ``options``, computed once per :func:`report_key` in this worker (polls of an
    unchanged project cost the key's two reads, not the statistics)."""
    key = key or report_key(session, project, options)
    report: Report = documents.get_or_build(key, lambda: build_report(session, project, options))
    return report


SLICE_RESAMPLES = 200
"""Item resamples of each slice's inconclusive guard in the report's slices note."""


def _slices_note(session: Session, project: Project, criterion: str, by: str) -> str:
    """The slices' headline of the project's ``decision.slices`` (docs/method.md §3b), as a report note."""
    try:
        block = slices_block(session, project, criterion, by, n_resamples=SLICE_RESAMPLES)
    except Invalid as exc:
        return f"slices ({by}): {exc.detail}"
    return f"slices ({by}, {criterion}, {block.correction}): {block.headline}"


def build_report(session: Session, project: Project, options: ReportOptions) -> Report:
    """The report of every judge against the primary human under ``options`` (docs/method.md §7).

    The labels are read here; the statistics run off the web worker for a large project
    (``service.core.offload.off_worker``).
    """
    criteria = _criteria_iv(project, options)
    declared = declared_protocol(project, criteria, options)
    matrices = [current_matrix(session, project, c) for c in criteria]
    primary = matrices[0].columns("primary")
    notes = []
    if not primary:
        notes.append("no primary human rater: add a rater of kind 'primary' to compare judges against")
    if not matrices[0].columns("judge"):
        notes.append("no judge rater: add a rater of kind 'judge'")
    if len(project.labels) != 2:
        notes.append("phi and F1 refer to the positive label versus the rest; sharp bounds need binary labels")
    by = project.decision_settings.slices
    if by is not None:
        notes.append(_slices_note(session, project, criteria[0], by))
    resolved = replace(options, positive=_positive(project, options))
    reports = []
    if primary:
        raters = matrices[0].raters
        pairs = [criterion_pairs(matrix) for matrix in matrices]
        cells = sum(matrix.raw.size for matrix in matrices)  # the project's size decides, as for documents
        judges = [raters[k].external_id for k in matrices[0].columns("judge")]
        human = raters[primary[0]].external_id
        reports = off_worker(cells, judge_reports, pairs, judges, human, list(project.labels), resolved)
    return Report(
        project=project.id,
        project_name=project.name,
        label_seq=project.label_seq,
        protocol=declared,
        criteria=criteria,
        judges=reports,
        checklist=_checklist(reports, criteria, declared),
        notes=notes,
    )


def judge_reports(
    criteria: list[CriterionPairs], judges: list[str], human: str, labels: list[str], options: ReportOptions
) -> list[JudgeReport]:
    """Each judge against the primary human (``options.positive`` resolved), per criterion and aggregated; pure."""
    population = PAIRED_ALL if options.aggregation == "item" else PAIRED
    reports = []
    for judge, name in enumerate(judges):
        per_criterion = _summaries(criteria, judge, labels, options)
        alone = {c: _aggregate({c: s}, options, "micro") for c, s in per_criterion.items()}
        if options.aggregation == "item":
            common = _common_items(criteria, judge)
            result = _aggregate(_summaries(criteria, judge, labels, options, keep=common), options)
        elif options.aggregation == "micro" and len(alone) == 1:
            result = next(iter(alone.values()))  # pooling one criterion is that criterion
        else:
            result = _aggregate(per_criterion, options)
        reports.append(
            JudgeReport(
                judge=name,
                human=human,
                criteria=[
                    CriterionComparison(criterion=c, **comparison(s, PAIRED, alone[c]).model_dump())
                    for c, s in per_criterion.items()
                ],
                aggregate=_aggregate_out(result, population),
            )
        )
    return reports
