"""Item patterns (planner.patterns): the shared compact path gives the dense path's results.

A matrix read once into ``ItemPatterns`` (from int8 codes, without a copy) and handed to the
validation decision, the ranking, the pilot and the agreement table must give what the dense
int64 matrix gives, to 1e-12, on random matrices with missing cells, abstentions excluded to
missing, ties and a rater with no overlap; the overlap rows must equal a plain item-by-item
reference.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.decision import validate_judge
from planner.patterns import item_patterns
from planner.pools import overlap_rows
from planner.ranking import rank_judges
from planner.rater_pairs import summary_table
from planner.xi_moments import pilot_moments

PROPERTY = settings(max_examples=40, deadline=None)


@st.composite
def label_matrices(draw: st.DrawFn) -> tuple[np.ndarray, int, np.ndarray | None]:
    """Judges in columns 0-1, humans after; missing and abstaining cells, ties, an idle rater.

    Raw codes ``0..L-1``, ``L`` (CANNOT_ASSESS) and ``-1``; the abstentions are excluded to
    missing as the service does. Few items and labels, so rows repeat and counts tie.
    """
    n_items = draw(st.integers(2, 60))
    n_humans = draw(st.integers(2, 5))
    n_labels = draw(st.integers(2, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    raw = rng.integers(0, n_labels + 1, size=(n_items, 2 + n_humans))
    raw[rng.random(raw.shape) < draw(st.floats(0.0, 0.7))] = -1
    if draw(st.booleans()):  # one human with no overlap at all
        raw[:, 2 + draw(st.integers(0, n_humans - 1))] = -1
    codes = np.where(raw >= n_labels, -1, raw)
    inclusion = rng.choice([0.25, 0.5, 1.0], size=n_items) if draw(st.booleans()) else None
    return codes, n_labels, inclusion


def compact(codes: np.ndarray) -> np.ndarray:
    """The codes as the service keeps them: int8, read-only."""
    small = codes.astype(np.int8)
    small.flags.writeable = False
    return small


def assert_same(a: object, b: object) -> None:
    """Two results equal field by field, floats to 1e-12 (NaN equal to NaN)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b)
        for field in dataclasses.fields(a):
            assert_same(getattr(a, field.name), getattr(b, field.name))
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, np.asarray(b), rtol=0, atol=1e-12)
    elif isinstance(a, float):
        assert isinstance(b, float)
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=0, abs=1e-12)
    else:
        assert a == b


def reference_overlap(codes: np.ndarray, judges: list[int], humans: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Item by item: rows ``[judges, humans]`` of items with every judge and >= 2 humans, counted."""
    kept = [
        row[judges + humans]
        for row in codes
        if all(row[j] != -1 for j in judges) and sum(row[h] != -1 for h in humans) >= 2
    ]
    if not kept:
        return np.zeros((0, len(judges) + len(humans)), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.unique(np.array(kept), axis=0, return_counts=True)


# --------------------------------------------------------------------------- the patterns


@PROPERTY
@given(label_matrices(), st.sampled_from([np.int8, np.int16, np.int64]))
def test_patterns_hold_every_item_once(case: tuple[np.ndarray, int, np.ndarray | None], dtype: type) -> None:
    codes, n_labels, inclusion = case
    p = item_patterns(codes.astype(dtype), n_labels, inclusion=inclusion)
    assert p.rows.dtype == np.int64 and p.n_items == codes.shape[0] and p.n_raters == codes.shape[1]
    tagged = codes if inclusion is None else np.column_stack([codes, inclusion])
    mine = p.rows if p.inclusion is None else np.column_stack([p.rows, p.inclusion])
    expected, expected_counts = np.unique(tagged, axis=0, return_counts=True)
    np.testing.assert_array_equal(mine, expected)
    np.testing.assert_array_equal(p.counts, expected_counts)


@PROPERTY
@given(label_matrices(), st.data())
def test_selected_columns_are_the_patterns_of_the_submatrix(
    case: tuple[np.ndarray, int, np.ndarray | None], data: st.DataObject
) -> None:
    codes, n_labels, inclusion = case
    columns = data.draw(st.lists(st.integers(0, codes.shape[1] - 1), min_size=1, unique=True))
    selected = item_patterns(codes, n_labels, inclusion=inclusion).select(columns)
    direct = item_patterns(codes[:, columns], n_labels)
    np.testing.assert_array_equal(selected.rows, direct.rows)
    np.testing.assert_array_equal(selected.counts, direct.counts)


@PROPERTY
@given(label_matrices(), st.integers(1, 2))
def test_overlap_rows_equal_an_item_by_item_reference(
    case: tuple[np.ndarray, int, np.ndarray | None], n_judges: int
) -> None:
    codes, n_labels, _ = case
    judges, humans = list(range(n_judges)), list(range(2, codes.shape[1]))
    rows, counts = overlap_rows(item_patterns(compact(codes), n_labels), judges, humans)
    expected, expected_counts = reference_overlap(codes, judges, humans)
    np.testing.assert_array_equal(rows, expected.reshape(-1, len(judges) + len(humans)))
    np.testing.assert_array_equal(counts, expected_counts)


def test_codes_are_checked_without_widening_and_patterns_are_not_rebuilt() -> None:
    codes = compact(np.array([[0, 1, -1], [1, 1, 0], [0, 1, -1]]))
    p = item_patterns(codes, 2)
    assert item_patterns(p, 2) is p
    with pytest.raises(ValueError, match="built for n_labels=2"):
        item_patterns(p, 3)
    with pytest.raises(ValueError, match="inclusion"):
        item_patterns(p, 2, inclusion=np.ones(3))
    with pytest.raises(ValueError, match=r"0\.\.1 or be -1"):
        item_patterns(np.array([[0, 2]], dtype=np.int8), 2)
    with pytest.raises(ValueError, match="inclusion must have shape"):
        item_patterns(codes, 2, inclusion=np.ones(2))


# --------------------------------------------------------------------------- shared = dense


@PROPERTY
@given(label_matrices(), st.sampled_from(["margin", "alt-test"]), st.sampled_from(["po", "kappa"]))
def test_validation_from_shared_patterns_equals_the_dense_matrix(
    case: tuple[np.ndarray, int, np.ndarray | None], rule: str, coefficient: str
) -> None:
    codes, n_labels, inclusion = case
    coefficient = "po" if rule == "alt-test" else coefficient
    shared = item_patterns(compact(codes), n_labels, inclusion=inclusion)
    options = {
        "judge": 0,
        "humans": list(range(2, codes.shape[1])),
        "n_labels": n_labels,
        "rule": rule,
        "coefficient": coefficient,
        "n_resamples": 60,
        "rng": 3,
    }
    assert_same(validate_judge(shared, **options), validate_judge(codes, inclusion=inclusion, **options))
    if rule == "margin" and coefficient == "po":
        ppi = {**options, "estimator": "ppi", "primary": 2}
        assert_same(validate_judge(shared, **ppi), validate_judge(codes, inclusion=inclusion, **ppi))


@PROPERTY
@given(label_matrices())
def test_ranking_pilot_and_agreement_from_shared_patterns_equal_the_dense_matrix(
    case: tuple[np.ndarray, int, np.ndarray | None],
) -> None:
    codes, n_labels, inclusion = case
    shared = item_patterns(compact(codes), n_labels, inclusion=inclusion)
    humans = list(range(2, codes.shape[1]))
    ranking = {"judges": [0, 1], "humans": humans, "n_labels": n_labels, "n_resamples": 60, "rng": 4}
    assert_same(rank_judges(shared, **ranking), rank_judges(codes, **ranking))
    pilot = {"judge": 1, "humans": humans, "n_labels": n_labels, "n_resamples": 60, "rng": 5}
    assert_same(pilot_moments(shared, **pilot), pilot_moments(codes, **pilot))
    for scale in ("nominal", "ordinal"):
        table = {"n_labels": n_labels, "scale": scale, "n_resamples": 60, "rng": 6}
        mine = summary_table(shared.select(humans), **table)
        dense = summary_table(codes[:, humans], **table)
        assert_same(
            {k: (e.result.statistic, e.interval) for k, e in mine.items()},
            {k: (e.result.statistic, e.interval) for k, e in dense.items()},
        )


def test_agreement_without_raters_is_undefined_not_an_error() -> None:
    table = summary_table(item_patterns(np.zeros((3, 0), dtype=np.int8), 2), n_labels=2, n_resamples=20, rng=0)
    assert all(not e.result.defined and e.result.reason for e in table.values())
