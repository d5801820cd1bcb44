"""The reliability document's statistics read shared item patterns and one shared resample of the items: they
equal the planner on the dense matrix (the coefficients reading the validation's resample)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner.decision import validate_judge
from planner.patterns import item_patterns
from planner.rater_pairs import summary_table
from planner.resampling import ItemResample
from planner.xi_moments import pilot_moments
from service.documents import reliability
from service.matrices.matrix import LabelMatrix, RaterColumn
from service.schemas.projects import DecisionSettings


def _matrix(rng: np.random.Generator) -> LabelMatrix:
    n, k, n_labels = int(rng.integers(20, 300)), int(rng.integers(3, 7)), int(rng.integers(2, 4))
    raw = rng.integers(-1, n_labels + 2, size=(n, k))  # missing, labels, CANNOT_ASSESS and INVALID
    raw[:, 0] = rng.integers(0, n_labels, n)
    order = np.where(raw >= 0, rng.permutation(raw.size).reshape(raw.shape), -1)
    raters = [RaterColumn(1, "judge", "judge"), RaterColumn(2, "prim", "primary")]
    raters += [RaterColumn(3 + i, f"h{i}", "human") for i in range(k - 2)]
    return LabelMatrix(
        raw=raw, item_ids=np.arange(n), raters=raters, n_labels=n_labels, label_seq=7, criterion="c", order=order
    )


def _same(a: object, b: object) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


@pytest.mark.parametrize("seed", range(12))
def test_document_statistics_equal_the_planner_on_the_dense_matrix(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = _matrix(rng)
    inclusion = None if seed % 2 else rng.choice([0.2, 0.5, 1.0], size=m.raw.shape[0])
    decision = DecisionSettings(**({"estimator": "ppi"} if seed % 3 == 0 else {}))
    patterns = item_patterns(m.codes, m.n_labels, inclusion=inclusion)
    doc = reliability.document_statistics(patterns, m.raters, decision, scale="nominal", n_resamples=200, seed=7)
    humans = m.columns("primary", "human")
    dense = validate_judge(
        m.codes,
        judge=0,
        humans=humans,
        omega_threshold=decision.omega_threshold,
        inconclusive_level=decision.inconclusive_level,
        n_labels=m.n_labels,
        rule=decision.rule,
        coefficient=decision.coefficient,
        epsilon=decision.resolved_epsilon(),
        q=decision.q,
        n_resamples=200,
        rng=7,
        inclusion=inclusion,
        estimator=decision.estimator,
        primary=1,
    )
    assert doc["judges"][0]["decision"] == dense.decision
    assert [r["m"] for r in doc["judges"][0]["raters"]] == [r.m for r in dense.raters]
    assert _same([r["ci"] for r in doc["judges"][0]["raters"]], [r.ci.as_list() for r in dense.raters])
    assert _same(doc["judges"][0]["omega"], dense.omega)
    # the coefficients read the validation's resample of the items (drawn with the same seed over the
    # matrix's patterns), each pattern's multiplicity summed into its human row's
    full = item_patterns(m.codes, m.n_labels, inclusion=inclusion)
    resample = ItemResample.draw(full.counts, full.n_items, 200, 7)
    human = item_patterns(m.codes[:, humans], m.n_labels)
    row_of = {tuple(row): i for i, row in enumerate(human.rows.tolist())}
    groups = np.array([row_of[tuple(row)] for row in full.rows[:, humans].tolist()])
    table = summary_table(
        m.codes[:, humans], n_labels=m.n_labels, scale="nominal", resample=resample.merged(groups, human.counts.size)
    )
    assert _same(doc["coefficients"], {k: e.as_dict() for k, e in table.items()})
    alone = summary_table(m.codes[:, humans], n_labels=m.n_labels, scale="nominal", n_resamples=200, rng=7)
    statistics = [[e.result.statistic for e in t.values()] for t in (alone, table)]
    np.testing.assert_array_equal(*statistics)
    pilot = pilot_moments(
        m.codes, judge=0, humans=humans, n_labels=m.n_labels, rule=decision.rule, n_resamples=200, rng=0
    )
    if np.isfinite(pilot.mu_d) and np.isfinite(pilot.sigma0_sq):
        assert (doc["recipe_now"]["mu_d"], doc["recipe_now"]["sigma0_sq"]) == (pilot.mu_d, pilot.sigma0_sq)
    else:
        assert doc["recipe_now"]["m_cert"] is None
