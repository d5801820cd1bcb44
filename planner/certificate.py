"""Validation certificates: a decision frozen with its labels and settings, and its re-derivation.

A certificate is an in-toto Statement v1 whose subjects are the label snapshot and the
report, each named by the SHA-256 of its RFC 8785 canonical JSON (docs/method.md §10).
Everything here works on plain rows and dictionaries, so a certificate can be checked
offline against a label export, with no server and no database.
"""

from __future__ import annotations

import hashlib
import math
import platform
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, cast

import numpy as np
import rfc8785
import scipy

from planner.decision import RaterOutcome, Validation, validate_judge
from planner.list_arrival import PlannedList
from planner.score_decision import ScoreRaterOutcome, ScoreValidation, validate_scores
from planner.score_slices import ScoreSliceValidation, validate_scores_by_slice
from planner.sequential import Monitoring, monitor_judge
from planner.slices import SliceValidation, validate_judge_by_slice

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://annoplan.dev/validation-certificate/v1"
SNAPSHOT_FIELDS = ("item", "rater", "criterion", "value", "seq")
HUMAN_KINDS = ("primary", "human")
BIT_GENERATOR = "PCG64"
# Settings the result echoes (section, key), so an edited setting is named by the check.
ECHOED = (
    ("decision", "coefficient"),
    ("decision", "rule"),
    ("decision", "epsilon"),
    ("decision", "omega_threshold"),
    ("decision", "q"),
    ("decision", "inconclusive_level"),
    ("seeds", "seed"),
    ("seeds", "n_resamples"),
)
DIGITS = 12  # results are rounded so that last-bit differences between platforms do not count


def canonical_json(value: Any) -> bytes:
    """``value`` as RFC 8785 (JSON Canonicalization Scheme) bytes (docs/method.md §10)."""
    return rfc8785.dumps(value)


def sha256_hex(value: Any) -> str:
    """The SHA-256 hex digest of the canonical JSON of ``value`` (docs/method.md §10).

    >>> sha256_hex([{"item": "i1", "rater": "ann-1", "criterion": "default", "value": "pass", "seq": 1},
    ...             {"item": "i1", "rater": "judge", "criterion": "default", "value": "fail", "seq": 2}])
    'a625c24e14380d93c3941a28556ac41d32cf22d725fefed9ef8e0375f9cc6745'
    """
    return hashlib.sha256(canonical_json(value)).hexdigest()


def label_snapshot(rows: Iterable[Mapping[str, Any]], *, label_seq: int) -> list[dict[str, Any]]:
    """The current label of every cell as of ``label_seq``, sorted by (item, rater, criterion).

    ``rows`` is a label export, current labels or the full history (fields ``item``,
    ``rater``, ``criterion``, ``value``, ``seq``; others are ignored). Per cell the event
    with the highest ``seq`` not above ``label_seq`` counts; a cell whose latest event has
    no value (a retraction) is absent. A row with ``order`` ``BA`` (a pairwise judge's label with
    answer B shown first) is left out: the decision reads the AB order (docs/method.md §13).
    Raises ``ValueError`` naming a row without a field.
    """
    latest: dict[tuple[str, str, str], tuple[int, str | None]] = {}
    for n, row in enumerate(rows, start=1):
        if row.get("order") == "BA":
            continue
        try:
            cell = (str(row["item"]), str(row["rater"]), str(row["criterion"]))
            seq, value = int(row["seq"]), row["value"]
        except KeyError as missing:
            raise ValueError(f"label row {n} has no field {missing}") from None
        except (TypeError, ValueError):
            raise ValueError(f"label row {n}: seq must be an integer, got {str(row.get('seq'))[:100]!r}") from None
        if seq <= label_seq and (cell not in latest or seq > latest[cell][0]):
            latest[cell] = (seq, None if value in (None, "") else str(value))
    return [
        {"item": item, "rater": rater, "criterion": criterion, "value": value, "seq": seq}
        for (item, rater, criterion), (seq, value) in sorted(latest.items())
        if value is not None
    ]


def snapshot_summary(snapshot: list[dict[str, Any]]) -> dict[str, Any]:
    """Row count and the digest of the cells alone, which tell an added or removed label from a changed one."""
    cells = [[r["item"], r["rater"], r["criterion"]] for r in snapshot]
    return {"n_rows": len(snapshot), "cells_sha256": sha256_hex(cells)}


def _number(x: float) -> float | None:
    return round(float(x), DIGITS) if math.isfinite(x) else None


def _interval(ci: Any) -> list[float | None]:
    return [_number(ci.low), _number(ci.high)]


def _rater_result(r: RaterOutcome | ScoreRaterOutcome, rater: str) -> dict[str, Any]:
    """A held-out human's certified test, as labels and scores both record it (docs/method.md §3, §3d)."""
    return {
        "rater": rater,
        "m": r.m,
        "d": _number(r.d),
        "rho_f": _number(r.rho_f),
        "rho_h": _number(r.rho_h),
        "p_value": _number(r.p_value),
        "won": r.won,
        "reason": r.reason,
    }


def _judge_result(v: Validation, judge: str, humans: list[str]) -> dict[str, Any]:
    return {
        "judge": judge,
        "decision": v.decision,
        "reason": v.reason,
        "omega": _number(v.omega),
        "p_opposite": _number(v.p_opposite),
        "n_items": v.n_items,
        "raters": [{**_rater_result(r, humans[k]), "ci": _interval(r.ci)} for k, r in enumerate(v.raters)],
        "human_pool": {
            "estimate": _number(v.human_pool.estimate),
            "ci": _interval(v.human_pool.ci),
            "n_raters": v.human_pool.n_raters,
        },
    }


def _by_item(listed: Any, items: list[str]) -> dict[str, Any]:
    """Item id -> value from a certificate's per-item block: ``[place, value]`` pairs naming an item by its
    place in ``items`` (out-of-range places ignored), or an id-keyed mapping as earlier certificates wrote it."""
    if isinstance(listed, Mapping):
        return dict(listed)
    return {items[int(place)]: value for place, value in listed or () if 0 <= int(place) < len(items)}


def _arrival(
    rows: list[dict[str, Any]], items: list[str], raters: list[str], monitoring: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Each snapshot cell's arrival rank as the monitor reads it (the opening's, or the rank a certificate lists
    for a label after it; -1 without a label) and each item's tiebreak key (its place in the certificate's
    seeded order; items after every listed one, in sorted order). The certificate names an item by its place
    in ``items`` (the sorted certified items), so a statement carries no item id; places out of range are
    ignored."""
    item_of, rater_of = {x: i for i, x in enumerate(items)}, {x: k for k, x in enumerate(raters)}
    order = np.full((len(items), len(raters)), -1, dtype=np.int64)
    for r in rows:
        order[item_of[r["item"]], rater_of[r["rater"]]] = int(monitoring["opening"])
    for place, rater, rank in monitoring["ranks"]:
        if 0 <= int(place) < len(items) and rater in rater_of:
            order[int(place), rater_of[rater]] = int(rank)
    listed = {int(place): n for n, place in enumerate(monitoring["tiebreak"])}
    tiebreak = np.array([listed.get(i, len(listed) + i) for i in range(len(items))], dtype=np.int64)
    return order, tiebreak


def _planned_lists(items: list[str], raters: list[str], monitoring: Mapping[str, Any]) -> list[PlannedList]:
    """The secondaries' planned lists a certificate lists (docs/method.md §8.2) as the monitor reads them: each
    one's column, its items' places in list order (-1 for an item without a label in the snapshot: a gap), and
    the rank after which its labels are read in list order (its ``since``, at least the opening)."""
    rater_of = {x: k for k, x in enumerate(raters)}
    opening = int(monitoring["opening"])
    return [
        (
            rater_of[rater],
            np.array([int(x) if 0 <= int(x) < len(items) else -1 for x in planned["items"]], dtype=np.int64),
            max(int(planned["since"]), opening),
        )
        for rater, planned in (monitoring.get("lists") or {}).items()
        if rater in rater_of
    ]


def _monitored_result(m: Monitoring, verdict: Mapping[str, Any], humans: list[str]) -> dict[str, Any]:
    """A judge's certified result in anytime mode: the monitored decision in force (docs/method.md §8), the
    fixed-sample one beside it."""
    won = sum(r.status == "won" for r in m.raters)
    return {
        "decision": m.decision,
        "reason": m.reason,
        "omega": _number(won / len(m.raters)) if m.raters else None,
        "fixed_decision": verdict["decision"],
        "fixed_omega": verdict["omega"],
        "monitoring": {
            "decided_at_label_seq": m.decided_at,
            "looks": m.looks,
            "needed_won": m.needed,
            "raters": [
                {
                    "rater": humans[k],
                    "status": r.status,
                    "certified_at_label_seq": r.certified_at,
                    "n": r.n,
                    "e_value": _number(r.e_value),
                    "e_value_lost": _number(r.e_value_lost),
                }
                for k, r in enumerate(m.raters)
            ],
        },
    }


def _rating(value: str) -> float:
    """A numeric project's label as a number; NaN for CANNOT_ASSESS, INVALID or any text that is not one."""
    try:
        x = float(value)
    except ValueError:
        return math.nan
    return x if math.isfinite(x) else math.nan


def _score_judge_result(v: ScoreValidation, judge: str, humans: list[str]) -> dict[str, Any]:
    return {
        "judge": judge,
        "decision": v.decision,
        "reason": v.reason,
        "omega": _number(v.omega),
        "rho": _number(v.rho),
        "n_items": v.n_items,
        "raters": [_rater_result(r, humans[k]) for k, r in enumerate(v.raters)],
    }


def _score_verdicts(
    rows: list[dict[str, Any]], items: list[str], raters: list[str], settings: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Every judge's fixed-sample decision on a numeric project's ratings (docs/method.md §3d, §10), and the
    first judge's per slice when ``settings.slices`` is set (else None): ``protocol.value_range`` bounds them,
    ``decision.rule`` is ``alt-test`` (negative-RMSE alignment) or ``margin``; CANNOT_ASSESS, INVALID and text
    that is not a number are missing."""
    kinds, decision, bounds = settings["raters"], settings["decision"], settings["protocol"]["value_range"]
    values = np.full((len(items), len(raters)), np.nan)
    item_of, rater_of = {x: i for i, x in enumerate(items)}, {x: k for k, x in enumerate(raters)}
    for r in rows:
        values[item_of[r["item"]], rater_of[r["rater"]]] = _rating(r["value"])
    humans = [k for k, x in enumerate(raters) if kinds[x] in HUMAN_KINDS]
    judges = [k for k, x in enumerate(raters) if kinds[x] == "judge"]
    options: dict[str, Any] = {
        "rule": "alt-test" if decision["rule"] == "alt-test" else "margin",
        "epsilon": decision["epsilon"],
        "value_range": (bounds["min"], bounds["max"]),
        "q": decision["q"],
        "omega_threshold": decision["omega_threshold"],
    }
    slices = None
    if settings.get("slices") is not None:
        slices = _slices_result(
            settings,
            items,
            judges,
            humans,
            lambda rows, by, eps: validate_scores_by_slice(
                values[rows], by, judge=judges[0], humans=humans, slice_epsilon=eps, **options
            ),
        )
    if not judges or len(humans) < 2:
        return [], slices
    validations = validate_scores(values, judges, humans, **options)
    return [_score_judge_result(v, raters[v.judge], [raters[k] for k in humans]) for v in validations], slices


def certified_result(snapshot: list[dict[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The validation decision (docs/method.md §3) of every judge on ``snapshot``, echoing its settings.

    ``settings`` holds ``criterion``, ``raters`` (external id -> kind), ``protocol``
    (``labels`` in order), ``decision`` and ``seeds`` as in a certificate's predicate; a
    ``decision.estimator`` of ``"ppi"`` estimates the secondaries' margins prediction-powered
    and ``weights.inclusion`` (``[place, probability of entering the overlap]`` pairs, or item id ->
    probability in earlier certificates; 1 where absent)
    weights every estimate by its inverse (docs/method.md §9).
    Items are the snapshot's, in sorted order; CANNOT_ASSESS, INVALID and values outside
    the label set are missing (exclusion). With ``monitoring`` (an anytime-mode project, docs/method.md §8,
    §10) each judge's decision is the monitored one, read in the arrival order it lists (``opening``,
    ``ranks``, ``tiebreak``, and the planned ``lists`` read in list order), and the fixed-sample decision is
    ``fixed_decision``.
    A ``protocol.scale`` of ``"numeric"`` decides on the numbers instead (``_score_verdicts``).
    """
    criterion, kinds = settings["criterion"], settings["raters"]
    decision, seeds = settings["decision"], settings["seeds"]
    labels = list(settings["protocol"]["labels"])
    raters = sorted(kinds)
    rows = [r for r in snapshot if r["criterion"] == criterion and r["rater"] in kinds]
    items = sorted({r["item"] for r in rows})
    if settings["protocol"].get("scale") == "numeric":
        verdicts, slices = _score_verdicts(rows, items, raters, settings)
        result = _result(verdicts, items, rows, settings)
        if slices is not None:
            result["slices"] = slices
        return result
    codes = np.full((len(items), len(raters)), -1, dtype=np.int64)
    code_of, item_of, rater_of = (
        {v: c for c, v in enumerate(labels)},
        {x: i for i, x in enumerate(items)},
        {x: k for k, x in enumerate(raters)},
    )
    for r in rows:
        codes[item_of[r["item"]], rater_of[r["rater"]]] = code_of.get(r["value"], -1)
    humans = [k for k, x in enumerate(raters) if kinds[x] in HUMAN_KINDS]
    judges = [k for k, x in enumerate(raters) if kinds[x] == "judge"]
    primary = next((k for k, x in enumerate(raters) if kinds[x] == "primary"), None)
    estimator = decision.get("estimator", "paired") if primary is not None else "paired"
    inclusion_of = _by_item((settings.get("weights") or {}).get("inclusion"), items)
    inclusion = np.array([inclusion_of.get(x, 1.0) for x in items], dtype=float) if inclusion_of else None
    verdicts = (
        [
            _judge_result(
                validate_judge(
                    codes,
                    judge=j,
                    humans=humans,
                    n_labels=len(labels),
                    rule=decision["rule"],
                    coefficient=decision["coefficient"],
                    epsilon=decision["epsilon"],
                    omega_threshold=decision["omega_threshold"],
                    q=decision["q"],
                    inconclusive_level=decision["inconclusive_level"],
                    n_resamples=seeds["n_resamples"],
                    rng=seeds["seed"],
                    estimator=estimator,
                    primary=primary,
                    inclusion=inclusion,
                ),
                raters[j],
                [raters[k] for k in humans],
            )
            for j in judges
        ]
        if len(humans) >= 2
        else []
    )
    monitoring = settings.get("monitoring")
    if monitoring is not None and verdicts:
        order, tiebreak = _arrival(rows, items, raters, monitoring)
        lists = _planned_lists(items, raters, monitoring)
        for j, verdict in zip(judges, verdicts, strict=True):
            monitored = monitor_judge(
                codes,
                judge=j,
                humans=humans,
                n_labels=len(labels),
                order=order,
                tiebreak=tiebreak,
                lists=lists,
                rule=decision["rule"],
                epsilon=decision["epsilon"],
                alpha=monitoring["alpha"],
                omega_threshold=decision["omega_threshold"],
                multiplicity=monitoring["multiplicity"],
                budget=monitoring["budget"],
                inclusion=inclusion,
            )
            verdict.update(_monitored_result(monitored, verdict, [raters[k] for k in humans]))
    result = _result(verdicts, items, rows, settings)
    if settings.get("slices") is not None:
        result["slices"] = _slices_result(
            settings,
            items,
            judges,
            humans,
            lambda rows, by, eps: validate_judge_by_slice(
                codes[rows],
                by,
                judge=judges[0],
                humans=humans,
                n_labels=len(labels),
                rule=decision["rule"],
                coefficient=decision["coefficient"],
                epsilon=decision["epsilon"],
                slice_epsilon=eps,
                omega_threshold=decision["omega_threshold"],
                q=decision["q"],
                inconclusive_level=decision["inconclusive_level"],
                n_resamples=seeds["n_resamples"],
                rng=seeds["seed"],
            ),
        )
    return result


def _result(
    verdicts: list[dict[str, Any]], items: list[str], rows: list[dict[str, Any]], settings: Mapping[str, Any]
) -> dict[str, Any]:
    """The result block: the first judge's decision and omega at the top, every judge's, counts, echoes."""
    first = verdicts[0] if verdicts else {"decision": "insufficient_data", "omega": None}
    return {
        "decision": first["decision"],
        "omega": first["omega"],
        "judges": verdicts,
        "n_items": len(items),
        "n_labels": len(rows),
        "computed_with": {f"{section}.{key}": settings[section][key] for section, key in ECHOED},
    }


def _slices_result(
    settings: Mapping[str, Any],
    items: list[str],
    judges: list[int],
    humans: list[int],
    decide: Callable[[np.ndarray, np.ndarray, dict[str, float]], SliceValidation | ScoreSliceValidation],
) -> dict[str, Any]:
    """The first judge's fixed-sample decision per slice (docs/method.md §3b, §3d, §10), failing slices first.

    ``settings.slices`` holds ``by``, ``values`` (``[place, slice value]`` pairs, or in earlier
    certificates external item id -> slice value; items not listed are left out) and ``slice_epsilon``
    (value -> epsilon; values no certified item has are ignored). ``decide(rows, values, slice_epsilon)`` is
    the per-slice decision on those rows, on labels (unweighted and paired, as ``/reliability?by=`` computes
    it) or on numbers.
    """
    block = settings["slices"]
    value_of = _by_item(block["values"], items)
    rows = np.array([i for i, x in enumerate(items) if x in value_of], dtype=np.int64)
    out: dict[str, Any] = {"by": block["by"], "n_items_without": len(items) - int(rows.size)}
    if not judges or len(humans) < 2 or rows.size == 0:
        why = "no judge and two humans to decide on" if rows.size else "no certified item has a slice value"
        return {**out, "headline": why, "failing": [], "slices": []}
    values = np.array([str(value_of[items[i]]) for i in rows], dtype=object)
    present = set(values.tolist())
    s = decide(rows, values, {k: v for k, v in (block.get("slice_epsilon") or {}).items() if k in present})
    return {
        **out,
        "correction": s.correction,
        "headline": s.headline,
        "failing": list(s.failing),
        "slices": [
            {
                "value": o.value,
                "n_items": o.n_items,
                "epsilon": _number(o.epsilon),
                "decision": o.decision,
                "omega": _number(o.omega),
                "d": _number(o.d),
            }
            for o in s.slices
        ],
    }


def software_versions() -> dict[str, str]:
    """The versions the result depends on (numpy's random streams are not promised stable across versions)."""
    try:
        annoplan = metadata.version("annoplan")
    except metadata.PackageNotFoundError:
        annoplan = "unknown"
    return {
        "annoplan": annoplan,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "python": platform.python_version(),
    }


def report_document(predicate: Mapping[str, Any]) -> dict[str, Any]:
    """What the ``report`` subject digests: the predicate without the issue metadata (``certificate``)."""
    return {k: v for k, v in predicate.items() if k != "certificate"}


def certificate_statement(
    snapshot: list[dict[str, Any]], settings: Mapping[str, Any], *, certificate: Mapping[str, Any]
) -> dict[str, Any]:
    """The in-toto Statement v1 certifying the decision on ``snapshot`` under ``settings`` (docs/method.md §10).

    ``settings`` carries ``project``, ``label_seq``, ``criterion``, ``protocol``, ``raters``,
    ``decision``, ``plan`` and ``seeds``; ``certificate`` (id, issue time) is metadata
    outside the report digest.
    """
    predicate = {
        **settings,
        "software": software_versions(),
        "snapshot": snapshot_summary(snapshot),
        "result": certified_result(snapshot, settings),
        "certificate": dict(certificate),
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": "labels-snapshot", "digest": {"sha256": sha256_hex(snapshot)}},
            {"name": "report", "digest": {"sha256": sha256_hex(report_document(predicate))}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


@dataclass(frozen=True)
class Mismatch:
    """One way a certificate and the labels or settings disagree."""

    field: str
    reason: str
    certified: Any
    found: Any


@dataclass(frozen=True)
class Verification:
    """Whether a certificate re-derives from a label export; every mismatch names its field."""

    match: bool
    mismatches: tuple[Mismatch, ...]
    notes: tuple[str, ...]


def _statement_iv(statement: Any) -> tuple[dict[str, Any], dict[str, str]]:
    if not isinstance(statement, Mapping) or statement.get("_type") != STATEMENT_TYPE:
        raise ValueError(f"not an in-toto Statement v1: '_type' must be {STATEMENT_TYPE!r}")
    if statement.get("predicateType") != PREDICATE_TYPE:
        raise ValueError(f"predicateType must be {PREDICATE_TYPE!r}")
    predicate = statement.get("predicate")
    needed = ("label_seq", "criterion", "protocol", "raters", "decision", "seeds", "snapshot", "result")
    if not isinstance(predicate, Mapping) or any(k not in predicate for k in needed):
        raise ValueError(f"the predicate must be an object with the fields {', '.join(needed)}")
    subjects = statement.get("subject")
    if not isinstance(subjects, list):
        raise ValueError("'subject' must be a list of {name, digest: {sha256}}")
    digests = {s.get("name"): (s.get("digest") or {}).get("sha256") for s in subjects if isinstance(s, Mapping)}
    if not {"labels-snapshot", "report"} <= set(digests):
        raise ValueError("the subjects must include 'labels-snapshot' and 'report'")
    if not all(isinstance(predicate[k], Mapping) for k in ("protocol", "raters", "decision", "seeds", "snapshot")):
        raise ValueError("predicate.protocol, raters, decision, seeds and snapshot must be objects")
    if not isinstance(predicate["label_seq"], int) or not isinstance(predicate["seeds"].get("seed"), int):
        raise ValueError("predicate.label_seq and predicate.seeds.seed must be integers")
    return dict(predicate), cast("dict[str, str]", digests)  # values checked against found digests


def _label_mismatch(certified: Mapping[str, Any], found: dict[str, Any], digest: str, found_digest: str) -> Mismatch:
    if found["n_rows"] > certified.get("n_rows", 0):
        reason = f"label added: {found['n_rows'] - certified.get('n_rows', 0)} more label(s) than certified"
    elif found["n_rows"] < certified.get("n_rows", 0):
        reason = f"label removed: {certified.get('n_rows', 0) - found['n_rows']} fewer label(s) than certified"
    elif found["cells_sha256"] != certified.get("cells_sha256"):
        reason = "labels moved: as many labels as certified, but on different (item, rater, criterion) cells"
    else:
        reason = "label changed: the same cells as certified, with a different value or seq"
    return Mismatch("labels-snapshot", reason, {**certified, "sha256": digest}, {**found, "sha256": found_digest})


def _differences(certified: Any, found: Any, path: str) -> list[Mismatch]:
    if isinstance(certified, Mapping) and isinstance(found, Mapping):
        keys = sorted(set(certified) | set(found))
        return [m for k in keys for m in _differences(certified.get(k), found.get(k), f"{path}.{k}")]
    if isinstance(certified, list) and isinstance(found, list) and len(certified) == len(found):
        return [
            m for k, (a, b) in enumerate(zip(certified, found, strict=True)) for m in _differences(a, b, f"{path}[{k}]")
        ]
    if certified != found:
        return [Mismatch(path, "the recomputed result differs", certified, found)]
    return []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def verify_certificate(statement: Any, rows: Iterable[Mapping[str, Any]]) -> Verification:
    """Re-derive a certificate from a label export (docs/method.md §10).

    Checks the snapshot digest, the report digest, the settings the result was computed
    with, and the result recomputed from the labels under the predicate's settings.
    Raises ``ValueError`` when ``statement`` is not an annoplan certificate.
    """
    predicate, digests = _statement_iv(statement)
    snapshot = label_snapshot(rows, label_seq=predicate["label_seq"])
    mismatches: list[Mismatch] = []
    found_digest = sha256_hex(snapshot)
    if found_digest != digests["labels-snapshot"]:
        mismatches.append(
            _label_mismatch(predicate["snapshot"], snapshot_summary(snapshot), digests["labels-snapshot"], found_digest)
        )
    report_digest = sha256_hex(report_document(predicate))
    if report_digest != digests["report"]:
        mismatches.append(
            Mismatch(
                "report",
                "the predicate differs from the one the report digest certifies",
                digests["report"],
                report_digest,
            )
        )
    echoed = _mapping(_mapping(predicate["result"]).get("computed_with"))
    for section, key in ECHOED:
        name, now = f"{section}.{key}", predicate[section].get(key)
        if echoed.get(name) != now:
            mismatches.append(
                Mismatch(name, "the setting differs from the one the result was computed with", echoed.get(name), now)
            )
    try:
        recomputed = certified_result(snapshot, predicate)
    except (KeyError, TypeError, ValueError) as error:
        mismatches.append(Mismatch("result", f"cannot be recomputed: {str(error)[:100]}", None, None))
    else:
        recomputed["computed_with"] = dict(echoed)  # a changed setting is named once, above
        mismatches += _differences(predicate["result"], recomputed, "result")
    here = software_versions()
    notes = tuple(
        f"certified with {name} {version}, checked with {here[name]}"
        for name, version in sorted(_mapping(predicate.get("software")).items())
        if here.get(name, version) != version
    )
    return Verification(match=not mismatches, mismatches=tuple(mismatches), notes=notes)
