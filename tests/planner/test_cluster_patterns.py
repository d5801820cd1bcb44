"""The report's cluster bootstrap over distinct item patterns (issue 20) equals the per-item one.

The reference below builds every item's row of cell counts with Python loops, takes the
distinct rows with ``np.unique(axis=0)`` and draws their multiplicities: the algorithm the
compressed path replaced. Same seed, same replicates, exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.aggregation import aggregate, cluster_bootstrap
from planner.codes import CANNOT_ASSESS, INVALID
from planner.protocol import STATISTICS, Summary, statistic_stack, summarize, summarize_codes

LABELS = ("MET", "NOT_MET")
CATEGORIES = (*LABELS, CANNOT_ASSESS, INVALID)
SIZE = len(CATEGORIES)
PROPERTY = settings(max_examples=60, deadline=None)


def per_item_rows(results: dict[str, Summary], aggregation: str, rule: str, positive: int) -> np.ndarray:
    """Each item's counts over the table's cells, one criterion at a time (loops, no numpy tricks)."""
    cells_of: dict[str, list[int]] = {}
    for summary in results.values():
        for item, cell in zip(summary.item_ids.tolist(), summary.item_cells.tolist(), strict=True):
            cells_of.setdefault(str(item), []).append(cell)
    rows = []
    for cells in cells_of.values():
        row = [0] * SIZE * SIZE
        if aggregation == "item":
            decisive, default = (1 - positive, positive) if rule == "all" else (positive, 1 - positive)

            def combined(side: list[int], decisive: int = decisive, default: int = default) -> int:
                for value in (decisive, 3, 2):  # the decisive label, then INVALID, then CANNOT_ASSESS
                    if value in side:
                        return value
                return default

            row[combined([c // SIZE for c in cells]) * SIZE + combined([c % SIZE for c in cells])] += 1
        else:
            for cell in cells:
                row[cell] += 1
        rows.append(row)
    return np.array(rows, dtype=np.int64).reshape(-1, SIZE * SIZE)


def reference_replicates(
    results: dict[str, Summary], aggregation: str, rule: str, statistic: str, n_resamples: int, seed: int
) -> np.ndarray:
    protocol = next(iter(results.values())).protocol
    rows = per_item_rows(results, aggregation, rule, protocol.labels.index(protocol.positive))
    patterns, multiplicity = np.unique(rows, axis=0, return_counts=True)
    draws = np.random.default_rng(seed).multinomial(multiplicity.sum(), multiplicity / multiplicity.sum(), n_resamples)
    return statistic_stack((draws @ patterns).reshape(n_resamples, SIZE, SIZE), protocol, statistic)


@st.composite
def criteria(draw: st.DrawFn, same_items: bool) -> dict[str, Summary]:
    """1-3 criteria over a pool of items (integer or string ids); each criterion on a subset unless ``same_items``."""
    n_items = draw(st.integers(2, 40))
    pool = np.arange(n_items) * 7 + 3
    kind = draw(st.sampled_from(["small ints", "wide ints", "strings"]))  # the id alignments of _cells_by_item
    ids: np.ndarray = {"small ints": pool, "wide ints": pool * 10**12, "strings": pool.astype(str)}[kind]
    positive = draw(st.sampled_from(LABELS))
    handling = draw(st.sampled_from(["exclude", "recode", "three_class"]))
    out = {}
    for c in range(draw(st.integers(1, 3))):
        on = (
            np.ones(n_items, bool)
            if same_items
            else np.array(draw(st.lists(st.booleans(), min_size=n_items, max_size=n_items)))
        )
        on[draw(st.integers(0, n_items - 1))] = True
        codes = np.array(draw(st.lists(st.integers(0, 3), min_size=2 * n_items, max_size=2 * n_items)))
        # mostly regular labels, so kappa is usually defined
        codes = np.where(
            codes >= 2, np.array(draw(st.lists(st.integers(0, 3), min_size=2 * n_items, max_size=2 * n_items))), codes
        )
        human, judge = codes[:n_items][on], codes[n_items:][on]
        order = np.array(draw(st.permutations(range(int(on.sum())))), dtype=np.int64)
        out[f"c{c}"] = summarize_codes(
            human[order], judge[order], labels=LABELS, positive=positive, handling=handling, items=ids[on][order]
        )
    return out


@PROPERTY
@given(criteria(same_items=False), st.sampled_from(STATISTICS), st.integers(0, 2**16))
def test_micro_replicates_equal_the_per_item_bootstrap(results: dict, statistic: str, seed: int) -> None:
    got = cluster_bootstrap(results, aggregation="micro", statistic=statistic, n_resamples=200, rng=seed)
    want = reference_replicates(results, "micro", "all", statistic, 200, seed)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)  # NaN where both are undefined


@PROPERTY
@given(criteria(same_items=True), st.sampled_from(["all", "any"]), st.sampled_from(STATISTICS), st.integers(0, 2**16))
def test_item_level_replicates_and_table_equal_the_per_item_ones(
    results: dict, rule: str, statistic: str, seed: int
) -> None:
    got = cluster_bootstrap(results, aggregation="item", rule=rule, statistic=statistic, n_resamples=200, rng=seed)
    want = reference_replicates(results, "item", rule, statistic, 200, seed)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    table = aggregate(results, aggregation="item", rule=rule, rng=seed).pooled
    assert table is not None
    positive = LABELS.index(next(iter(results.values())).protocol.positive)
    rows = per_item_rows(results, "item", rule, positive)
    np.testing.assert_array_equal(table.table.array().ravel(), rows.sum(axis=0))


def test_the_equality_is_sensitive_to_the_order_of_the_patterns() -> None:
    """The properties above can fail: the same patterns drawn in another order give other replicates."""
    human, judge = np.array([0, 0, 1, 1, 2, 0, 1, 0]), np.array([0, 1, 1, 1, 0, 0, 0, 3])
    results = {"c": summarize_codes(human, judge, labels=LABELS, positive="MET", items=np.arange(8))}
    got = cluster_bootstrap(results, aggregation="micro", statistic="accuracy", n_resamples=300, rng=5)
    np.testing.assert_allclose(got, reference_replicates(results, "micro", "all", "accuracy", 300, 5), atol=1e-12)
    patterns, multiplicity = np.unique(per_item_rows(results, "micro", "all", 0), axis=0, return_counts=True)
    draws = np.random.default_rng(5).multinomial(8, multiplicity[::-1] / 8, 300)
    tables = (draws @ patterns[::-1]).reshape(300, SIZE, SIZE)
    other = statistic_stack(tables, results["c"].protocol, "accuracy")
    assert not np.allclose(got, other, equal_nan=True)


@PROPERTY
@given(
    st.lists(st.tuples(st.sampled_from(CATEGORIES), st.sampled_from(CATEGORIES)), min_size=1, max_size=50),
    st.sampled_from(["exclude", "recode", "three_class"]),
)
def test_summarize_codes_equals_summarize_on_the_label_strings(pairs: list, handling: str) -> None:
    human, judge = (list(side) for side in zip(*pairs, strict=True))
    items = [f"i{k}" for k in range(len(pairs))]
    by_string = summarize(human, judge, labels=LABELS, positive="MET", handling=handling, items=items)
    by_code = summarize_codes(
        np.array([CATEGORIES.index(v) for v in human]),
        np.array([CATEGORIES.index(v) for v in judge]),
        labels=LABELS,
        positive="MET",
        handling=handling,
        items=items,
    )
    assert by_code.table == by_string.table and by_code.kappa == by_string.kappa
    assert by_code.accuracy == by_string.accuracy and by_code.phi == by_string.phi
    np.testing.assert_array_equal(by_code.item_cells, by_string.item_cells)
    np.testing.assert_array_equal(by_code.item_ids, by_string.item_ids)


def test_summarize_codes_rejects_codes_outside_the_categories() -> None:
    with pytest.raises(ValueError, match=r"human codes must lie in 0\.\.3"):
        summarize_codes(np.array([0, 4]), np.array([0, 1]), labels=LABELS, positive="MET")
    with pytest.raises(ValueError, match="judge codes must be a 1-d integer array"):
        summarize_codes(np.array([0, 1]), np.array(["MET", "MET"]), labels=LABELS, positive="MET")
    with pytest.raises(ValueError, match="same length"):
        summarize_codes(np.array([0, 1]), np.array([0]), labels=LABELS, positive="MET")
