"""planner.protocol (issue 7): hand-built tables for every rule, brute-force bounds, identities."""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau, pearsonr, spearmanr
from sklearn.metrics import (
    accuracy_score,
    cohen_kappa_score,
    f1_score,
    matthews_corrcoef,
)
from statsmodels.stats.contingency_tables import mcnemar

from planner.aggregation import aggregate, cluster_bootstrap
from planner.agreement import kappa_from_table
from planner.bounds import allocation_bounds, manski_bounds, mcnemar_exact
from planner.codes import CANNOT_ASSESS, INVALID
from planner.protocol import (
    summarize,
    summary_from_table,
)
from planner.verdicts import verdict_table

MET, NOT = "MET", "NOT_MET"
CA, INV = CANNOT_ASSESS, INVALID
BINARY = (MET, NOT)
CATEGORIES = (MET, NOT, CA, INV)
FAST = settings(max_examples=40, deadline=None)

# Rows human, columns judge, over MET, NOT_MET, CA, INVALID.
HAND = np.array([[8, 2, 1, 1], [1, 5, 2, 0], [2, 1, 1, 0], [0, 0, 0, 0]])


Pairs = tuple[list[str], list[str]]


def expand(counts: np.ndarray, categories: tuple[str, ...] = CATEGORIES) -> Pairs:
    """Verdict vectors whose table is ``counts`` (rows human, columns judge)."""
    human, judge = [], []
    for (r, c), k in np.ndenumerate(counts):
        human += [categories[r]] * int(k)
        judge += [categories[c]] * int(k)
    return human, judge


def hand(**options: object):
    human, judge = expand(HAND)
    return summarize(human, judge, labels=BINARY, positive=MET, **options)


# --------------------------------------------------------------------------- tables


def test_verdict_table_counts_every_pair_including_ca_and_invalid() -> None:
    human, judge = expand(HAND)
    order = np.random.default_rng(0).permutation(len(human))
    t = verdict_table([human[i] for i in order], [judge[i] for i in order], labels=BINARY)
    assert t.categories == CATEGORIES
    assert np.array_equal(t.array(), HAND)
    assert t.n == 24


def test_verdict_table_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="same length"):
        verdict_table([MET], [MET, NOT], labels=BINARY)
    with pytest.raises(ValueError, match=r"judge verdicts contain \['maybe'\]"):
        verdict_table([MET], ["maybe"], labels=BINARY)
    with pytest.raises(ValueError, match="must not include the special values"):
        verdict_table([MET], [MET], labels=(MET, CA))
    with pytest.raises(ValueError, match="label strings"):
        verdict_table([1, 0], [1, 0], labels=BINARY)
    with pytest.raises(ValueError, match="distinct"):
        verdict_table([MET], [MET], labels=(MET, MET))


# --------------------------------------------------------------------------- rules


def test_exclude_on_hand_table() -> None:
    s = hand(handling="exclude")
    # covered 2x2 [[8, 2], [1, 5]]: p_o = 13/16, p_e = (10*9 + 6*7)/16^2 = 132/256
    assert s.n_items == 24 and s.n_eff == 16
    assert s.accuracy == pytest.approx(13 / 16)
    assert s.kappa == pytest.approx((208 - 132) / (256 - 132))
    assert s.f1_met == pytest.approx(16 / 19)
    assert s.human_positive_rate == pytest.approx(10 / 16)
    assert s.judge_positive_rate == pytest.approx(9 / 16)
    assert s.human_marginals == pytest.approx((10 / 16, 6 / 16))
    assert s.judge_marginals == pytest.approx((9 / 16, 7 / 16))
    assert s.human_abstain_rate == pytest.approx(4 / 24)
    assert s.judge_abstain_rate == pytest.approx(4 / 24)
    assert s.judge_invalid_rate == pytest.approx(1 / 24)
    assert s.human_invalid_rate == 0.0
    assert s.coverage == pytest.approx(16 / 24)
    assert s.covered_accuracy == pytest.approx(13 / 16)
    assert s.accuracy_bounds == pytest.approx((13 / 24, 21 / 24))
    assert s.scored_table.counts == ((8, 2), (1, 5))
    assert s.protocol.scale == "binary" and s.protocol.handling == "exclude"
    assert s.mean_cost == pytest.approx(3 / 16)


def test_recode_on_hand_table() -> None:
    s = hand(handling="recode")
    # CA -> NOT_MET on both sides, the INVALID pair dropped: [[8, 3], [3, 9]]
    assert s.protocol.recode_to == NOT
    assert s.scored_table.counts == ((8, 3), (3, 9))
    assert s.n_eff == 23
    assert s.accuracy == pytest.approx(17 / 23)
    assert s.kappa == pytest.approx((17 * 23 - 265) / (529 - 265))
    assert s.f1_met == pytest.approx(16 / 22)
    assert s.judge_invalid_rate == pytest.approx(1 / 24)
    assert s.accuracy_bounds is None and s.kappa_bounds is None


def test_three_class_on_hand_table() -> None:
    s = hand(handling="three_class")
    assert s.scored_table.categories == (MET, NOT, CA)
    assert s.scored_table.counts == ((8, 2, 1), (1, 5, 2), (2, 1, 1))
    assert s.accuracy == pytest.approx(14 / 23)
    # margins 11, 8, 4 on both sides: p_e = 201/529
    assert s.kappa == pytest.approx((14 * 23 - 201) / (529 - 201))
    assert s.f1_met == pytest.approx(16 / 22)
    assert s.protocol.scale == "nominal-with-abstention"
    assert s.protocol.cost_matrix == ((0, 1, 1), (1, 0, 1), (1, 1, 0))


def test_three_class_linear_costs_over_a_stated_ordering_match_sklearn() -> None:
    ordering = (NOT, CA, MET)
    s = hand(handling="three_class", costs="linear", ordering=ordering)
    human, judge = expand(HAND)
    keep = [i for i in range(len(human)) if INV not in (human[i], judge[i])]
    expected = cohen_kappa_score(
        [human[i] for i in keep], [judge[i] for i in keep], labels=list(ordering), weights="linear"
    )
    assert s.kappa == pytest.approx(expected)
    assert s.protocol.ordering == ordering
    assert s.protocol.cost_matrix == ((0, 0.5, 1), (0.5, 0, 0.5), (1, 0.5, 0))
    assert s.protocol.scale == "ordinal-with-abstention"


def test_custom_costs_equal_to_quadratic_give_the_quadratic_kappa_and_se() -> None:
    quadratic = hand(handling="three_class", costs="quadratic")
    custom = hand(handling="three_class", costs=[[0, 1, 4], [1, 0, 1], [4, 1, 0]])
    assert custom.protocol.costs == "custom"
    assert custom.protocol.scale == "custom-cost-with-abstention"
    assert custom.kappa == pytest.approx(quadratic.kappa)
    assert custom.kappa_se == pytest.approx(quadratic.kappa_se)
    assert custom.mean_cost == pytest.approx(4 * quadratic.mean_cost)


def test_kappa_delta_interval_comes_from_kappa_from_table() -> None:
    s = hand(handling="exclude", confidence_level=0.9)
    r = kappa_from_table([[8, 2], [1, 5]])
    assert s.kappa_se == pytest.approx(r.standard_error)
    ci = r.confidence_interval(0.9, method="delta")
    assert (s.kappa_interval.low, s.kappa_interval.high) == pytest.approx((ci.low, ci.high))
    assert s.kappa_interval_method == "delta"


def test_kappa_bootstrap_interval_is_reproducible_and_brackets_kappa() -> None:
    rng = np.random.default_rng(5)
    human = rng.choice([MET, NOT, CA], size=300, p=[0.5, 0.4, 0.1]).tolist()
    judge = [h if u < 0.8 else MET for h, u in zip(human, rng.random(300))]
    one = summarize(human, judge, labels=BINARY, positive=MET, interval="bootstrap", rng=1)
    two = summarize(human, judge, labels=BINARY, positive=MET, interval="bootstrap", rng=1)
    assert one.kappa_interval == two.kappa_interval
    assert one.kappa_interval.low < one.kappa < one.kappa_interval.high
    delta = summarize(human, judge, labels=BINARY, positive=MET)
    width = delta.kappa_interval.high - delta.kappa_interval.low
    assert one.kappa_interval.high - one.kappa_interval.low == pytest.approx(width, rel=0.25)


def test_invalid_is_never_recoded() -> None:
    human = [MET, NOT, MET, NOT]
    judge = [MET, NOT, INV, CA]
    s = summarize(human, judge, labels=BINARY, positive=MET, handling="recode")
    assert s.n_eff == 3  # the INVALID pair is dropped, CA recoded to NOT_MET
    assert s.accuracy == 1.0
    assert s.judge_invalid_rate == 0.25
    t = summarize(human, judge, labels=BINARY, positive=MET, handling="three_class")
    assert t.n_eff == 3 and INV not in t.scored_table.categories


def test_undefined_statistics_are_none_with_a_reason() -> None:
    s = summarize([MET, NOT, MET], [MET, MET, MET], labels=BINARY, positive=MET)
    assert s.kappa is None and s.phi is None and s.kappa_interval is None
    assert dict(s.reasons)["kappa"].startswith("rater 2 used a single category")
    assert "phi" in dict(s.reasons)
    assert s.accuracy == pytest.approx(2 / 3) and s.f1_met == pytest.approx(0.8)
    empty = summarize([CA, MET], [MET, CA], labels=BINARY, positive=MET)
    assert empty.n_eff == 0 and empty.accuracy is None and empty.kappa is None
    assert empty.accuracy_bounds == (0.0, 1.0)
    assert dict(empty.reasons)["all"] == "no pair is scored under this handling rule"
    none = summarize([NOT, NOT], [NOT, NOT], labels=BINARY, positive=MET)
    assert none.f1_met is None and "f1_met" in dict(none.reasons)


def test_results_serialise_to_strict_json() -> None:
    s = hand(handling="exclude", items=range(24))
    text = json.dumps(dataclasses.asdict(s), allow_nan=False, default=np.ndarray.tolist)  # item ids and cells
    assert '"handling": "exclude"' in text
    a = aggregate({"c1": s, "c2": s}, aggregation="macro", rng=0)
    json.dumps(dataclasses.asdict(a), allow_nan=False)


def test_summarize_validation_messages() -> None:
    human, judge = [MET, NOT], [MET, CA]
    cases = [
        ({"handling": "drop"}, "handling must be one of"),
        ({"positive": "YES"}, "positive must be one of labels"),
        ({"handling": "recode", "recode_to": MET}, "recode_to must be a negative label"),
        ({"recode_to": NOT}, "recode_to applies only to handling='recode'"),
        ({"costs": "cubic"}, "costs must be one of"),
        ({"costs": [[0, 1], [1, 1]]}, "zero diagonal"),
        ({"costs": [[0, 1, 1]] * 3}, r"shape \(2, 2\)"),
        ({"ordering": [MET, CA]}, "ordering must list each scored category"),
        ({"interval": "exact"}, "interval must be one of"),
        ({"confidence_level": 95}, "confidence_level must be a float"),
        ({"items": [1, 1]}, "items must be distinct"),
        ({"items": [1]}, "one id per verdict pair"),
    ]
    for options, message in cases:
        options = {"positive": MET, **options}
        with pytest.raises(ValueError, match=message):
            summarize(human, judge, labels=BINARY, **options)
    with pytest.raises(ValueError, match="recode_to is required"):
        summarize(human, judge, labels=("A", "B", "C"), positive="A", handling="recode")


# --------------------------------------------------------------------------- properties

verdict = st.sampled_from(CATEGORIES)
verdict_pairs = st.lists(st.tuples(verdict, verdict), min_size=1, max_size=60)


@FAST
@given(verdict_pairs)
def test_recoding_leaves_met_f1_unchanged(pairs: list[tuple[str, str]]) -> None:
    human, judge = zip(*pairs)
    three = summarize(human, judge, labels=BINARY, positive=MET, handling="three_class")
    recoded = summarize(human, judge, labels=BINARY, positive=MET, handling="recode")
    assert three.f1_met == recoded.f1_met
    # with two negative labels the choice of recode target does not matter either
    labels = (MET, NOT, "PARTLY")
    runs = [
        summarize(human, judge, labels=labels, positive=MET, handling="recode", recode_to=target).f1_met
        for target in (NOT, "PARTLY")
    ]
    assert runs[0] == runs[1] == three.f1_met


binary_pair = st.tuples(st.sampled_from(BINARY), st.sampled_from(BINARY))
binary_pairs = st.lists(binary_pair, min_size=2, max_size=60)


@FAST
@given(binary_pairs)
def test_exclusion_without_abstentions_equals_the_plain_metric(pairs: list) -> None:
    human, judge = (list(v) for v in zip(*pairs))
    s = summarize(human, judge, labels=BINARY, positive=MET)
    assert s.coverage == 1.0 and s.n_eff == len(pairs)
    assert s.accuracy == pytest.approx(accuracy_score(human, judge))
    assert s.accuracy_bounds == pytest.approx((s.accuracy, s.accuracy))
    if MET in human or MET in judge:
        assert s.f1_met == pytest.approx(f1_score(human, judge, pos_label=MET))
    if len(set(human)) == 2 and len(set(judge)) == 2:
        assert s.kappa == pytest.approx(cohen_kappa_score(human, judge))
        assert s.phi == pytest.approx(matthews_corrcoef(human, judge))
        assert s.kappa_bounds == pytest.approx((s.kappa, s.kappa))
    for handling in ("recode", "three_class"):
        other = summarize(human, judge, labels=BINARY, positive=MET, handling=handling)
        assert (other.accuracy, other.f1_met, other.kappa) == (s.accuracy, s.f1_met, s.kappa)


@FAST
@given(verdict_pairs, st.sampled_from(["exclude", "recode", "three_class"]))
def test_statistics_match_sklearn_on_the_scored_pairs(pairs: list[tuple[str, str]], handling: str) -> None:
    human, judge = zip(*pairs)
    s = summarize(human, judge, labels=BINARY, positive=MET, handling=handling)
    recode = {CA: NOT} if handling == "recode" else {}
    scored = [
        (recode.get(h, h), recode.get(j, j))
        for h, j in pairs
        if INV not in (h, j) and (handling != "exclude" or CA not in (h, j))
    ]
    assert s.n_eff == len(scored)
    if not scored:
        return
    h, j = (list(v) for v in zip(*scored))
    assert s.accuracy == pytest.approx(accuracy_score(h, j))
    if len(set(h)) > 1 and len(set(j)) > 1:
        assert s.kappa == pytest.approx(cohen_kappa_score(h, j))
    if MET in h or MET in j:
        assert s.f1_met == pytest.approx(f1_score(h, j, labels=[MET], average="micro"))


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(4, 80))
def test_phi_equals_pearson_spearman_kendall_and_mcc(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, n)
    y = np.where(rng.random(n) < 0.7, x, rng.integers(0, 2, n))
    if len(set(x)) < 2 or len(set(y)) < 2:
        x[:2], y[:2] = (0, 1), (1, 0)
    human = [MET if v else NOT for v in x]
    judge = [MET if v else NOT for v in y]
    phi = summarize(human, judge, labels=BINARY, positive=MET).phi
    assert phi == pytest.approx(pearsonr(x, y)[0])
    assert phi == pytest.approx(spearmanr(x, y)[0])
    assert phi == pytest.approx(kendalltau(x, y)[0])  # tau_b is scipy's default
    assert phi == pytest.approx(matthews_corrcoef(x, y))


RULES = ["exclude", "recode", "three_class"]
SEEDS = st.integers(0, 2**32 - 1)


@FAST
@given(verdict_pairs, st.sampled_from(RULES), SEEDS)
def test_order_and_side_swap_invariance(pairs: list, handling: str, seed: int) -> None:
    human, judge = (list(v) for v in zip(*pairs))
    s = summarize(human, judge, labels=BINARY, positive=MET, handling=handling)
    order = np.random.default_rng(seed).permutation(len(pairs))
    shuffled = summarize(
        [human[i] for i in order],
        [judge[i] for i in order],
        labels=BINARY,
        positive=MET,
        handling=handling,
    )
    assert shuffled.table == s.table and shuffled.kappa == s.kappa
    swapped = summarize(judge, human, labels=BINARY, positive=MET, handling=handling)
    for name in ("accuracy", "kappa", "f1_met", "phi", "coverage"):
        assert getattr(swapped, name) == pytest.approx(getattr(s, name))
    assert swapped.human_abstain_rate == s.judge_abstain_rate
    assert swapped.judge_positive_rate == s.human_positive_rate
    for name, low, high in (("accuracy", 0, 1), ("kappa", -1, 1), ("phi", -1, 1), ("f1_met", 0, 1)):
        value = getattr(s, name)
        assert value is None or low - 1e-12 <= value <= high + 1e-12


@FAST
@given(verdict_pairs, SEEDS)
def test_any_completion_of_the_abstentions_lies_within_the_bounds(pairs: list, seed: int) -> None:
    """Soundness without enumeration: fill every CA/INVALID side at random and score it."""
    human, judge = (list(v) for v in zip(*pairs))
    s = summarize(human, judge, labels=BINARY, positive=MET)
    rng = np.random.default_rng(seed)
    fill = {CA, INV}
    h = [v if v not in fill else BINARY[rng.integers(2)] for v in human]
    j = [v if v not in fill else BINARY[rng.integers(2)] for v in judge]
    full = summarize(h, j, labels=BINARY, positive=MET)
    low, high = s.accuracy_bounds
    assert low - 1e-12 <= full.accuracy <= high + 1e-12
    for name in ("kappa", "f1_met", "phi"):
        value, bounds = getattr(full, name), getattr(s, f"{name}_bounds")
        if value is not None:
            assert bounds[0] - 1e-12 <= value <= bounds[1] + 1e-12


# --------------------------------------------------------------------------- bounds


def test_manski_bounds_by_hand_and_validation() -> None:
    assert manski_bounds(0.5, 0.6) == pytest.approx((0.3, 0.8))
    assert manski_bounds(1.0, 0.75) == (0.75, 0.75)
    assert manski_bounds(0.0, None) == (0.0, 1.0)
    with pytest.raises(ValueError, match="coverage must be a number in"):
        manski_bounds(1.2, 0.5)
    with pytest.raises(ValueError, match="covered_accuracy must be a number in"):
        manski_bounds(0.5, None)


def brute_force_bounds(counts: np.ndarray, metric: str) -> tuple[float, float] | None:
    """Every allocation of every abstained/invalid cell, one cell at a time (itertools)."""
    size = counts.shape[0]
    choices = []
    for r, c in itertools.product(range(size), repeat=2):
        k = int(counts[r, c])
        rows = [r] if r < 2 else [0, 1]
        cols = [c] if c < 2 else [0, 1]
        targets = list(itertools.product(rows, cols))
        # all ways to put k indistinguishable pairs into the allowed cells
        splits = [s for s in itertools.product(range(k + 1), repeat=len(targets)) if sum(s) == k]
        choices.append([dict(zip(targets, s)) for s in splits])
    values = []
    for combo in itertools.product(*choices):
        t = np.zeros((2, 2))
        for part in combo:
            for cell, k in part.items():
                t[cell] += k
        value = metric_by_definition(t, metric)
        if value is not None:
            values.append(value)
    return (min(values), max(values)) if values else None


def metric_by_definition(t: np.ndarray, metric: str) -> float | None:
    """Textbook formulas on a 2x2 table, index 0 = positive, rows human."""
    n = t.sum()
    rows, cols = t.sum(axis=1) / n, t.sum(axis=0) / n
    p_o = np.trace(t) / n
    if metric == "accuracy":
        return p_o
    if metric == "f1_met":
        denominator = 2 * t[0, 0] + t[0, 1] + t[1, 0]
        return None if denominator == 0 else 2 * t[0, 0] / denominator
    if min(rows.min(), cols.min()) == 0:  # a side with one category: kappa and phi undefined
        return None
    if metric == "kappa":
        p_e = rows @ cols
        return (p_o - p_e) / (1 - p_e)
    return (t[0, 0] / n - rows[0] * cols[0]) / np.sqrt(rows[0] * rows[1] * cols[0] * cols[1])


small = st.integers(0, 3)
tiny = st.integers(0, 1)


@st.composite
def binary_tables(draw: st.DrawFn) -> np.ndarray:
    size = draw(st.sampled_from([3, 4]))
    counts = np.zeros((size, size), dtype=int)
    for r, c in itertools.product(range(size), repeat=2):
        both_unknown = r >= 2 and c >= 2
        counts[r, c] = draw(tiny if both_unknown or size == 4 else small)
    if counts.sum() == 0:
        counts[0, 0] = 1
    return counts


@FAST
@given(binary_tables(), st.sampled_from(["accuracy", "kappa", "f1_met", "phi"]))
def test_allocation_bounds_match_brute_force(counts: np.ndarray, metric: str) -> None:
    expected = brute_force_bounds(counts, metric)
    got = allocation_bounds(counts, metric=metric)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


@FAST
@given(binary_tables())
def test_manski_contains_every_sharp_accuracy_bound(counts: np.ndarray) -> None:
    n = counts.sum()
    covered = counts[:2, :2]
    gamma = covered.sum() / n
    low, high = manski_bounds(gamma, np.trace(covered) / covered.sum() if covered.sum() else None)
    sharp = allocation_bounds(counts, metric="accuracy")
    assert low - 1e-12 <= sharp[0] <= sharp[1] <= high + 1e-12
    # every completion is one allocation, so the sharp interval reaches both ends here
    assert sharp == pytest.approx((low, high))


def reachable_tables(counts: np.ndarray) -> np.ndarray:
    """Every completed 2x2 table ``(M, 2, 2)`` (index 0 = positive), one unknown pair at a time."""
    unknown = counts.sum() - counts[:2, :2].sum()
    # cells a completed pair can land in: 0 TP, 1 FN, 2 FP, 3 TN
    options = {(0, 2): (0, 1), (1, 2): (2, 3), (2, 0): (0, 2), (2, 1): (1, 3), (2, 2): (0, 1, 2, 3)}
    reach = np.zeros((unknown + 1,) * 3, dtype=bool)  # increments of TP, FN, FP
    reach[0, 0, 0] = True
    for (r, c), cells in options.items():
        rows = [r] if r < 2 else list(range(2, counts.shape[0]))
        cols = [c] if c < 2 else list(range(2, counts.shape[1]))
        for _ in range(int(counts[np.ix_(rows, cols)].sum())):
            new = np.zeros_like(reach)
            for cell in cells:
                if cell == 3:
                    new |= reach
                else:
                    index = [slice(None)] * 3
                    source = [slice(None)] * 3
                    index[cell], source[cell] = slice(1, None), slice(None, -1)
                    new[tuple(index)] |= reach[tuple(source)]
            reach = new
    steps = np.argwhere(reach)
    tables = np.empty((len(steps), 2, 2))
    tables[:, 0, 0] = counts[0, 0] + steps[:, 0]
    tables[:, 0, 1] = counts[0, 1] + steps[:, 1]
    tables[:, 1, 0] = counts[1, 0] + steps[:, 2]
    tables[:, 1, 1] = counts[1, 1] + unknown - steps.sum(axis=1)
    return tables


def metrics_by_definition(tables: np.ndarray, metric: str) -> np.ndarray:
    """Textbook formulas on 2x2 tables ``(M, 2, 2)``, index 0 = positive; NaN where undefined."""
    n = tables.sum(axis=(1, 2))
    rows, cols = tables.sum(axis=2) / n[:, None], tables.sum(axis=1) / n[:, None]
    p_o = (tables[:, 0, 0] + tables[:, 1, 1]) / n
    if metric == "accuracy":
        return p_o
    with np.errstate(invalid="ignore", divide="ignore"):
        if metric == "f1_met":
            return 2 * tables[:, 0, 0] / (2 * tables[:, 0, 0] + tables[:, 0, 1] + tables[:, 1, 0])
        degenerate = (rows.min(axis=1) == 0) | (cols.min(axis=1) == 0)
        if metric == "kappa":
            p_e = (rows * cols).sum(axis=1)
            value = (p_o - p_e) / (1 - p_e)
        else:
            spread = np.sqrt(rows[:, 0] * rows[:, 1] * cols[:, 0] * cols[:, 1])
            value = (tables[:, 0, 0] / n - rows[:, 0] * cols[:, 0]) / spread
    return np.where(degenerate, np.nan, value)


@st.composite
def medium_tables(draw: st.DrawFn) -> np.ndarray:
    counts = np.zeros((4, 4), dtype=int)
    for r, c in itertools.product(range(4), repeat=2):
        unknown = r >= 2 or c >= 2
        counts[r, c] = draw(st.integers(0, 2 if (r >= 2 and c >= 2) else 9 if unknown else 40))
    if counts.sum() == 0:
        counts[0, 0] = 1
    return counts


@settings(max_examples=30, deadline=None)
@given(medium_tables(), st.sampled_from(["accuracy", "kappa", "f1_met", "phi"]))
def test_allocation_bounds_match_every_reachable_table(counts: np.ndarray, metric: str) -> None:
    assert_bounds_are_the_extremes(counts, reachable_tables(counts), metric)


def assert_bounds_are_the_extremes(counts: np.ndarray, completed: np.ndarray, metric: str) -> None:
    """``allocation_bounds`` equal the min and max of ``metric`` over the ``completed`` tables, to 1e-12."""
    values = metrics_by_definition(completed, metric)
    got = allocation_bounds(counts, metric=metric)
    if not np.any(np.isfinite(values)):
        assert got is None
    else:
        assert got == pytest.approx((np.nanmin(values), np.nanmax(values)), rel=0, abs=1e-12)


def every_marginal_tables(counts: np.ndarray) -> np.ndarray:
    """Tables ``(M, 2, 2)`` at the smallest and largest TP of every pair of completed marginals.

    Each unknown group is split directly: the human-positive/judge-unknown pairs put ``x1`` in
    TP (the rest FN), human-negative ones ``x2`` in FP, judge-positive/human-unknown ``y1`` in
    TP, judge-negative ones ``y2`` in FN, and the both-unknown ones ``z1, z2, z3`` in TP, FN,
    FP (the rest TN). For each ``(z1, z2, z3)`` and every target ``(h, j)`` the free parts
    ``x1 + x2`` and ``y1 + y2`` are fixed, so TP ranges over a sum of two intervals; the
    metrics increase with TP at fixed marginals, so its two ends hold the extremes.
    """
    n = int(counts.sum())
    a, b, c, d = (int(v) for v in counts[:2, :2].ravel())
    up, un = int(counts[0, 2:].sum()), int(counts[1, 2:].sum())
    vp, vn = int(counts[2:, 0].sum()), int(counts[2:, 1].sum())
    w = int(counts[2:, 2:].sum())
    h, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    low = np.full(h.shape, n + 1)
    high = np.full(h.shape, -1)
    for z1, z2, z3 in itertools.product(range(w + 1), repeat=3):
        if z1 + z2 + z3 > w:
            continue
        free_h = h - (a + b + up + z1 + z2)  # y1 + y2
        free_j = j - (a + c + vp + z1 + z3)  # x1 + x2
        ok = (free_h >= 0) & (free_h <= vp + vn) & (free_j >= 0) & (free_j <= up + un)
        x_lo, x_hi = np.maximum(0, free_j - un), np.minimum(up, free_j)
        y_lo, y_hi = np.maximum(0, free_h - vn), np.minimum(vp, free_h)
        low = np.where(ok, np.minimum(low, a + z1 + x_lo + y_lo), low)
        high = np.where(ok, np.maximum(high, a + z1 + x_hi + y_hi), high)
    reach = high >= 0
    tp = np.concatenate([low[reach], high[reach]])
    hh, jj = np.tile(h[reach], 2), np.tile(j[reach], 2)
    return np.stack([tp, hh - tp, jj - tp, n - hh - jj + tp], axis=1).reshape(-1, 2, 2).astype(float)


@st.composite
def abstention_heavy_tables(draw: st.DrawFn) -> np.ndarray:
    """Tables with many abstained pairs against few covered ones, in any direction of agreement."""
    counts = np.zeros((4, 4), dtype=int)
    covered = draw(st.integers(0, 60))
    counts[:2, :2] = [[draw(st.integers(0, covered)) for _ in range(2)] for _ in range(2)]
    for cell in ((0, 2), (1, 2), (2, 0), (2, 1), (0, 3), (3, 1)):
        counts[cell] = draw(st.integers(0, 45))
    counts[2, 2] = draw(st.integers(0, 2))
    if counts.sum() == 0:
        counts[1, 0] = 1
    return counts


@settings(max_examples=60, deadline=None)
@given(abstention_heavy_tables(), st.sampled_from(["accuracy", "kappa", "f1_met", "phi"]))
def test_allocation_bounds_equal_every_marginal_of_abstention_heavy_tables(counts: np.ndarray, metric: str) -> None:
    assert_bounds_are_the_extremes(counts, every_marginal_tables(counts), metric)


def test_every_marginal_tables_equal_the_reachable_tables() -> None:
    counts = np.array([[3, 1, 2, 1], [0, 2, 1, 0], [2, 3, 1, 0], [0, 1, 0, 1]])
    mine = {tuple(t.ravel()) for t in every_marginal_tables(counts)}
    every = {tuple(t.ravel()) for t in reachable_tables(counts)}
    assert mine <= every
    # the two ends of TP at every reachable pair of marginals
    ends: dict[tuple[float, float], list[float]] = {}
    for t in every:
        ends.setdefault((t[0] + t[1], t[0] + t[2]), []).append(t[0])
    assert {(k, min(v)) for k, v in ends.items()} | {(k, max(v)) for k, v in ends.items()} == {
        ((t[0] + t[1], t[0] + t[2]), t[0]) for t in mine
    }


def test_allocation_bounds_by_hand() -> None:
    # 2 x (MET, CA): the judge's answer decides TP vs FN; nothing else is unknown
    f1 = allocation_bounds([[3, 0, 2], [0, 3, 0], [0, 0, 0]], metric="f1_met")
    assert f1 == pytest.approx((0.75, 1.0))
    # 3 x (CA, NOT_MET): k of them human-positive gives kappa 1, 16/23, 4/11, undefined
    kappa = allocation_bounds([[4, 0, 0], [0, 0, 0], [0, 3, 0]], metric="kappa")
    assert kappa == pytest.approx((4 / 11, 1.0))
    # every completion makes the human constant: kappa and phi are never defined
    assert allocation_bounds([[0, 0, 2], [0, 0, 0], [0, 0, 0]], metric="kappa") is None
    assert allocation_bounds([[0, 0, 2], [0, 0, 0], [0, 0, 0]], metric="phi") is None
    with pytest.raises(ValueError, match="metric must be one of"):
        allocation_bounds([[1, 0, 0], [0, 1, 0], [0, 0, 0]], metric="alpha")
    with pytest.raises(ValueError, match="ordered positive, negative"):
        allocation_bounds([[1, 0], [0, 1]], metric="accuracy")


def test_allocation_bounds_on_a_verdict_table_use_the_named_positive() -> None:
    human, judge = expand(HAND)
    t = verdict_table(human, judge, labels=BINARY)
    flipped = verdict_table(human, judge, labels=(NOT, MET))
    met, not_met = (allocation_bounds(t, metric="f1_met", positive=p) for p in (MET, NOT))
    assert met == allocation_bounds(flipped, metric="f1_met", positive=MET)
    assert not_met == allocation_bounds(flipped, metric="f1_met")
    assert met != not_met
    assert allocation_bounds(t, metric="kappa") == allocation_bounds(HAND, metric="kappa")
    # kappa and phi do not depend on which label is called positive
    phi = allocation_bounds(t, metric="phi")
    assert allocation_bounds(flipped, metric="phi") == pytest.approx(phi)


def test_summary_bounds_are_the_allocation_bounds() -> None:
    s = hand(handling="exclude")
    assert s.kappa_bounds == allocation_bounds(HAND, metric="kappa")
    assert s.f1_met_bounds == allocation_bounds(HAND, metric="f1_met")
    assert s.phi_bounds == allocation_bounds(HAND, metric="phi")
    assert s.sharp_accuracy_bounds == allocation_bounds(HAND, metric="accuracy")
    assert s.accuracy_bounds == pytest.approx(allocation_bounds(HAND, metric="accuracy"))


def test_allocation_bounds_scale_to_many_abstentions() -> None:
    counts = np.array([[400, 60, 150, 10], [50, 300, 120, 0], [140, 90, 80, 5], [0, 0, 0, 0]])
    for metric in ("accuracy", "kappa", "f1_met", "phi"):
        low, high = allocation_bounds(counts, metric=metric)
        assert low < high
    low, high = allocation_bounds(counts, metric="accuracy")
    # 1405 pairs, 700 agreeing covered ones, 595 with an unknown side
    assert (low, high) == pytest.approx((700 / 1405, (700 + 595) / 1405))


# --------------------------------------------------------------------------- McNemar


def test_mcnemar_exact_matches_statsmodels() -> None:
    for b, c in itertools.product(range(0, 25, 3), range(0, 25, 4)):
        expected = mcnemar([[10, b], [c, 10]], exact=True).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected)
    assert mcnemar_exact(1, 9) == pytest.approx(2 * 11 / 1024)
    with pytest.raises(ValueError, match="c must be a non-negative integer count"):
        mcnemar_exact(3, -1)


# --------------------------------------------------------------------------- aggregation


def criteria_data(seed: int, n_items: int = 120, n_criteria: int = 3) -> dict[str, Pairs]:
    rng = np.random.default_rng(seed)
    out = {}
    for c in range(n_criteria):
        human = rng.choice([MET, NOT, CA], size=n_items, p=[0.55, 0.4, 0.05])
        noise = rng.choice([MET, NOT, CA, INV], size=n_items)
        judge = np.where(rng.random(n_items) < 0.8, human, noise)
        out[f"c{c}"] = (human.tolist(), judge.tolist())
    return out


def summaries(data: dict, **options: object) -> dict:
    return {
        name: summarize(h, j, labels=BINARY, positive=MET, items=range(len(h)), **options)
        for name, (h, j) in data.items()
    }


@pytest.mark.parametrize("handling", ["exclude", "recode", "three_class"])
def test_macro_over_one_criterion_equals_micro(handling: str) -> None:
    one = summaries({"only": criteria_data(1)["c0"]}, handling=handling)
    micro = aggregate(one, aggregation="micro", rng=0)
    macro = aggregate(one, aggregation="macro", rng=0)
    for name in ("accuracy", "kappa", "f1_met", "phi"):
        assert getattr(macro, name) == pytest.approx(getattr(micro, name))
        assert getattr(micro, name) == pytest.approx(getattr(one["only"], name))
    assert micro.protocol.aggregation == "micro" and macro.protocol.resampling_unit == "criteria"
    # the pooled summary of one criterion is taken from it, not recomputed: the same as computing it
    table = one["only"].table.array()
    again = summary_from_table(table, micro.protocol, interval=None, item_ids=None, item_cells=np.zeros(0, int))
    fields = [f.name for f in dataclasses.fields(again) if f.name != "item_cells"]
    assert {f: getattr(micro.pooled, f) for f in fields} == {f: getattr(again, f) for f in fields}


def test_micro_pools_every_decision() -> None:
    data = criteria_data(2)
    micro = aggregate(summaries(data), aggregation="micro", rng=0)
    human = sum((h for h, _ in data.values()), [])
    judge = sum((j for _, j in data.values()), [])
    pooled = summarize(human, judge, labels=BINARY, positive=MET)
    assert micro.pooled.table == pooled.table
    for name in ("accuracy", "kappa", "f1_met", "phi"):
        assert getattr(micro, name) == getattr(pooled, name)
    assert micro.included == (("accuracy", 3, 3), ("kappa", 3, 3), ("f1_met", 3, 3), ("phi", 3, 3))


def test_macro_excludes_undefined_criteria_and_counts_them() -> None:
    h = [MET, MET, NOT, NOT]
    results = {
        "good": summarize(h, [MET, NOT, NOT, NOT], labels=BINARY, positive=MET),  # kappa 0.5
        "flat": summarize(h, [MET, MET, MET, MET], labels=BINARY, positive=MET),  # kappa undefined
        "fine": summarize(h, [MET, MET, NOT, NOT], labels=BINARY, positive=MET),  # kappa 1
    }
    m = aggregate(results, aggregation="macro", rng=0)
    assert m.kappa == pytest.approx(0.75)
    assert m.accuracy == pytest.approx((0.75 + 0.5 + 1.0) / 3)
    assert {k: (a, b) for k, a, b in m.included}["kappa"] == (2, 3)
    assert m.pooled is None
    low, high = m.kappa_interval.low, m.kappa_interval.high
    assert 0.5 <= low <= high <= 1.0
    alone = aggregate({"good": results["good"]}, aggregation="macro", rng=0)
    assert alone.kappa == 0.5 and alone.kappa_interval is None
    assert "kappa_interval" in dict(alone.reasons)
    all_flat = aggregate({"flat": results["flat"]}, aggregation="macro", rng=0)
    assert all_flat.kappa is None and all_flat.kappa_interval is None
    assert dict(all_flat.reasons)["kappa"] == "kappa is undefined on every criterion"


def test_item_level_combines_criteria_by_kleene_rules() -> None:
    # per item: (human c1, human c2) / (judge c1, judge c2)
    h1, h2 = [MET, MET, NOT, CA, MET], [MET, NOT, CA, MET, CA]
    j1, j2 = [MET, MET, MET, MET, INV], [MET, MET, NOT, CA, CA]
    results = {
        "c1": summarize(h1, j1, labels=BINARY, positive=MET, items=["a", "b", "c", "d", "e"]),
        "c2": summarize(h2, j2, labels=BINARY, positive=MET, items=["a", "b", "c", "d", "e"]),
    }
    every = aggregate(results, aggregation="item", rule="all", rng=0)
    # all: human (MET, NOT, NOT, CA, CA); judge (MET, MET, NOT, CA, INVALID)
    expected = verdict_table([MET, NOT, NOT, CA, CA], [MET, MET, NOT, CA, INV], labels=BINARY)
    assert every.pooled.table == expected
    assert every.rule == "all" and every.protocol.aggregation == "item"
    some = aggregate(results, aggregation="item", rule="any", rng=0)
    # any: human (MET, MET, CA, MET, MET); judge (MET, MET, MET, MET, INVALID)
    expected = verdict_table([MET, MET, CA, MET, MET], [MET, MET, MET, MET, INV], labels=BINARY)
    assert some.pooled.table == expected


def test_aggregate_validation_messages() -> None:
    data = criteria_data(3, n_items=20, n_criteria=2)
    good = summaries(data)
    with pytest.raises(ValueError, match="aggregation must be one of"):
        aggregate(good, aggregation="weighted")
    with pytest.raises(ValueError, match="non-empty mapping"):
        aggregate({}, aggregation="micro")
    mixed = {"a": good["c0"], "b": summaries(data, handling="recode")["c1"]}
    with pytest.raises(ValueError, match="different protocols"):
        aggregate(mixed, aggregation="macro")
    no_ids = {k: summarize(h, j, labels=BINARY, positive=MET) for k, (h, j) in data.items()}
    with pytest.raises(ValueError, match="summarize every criterion with items="):
        aggregate(no_ids, aggregation="micro")
    shifted = {
        "c0": good["c0"],
        "c1": summarize(*data["c1"], labels=BINARY, positive=MET, items=range(5, 25)),
    }
    with pytest.raises(ValueError, match="same items"):
        aggregate(shifted, aggregation="item")


def test_cluster_bootstrap_resamples_whole_items() -> None:
    h, j = criteria_data(4, n_items=200, n_criteria=1)["c0"]
    twin = summaries({"a": (h, j), "b": (h, j)})
    single = summaries({"a": (h, j)})
    pooled = cluster_bootstrap(twin, aggregation="micro", statistic="accuracy", n_resamples=3000, rng=0)
    alone = cluster_bootstrap(single, aggregation="micro", statistic="accuracy", n_resamples=3000, rng=1)
    # two identical criteria per item carry no more information than one: same spread,
    # not 1/sqrt(2) of it as resampling single decisions would give
    assert np.std(pooled) == pytest.approx(np.std(alone), rel=0.1)
    again = cluster_bootstrap(twin, aggregation="micro", statistic="accuracy", n_resamples=3000, rng=0)
    assert np.array_equal(pooled, again)


def test_cluster_bootstrap_macro_resamples_criteria() -> None:
    results = summaries(criteria_data(5, n_criteria=4))
    values = [s.kappa for s in results.values()]
    reps = cluster_bootstrap(results, aggregation="macro", statistic="kappa", n_resamples=500, rng=0)
    assert reps.shape == (500,)
    assert min(values) - 1e-12 <= reps.min() and reps.max() <= max(values) + 1e-12
    assert len(np.unique(np.round(reps, 12))) > 4
