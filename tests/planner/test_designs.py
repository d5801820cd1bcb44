"""Tests for planner.designs (docs/method.md §5)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import designs
from planner.design_choice import DesignChoice, choose_design, stratum_entropy
from planner.design_masks import design_masks
from planner.designs import (
    _CANDIDATE_MARGIN,
    DESIGNS,
    depth_first,
    disjoint,
    joint_strata,
    proportional_allocation,
    random_subsets,
    shared_panel,
    strat,
    stratified_masks,
)
from planner.seq_designs import coverage_codes, coverage_quota, modal_strata, seq_coverage, seq_list, seq_refined

RATERS = ["r2", "r3", "r4"]


def prefix_deviation(strata: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per stratum, the largest |count in prefix t - t * share| over all prefixes t."""
    labels = strata[order]
    codes = np.unique(labels)
    cum = np.cumsum(labels[:, None] == codes, axis=0)
    t = np.arange(1, labels.size + 1)[:, None]
    return np.abs(cum - t * cum[-1] / labels.size).max(axis=0)


def check_lists(lists: dict, raters: list, n_items: int, m: int) -> None:
    assert list(lists) == raters
    for items in lists.values():
        assert items.dtype == np.int64
        assert items.size == m
        assert np.unique(items).size == m
        assert items.min() >= 0 and items.max() < n_items


strata_and_m = st.integers(2, 5).flatmap(
    lambda n_strata: st.lists(st.integers(0, n_strata - 1), min_size=2, max_size=300).flatmap(
        lambda s: st.tuples(st.just(np.array(s)), st.integers(1, len(s)), st.integers(0, 2**32 - 1))
    )
)


# --- proportional allocation -------------------------------------------------------------


def test_allocation_hand_computed():
    # shares 7 * (.5, .3, .2) = 3.5, 2.1, 1.4: floors 3, 2, 1 and the one left goes to .5
    assert proportional_allocation([50, 30, 20], 7).tolist() == [4, 2, 1]
    # equal remainders .5, .5 with one item left: tie to the lower stratum index
    assert proportional_allocation([1, 1], 1).tolist() == [1, 0]
    # min_per_stratum lifts the rare strata, the rest is shared by the large one
    assert proportional_allocation([90, 9, 1], 10, min_per_stratum=2).tolist() == [7, 2, 1]
    # batched: one row per problem, one total per row
    assert proportional_allocation([[5, 5], [9, 1]], [4, 5]).tolist() == [[2, 2], [5, 0]]


def test_allocation_rejects_bad_input():
    with pytest.raises(ValueError, match="too small"):
        proportional_allocation([5, 5, 5], 2, min_per_stratum=1)
    with pytest.raises(ValueError, match="m must lie between"):
        proportional_allocation([5, 5], 11)
    with pytest.raises(ValueError, match="non-negative stratum sizes"):
        proportional_allocation([-1, 5], 2)


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 200), min_size=1, max_size=6).filter(lambda s: sum(s) > 0),
    frac=st.floats(0, 1),
    minimum=st.integers(0, 5),
)
def test_allocation_properties(sizes, frac, minimum):
    m = int(round(frac * sum(sizes)))
    floors = np.minimum(minimum, sizes)
    if floors.sum() > m:
        return
    alloc = proportional_allocation(sizes, m, min_per_stratum=minimum)
    assert alloc.sum() == m
    assert np.all(alloc <= sizes) and np.all(alloc >= floors)
    if minimum == 0:
        share = m * np.asarray(sizes) / sum(sizes)
        assert np.all(np.abs(alloc - share) < 1)


# --- strat ------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(strata_and_m)
def test_strat_matches_proportions_within_one_item(case):
    s, m, seed = case
    lists = strat(s, m, raters=RATERS, rng=seed)
    check_lists(lists, RATERS, s.size, m)
    panel = lists["r2"]
    for items in lists.values():
        assert np.array_equal(items, panel)
    sizes = np.bincount(s)
    got = np.bincount(s[panel], minlength=sizes.size)
    assert np.all(np.abs(got - m * sizes / s.size) < 1)


@settings(max_examples=150, deadline=None)
@given(strata_and_m)
def test_every_prefix_is_near_proportional(case):
    # With w = the stratum's share of the list and S strata, the interleaving keeps every
    # prefix within (1 + (S - 2) w) / 2 items of proportional: within one item for S <= 3.
    s, m, seed = case
    panel = strat(s, m, raters=["a"], rng=seed)["a"]
    labels = s[panel]
    n_strata = np.unique(labels).size
    w = np.unique(labels, return_counts=True)[1] / m
    bound = (1 + max(n_strata - 2, 0) * w) / 2
    assert np.all(prefix_deviation(s, panel) <= bound + 1e-9)
    if n_strata <= 3:
        assert np.all(prefix_deviation(s, panel) <= 1)


def test_strat_prefix_of_skewed_panel_is_interleaved():
    s = np.array([0] * 80 + [1] * 20)
    panel = strat(s, 50, raters=["a"], rng=3)["a"]
    # 40 of stratum 0 and 10 of stratum 1: each block of 5 holds exactly one stratum-1 item
    assert (s[panel].reshape(10, 5).sum(axis=1) == 1).all()


def test_strat_min_per_stratum_and_validation():
    s = np.array([0] * 97 + [1] * 2 + [2])
    panel = strat(s, 10, raters=["a"], min_per_stratum=1, rng=0)["a"]
    assert np.bincount(s[panel]).tolist() == [8, 1, 1]
    with pytest.raises(ValueError, match="strata must lie in 0..1"):
        strat(s, 10, raters=["a"], n_labels=2)
    with pytest.raises(ValueError, match="m must lie in 1..100"):
        strat(s, 101, raters=["a"])
    with pytest.raises(ValueError, match="sequence of rater ids"):
        strat(s, 10, raters="a")
    with pytest.raises(ValueError, match="unique"):
        strat(s, 10, raters=["a", "a"])


def test_designs_are_reproducible_from_rng():
    s = np.arange(200) % 3
    assert np.array_equal(strat(s, 30, raters=["a"], rng=7)["a"], strat(s, 30, raters=["a"], rng=7)["a"])
    assert not np.array_equal(strat(s, 30, raters=["a"], rng=7)["a"], strat(s, 30, raters=["a"], rng=8)["a"])


# --- baselines ---------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 300), frac=st.floats(0.01, 1), seed=st.integers(0, 2**32 - 1))
def test_baselines_return_valid_lists(n, frac, seed):
    m = max(1, int(frac * n))
    check_lists(random_subsets(n, m, raters=RATERS, rng=seed), RATERS, n, m)
    check_lists(shared_panel(n, m, raters=RATERS, rng=seed), RATERS, n, m)
    lists = depth_first(n, m, raters=RATERS)
    check_lists(lists, RATERS, n, m)
    assert lists["r3"].tolist() == list(range(m))


def test_random_subsets_fragment_overlap():
    # docs/method.md §5: two independent subsets share m^2 / n items on average (hypergeometric)
    n, m, reps = 400, 100, 300
    shared = [np.intersect1d(*random_subsets(n, m, raters=["a", "b"], rng=seed).values()).size for seed in range(reps)]
    sd = np.sqrt(m * (m / n) * (1 - m / n) * (n - m) / (n - 1))
    assert abs(np.mean(shared) - m * m / n) < 4 * sd / np.sqrt(reps)


# --- sequential designs ------------------------------------------------------------------


def test_modal_strata_hand_computed():
    codes = np.array([[0, 1, 1], [0, 1, -1], [2, 1, 1], [1, 0, 2], [-1, -1, -1]])
    # mode 1; tie -> primary 0; mode 1 over primary 2; three-way tie -> primary 1; no label
    assert modal_strata(codes, primary=0, n_labels=3).tolist() == [1, 0, 1, 1, 3]
    assert modal_strata(codes, primary=1, n_labels=3).tolist() == [1, 1, 1, 0, 3]


def test_seq_refined_stratifies_on_labels_in_hand():
    rng = np.random.default_rng(0)
    primary = rng.integers(0, 2, 300)
    second = np.where(rng.random(300) < 0.3, rng.integers(0, 2, 300), -1)
    third = np.where(rng.random(300) < 0.3, rng.integers(0, 2, 300), -1)
    codes = np.stack([primary, second, third], axis=1)
    s = modal_strata(codes, primary=0, n_labels=2)
    lists = seq_refined(codes, 60, primary=0, raters=["r4", "r5"], n_labels=2, rng=1)
    check_lists(lists, ["r4", "r5"], 300, 60)
    share = 60 * np.bincount(s) / 300
    for items in lists.values():
        assert np.all(np.abs(np.bincount(s[items], minlength=2) - share) < 1)
        assert np.all(prefix_deviation(s, items) <= 1)
    assert not np.array_equal(np.sort(lists["r4"]), np.sort(lists["r5"]))


def pairwise_overlaps(lists: dict) -> np.ndarray:
    return np.array([np.intersect1d(a, b).size for a, b in itertools.combinations(lists.values(), 2)])


def test_seq_coverage_equalises_pairwise_overlap_at_the_random_level():
    """Every pair of secondaries shares about m^2/n items (not zero, not a shared panel), with a
    much smaller spread across pairs than independent Seq-Refined draws."""
    rng = np.random.default_rng(5)
    n, m = 600, 120
    codes = rng.integers(0, 3, n)[:, None]
    raters = ["r2", "r3", "r4", "r5"]
    coverage_spread, refined_spread = [], []
    for seed in range(20):
        cov = seq_coverage(codes, m, primary=0, raters=raters, n_labels=3, rng=seed)
        ref = seq_refined(codes, m, primary=0, raters=raters, n_labels=3, rng=seed)
        check_lists(cov, raters, n, m)
        overlaps = pairwise_overlaps(cov)
        assert np.all(np.abs(overlaps - m * m / n) <= 4)  # 24 each, up to rounding over strata
        coverage_spread.append(np.ptp(overlaps))
        refined_spread.append(np.ptp(pairwise_overlaps(ref)))
    assert np.mean(coverage_spread) < np.mean(refined_spread) / 2


def test_disjoint_subsets_while_they_fit_then_even_coverage():
    rng = np.random.default_rng(6)
    primary = rng.integers(0, 2, 100)
    lists = disjoint(primary, 30, raters=["r2", "r3", "r4"], rng=0)
    check_lists(lists, ["r2", "r3", "r4"], 100, 30)
    counts = np.bincount(np.concatenate(list(lists.values())), minlength=100)
    assert counts.max() == 1  # m (K - 1) = 90 <= 100: no item is given twice
    for items in lists.values():  # each subset proportional to the primary's labels
        share = 30 * np.bincount(primary, minlength=2) / 100
        assert np.all(np.abs(np.bincount(primary[items], minlength=2) - share) < 1)
    # 210 assignments over 100 items: no item gets a third rater while one in its stratum has one
    crowded = disjoint(primary, 70, raters=["r2", "r3", "r4"], rng=0)
    counts = np.bincount(np.concatenate(list(crowded.values())), minlength=100)
    for stratum in (0, 1):
        assert np.ptp(counts[primary == stratum]) <= 1


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 3000),
    n_strata=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_disjoint_takes_each_strata_quota_least_covered_then_lowest_key(data, n, n_strata, seed):
    """Each rater's items are, per stratum, its proportional quota of the items covered least so far,
    then of lowest key, the key being the rater's uniform draw; checked by sorting every item of every
    stratum (the design sorts only the items near the quota)."""
    strata = np.array(data.draw(st.lists(st.integers(0, n_strata - 1), min_size=n, max_size=n)))
    covered = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    m = data.draw(st.integers(1, n))
    lists = disjoint(strata, m, raters=["a", "b"], coverage=covered, rng=seed)
    gen = np.random.default_rng(seed)
    quota = proportional_allocation(np.bincount(strata), m)
    for rater in ("a", "b"):
        key = gen.random(n)
        expected = []
        for stratum, take in enumerate(quota):
            members = [i for i in range(n) if strata[i] == stratum]
            expected += sorted(members, key=lambda i: (covered[i], key[i]))[:take]
        assert sorted(lists[rater].tolist()) == sorted(expected)
        covered = covered.copy()
        covered[expected] += 1


def test_disjoint_one_rater_at_task_start_and_seq_coverage_validation():
    codes = np.array([[0, 1], [0, -1], [1, 1], [1, -1], [0, -1], [1, -1]])
    # the service passes its own assignment counts, e.g. an item assigned but not labeled
    coverage = np.array([1, 0, 1, 1, 2, 0])
    lists = disjoint(codes[:, 0], 2, raters=["new"], n_labels=2, coverage=coverage, rng=0)
    # stratum 0 = items 0, 1, 4 -> least covered is item 1; stratum 1 = 2, 3, 5 -> item 5
    assert sorted(lists["new"].tolist()) == [1, 5]
    with pytest.raises(ValueError, match="coverage must be one integer count per item"):
        disjoint(codes[:, 0], 2, raters=["new"], n_labels=2, coverage=[1, 2])
    with pytest.raises(ValueError, match="assigned must be a boolean matrix"):
        seq_coverage(codes, 2, primary=0, raters=["new"], n_labels=2, assigned=[1, 2])
    with pytest.raises(ValueError, match="primary must be a column index"):
        seq_coverage(codes, 2, primary=2, raters=["new"], n_labels=2)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(3, 120),
    n_cols=st.integers(1, 4),
    frac=st.floats(0.01, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_seq_designs_never_duplicate(n, n_cols, frac, seed):
    rng = np.random.default_rng(seed)
    codes = np.where(rng.random((n, n_cols)) < 0.6, rng.integers(0, 3, (n, n_cols)), -1)
    codes[:, 0] = rng.integers(0, 3, n)
    m = max(1, int(frac * n))
    check_lists(seq_refined(codes, m, primary=0, raters=RATERS, n_labels=3, rng=seed), RATERS, n, m)
    check_lists(seq_coverage(codes, m, primary=0, raters=RATERS, n_labels=3, rng=seed), RATERS, n, m)


# --- entropy and choice ------------------------------------------------------------------


def test_stratum_entropy_hand_computed():
    assert stratum_entropy([0, 1, 2, 3], n_labels=4) == pytest.approx(2.0)
    # -(.9 log2 .9 + .1 log2 .1) = 0.46900
    assert stratum_entropy([0] * 9 + [1], n_labels=2) == pytest.approx(0.4689955936)
    assert stratum_entropy([1, 1, -1], n_labels=2) == 0.0
    assert np.isnan(stratum_entropy([-1, -1], n_labels=2))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=100), st.permutations(range(4)))
def test_stratum_entropy_bounds_and_relabelling(codes, perm):
    h = stratum_entropy(codes, n_labels=4)
    assert 0 <= h <= 2 + 1e-12
    assert stratum_entropy(np.asarray(perm)[codes], n_labels=4) == pytest.approx(h)


def test_choose_design_threshold_and_warnings():
    balanced = choose_design([0, 1, 2] * 40, n_labels=3)
    assert isinstance(balanced, DesignChoice)
    assert balanced.design == "strat" and balanced.warnings == ()
    assert balanced.entropy == pytest.approx(np.log2(3))
    skewed = choose_design([0] * 93 + [1] * 7, n_labels=2)
    assert skewed.design == "seq-coverage" and "0.5 bits" in skewed.reason
    clusters = np.repeat([0, 1, 2, 3, 4, 5], [40, 30, 20, 4, 3, 3])
    clustered = choose_design([0, 1] * 50, n_labels=2, features=clusters)
    assert len(clustered.warnings) == 1 and "90%" in clustered.warnings[0]
    spread = choose_design([0, 1] * 50, n_labels=2, features=np.arange(100) % 10)
    assert spread.warnings == ()
    with pytest.raises(ValueError, match="features must have shape"):
        choose_design([0, 1] * 50, n_labels=2, features=np.arange(7))


def test_joint_strata_crosses_features():
    label = np.array([0, 0, 1, 1, 0])
    topic = np.array(["a", "b", "a", "a", "b"])
    joint = joint_strata(label, topic)
    assert joint.tolist() == [0, 1, 2, 2, 1]
    panel = strat(joint, 3, raters=["a"], rng=0)["a"]
    assert np.unique(joint[panel]).size == 3


# ---------------------------------------------------------------- served = simulated


def served_lists(design: str, humans: np.ndarray, m: int, gen: np.random.Generator) -> dict:
    """The lists the service hands out, each secondary configured in turn from the labels in hand."""
    n = humans.shape[2]
    raters = [f"r{k}" for k in range(1, humans.shape[0])]
    if design == "random":
        return random_subsets(n, m, raters=raters, rng=gen)
    if design == "depth-first":
        return depth_first(n, m, raters=raters)
    if design == "shared-panel":
        return shared_panel(n, m, raters=raters, rng=gen)
    if design == "strat":
        return strat(humans[0, 0], m, raters=raters, n_labels=3, rng=gen)
    in_hand = np.full((n, humans.shape[0]), -1)
    in_hand[:, 0] = humans[0, 0]
    coverage = np.zeros(n, dtype=np.int64)
    lists = {}
    for k, rater in enumerate(raters, start=1):
        if design == "disjoint":  # one secondary at a time, as the service configures them
            one = disjoint(humans[0, 0], m, raters=[rater], n_labels=3, coverage=coverage, rng=gen)
        elif design == "seq-coverage":
            one = seq_coverage(
                in_hand[:, :k], m, primary=0, raters=[rater], n_labels=3, assigned=in_hand[:, 1:k] >= 0, rng=gen
            )
        else:
            one = seq_refined(in_hand[:, :k], m, primary=0, raters=[rater], n_labels=3, rng=gen)
        lists[rater] = one[rater]
        in_hand[one[rater], k] = humans[k, 0, one[rater]]
        coverage[one[rater]] += 1
    return lists


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_served_lists_and_simulated_masks_are_the_same_draws(design: str, seed: int) -> None:
    """The simulator checks exactly the design the service serves: same seed, same items."""
    humans = np.random.default_rng(100 + seed).integers(0, 3, size=(4, 1, 150))
    humans[0, 0, :100] = 0  # a skewed primary, so strata matter
    simulated = design_masks(design, humans, 40, n_labels=3, rng=np.random.default_rng(seed))
    lists = served_lists(design, humans, 40, np.random.default_rng(seed))
    for k, items in enumerate(lists.values(), start=1):
        served = np.zeros(150, dtype=bool)
        served[items] = True
        assert np.array_equal(served, simulated[k, 0]), (design, k)
    if design != "depth-first":  # not vacuous: another seed draws other items
        other = design_masks(design, humans, 40, n_labels=3, rng=np.random.default_rng(seed + 7))
        assert not np.array_equal(other, simulated)


@settings(max_examples=60, deadline=None)
@given(
    trials=st.integers(1, 6),
    n_items=st.integers(1, 30),
    n_strata=st.integers(1, 4),
    quota_cap=st.sampled_from([0, 1, 3, 40]),
    with_priority=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_stratified_masks_takes_the_quota_of_lowest_priority_then_key(
    trials: int, n_items: int, n_strata: int, quota_cap: int, with_priority: bool, seed: int
) -> None:
    """Against a per-row, per-stratum sort in Python: rows whose quotas are empty or whole (the
    shortcut) and rows that need the order alike."""
    from planner.designs import stratified_masks

    gen = np.random.default_rng(seed)
    strata = gen.integers(0, n_strata, (trials, n_items))
    quota = gen.integers(0, quota_cap + 1, (trials, n_strata))
    key = gen.random((trials, n_items))
    priority = gen.integers(0, 3, (trials, n_items)) if with_priority else None
    mask = stratified_masks(strata, quota, key, priority)
    for t in range(trials):
        for s in range(n_strata):
            items = [i for i in range(n_items) if strata[t, i] == s]
            ranked = sorted(items, key=lambda i: (0 if priority is None else priority[t, i], key[t, i]))
            expected = set(ranked[: quota[t, s]])
            assert {i for i in items if mask[t, i]} == expected


@settings(max_examples=60, deadline=None)
@given(
    n_raters=st.integers(1, 5),
    trials=st.integers(1, 4),
    n_items=st.integers(1, 12),
    n_labels=st.integers(2, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_batched_modal_strata_is_the_mode_ties_to_the_primary(
    n_raters: int, trials: int, n_items: int, n_labels: int, seed: int
) -> None:
    """Against counting in Python: the most frequent observed label, a tie to the primary's label
    when it is among the tied, else the lowest tied code; ``n_labels`` with nothing observed."""
    from planner.seq_designs import batched_modal_strata

    gen = np.random.default_rng(seed)
    humans = gen.integers(0, n_labels, (n_raters, trials, n_items)).astype(np.int8)
    observed = gen.random((n_raters, trials, n_items)) < 0.6
    modes = batched_modal_strata(humans, observed, n_labels=n_labels)
    for t in range(trials):
        for i in range(n_items):
            seen = [int(humans[r, t, i]) for r in range(n_raters) if observed[r, t, i]]
            counts = [seen.count(c) for c in range(n_labels)]
            tied = [c for c in range(n_labels) if seen and counts[c] == max(counts)]
            primary = int(humans[0, t, i]) if observed[0, t, i] else None
            expected = n_labels if not seen else (primary if primary in tied else min(tied))
            assert modes[t, i] == expected


@settings(max_examples=200, deadline=None)
@given(
    n_items=st.integers(1, 400),
    n_strata=st.integers(1, 6),
    m=st.integers(1, 400),
    seed=st.integers(0, 2**32 - 1),
    margin=st.sampled_from([_CANDIDATE_MARGIN, -50.0]),
)
def test_smallest_keys_per_stratum_are_the_stratified_mask(
    n_items: int, n_strata: int, m: int, seed: int, margin: float
) -> None:
    """The served draw's selection (candidates under a per-stratum key threshold) picks exactly the
    items ``stratified_masks`` picks; a margin too small to leave a quota its items (-50) takes the
    every-item path and still agrees."""
    gen = np.random.default_rng(seed)
    strata = gen.integers(0, n_strata, n_items)
    strata[: n_items // 2] = 0  # one large stratum beside small ones, some taken whole
    sizes = np.bincount(strata, minlength=n_strata)
    quota = proportional_allocation(sizes, min(m, n_items))
    key = gen.random(n_items)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(designs, "_CANDIDATE_MARGIN", margin)
        got = designs.smallest_keys(strata, sizes, quota, key)
    expected = np.flatnonzero(stratified_masks(strata[None], quota[None], key[None])[0])
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=200, deadline=None)
@given(
    n_items=st.integers(1, 300),
    n_labels=st.integers(2, 4),
    n_assigned=st.integers(0, 13),
    seed=st.integers(0, 2**32 - 1),
    margin=st.sampled_from([_CANDIDATE_MARGIN, -50.0]),
    coverage=st.booleans(),
)
def test_seq_list_is_the_stratified_mask_of_its_dense_strata(
    n_items: int, n_labels: int, n_assigned: int, seed: int, margin: float, coverage: bool
) -> None:
    """The sequential list reads the stratum of only the items it may choose; its items are exactly
    those ``stratified_masks`` picks from every item's Seq-Coverage stratum (``coverage_codes`` of the
    dense assignment matrix, ``coverage_quota``; Seq-Refined: the modal label, proportional quotas), for
    the same keys. Past 12 earlier secondaries the strata count them (``MAX_PATTERN_STRATA``); a margin
    leaving a quota short (-50) takes the every-item path and still agrees."""
    gen = np.random.default_rng(seed)
    modal = gen.choice(n_labels + 1, n_items, p=gen.dirichlet(np.full(n_labels + 1, 0.5))).astype(np.int16)
    m = int(gen.integers(1, n_items + 1))
    lists = [gen.choice(n_items, int(gen.integers(0, n_items + 1))) for _ in range(n_assigned)]
    dense = np.zeros((n_assigned, 1, n_items), dtype=np.int64)
    for j, items in enumerate(lists):
        dense[j, 0, items] = 1
    if coverage:
        strata, width = coverage_codes(modal[None], dense, n_labels=n_labels)
        sizes = np.bincount(strata[0], minlength=(n_labels + 1) * width)
        quota = coverage_quota(sizes.reshape(1, n_labels + 1, width), m)
    else:
        strata = modal[None].astype(np.int64)
        quota = proportional_allocation(np.bincount(strata[0], minlength=n_labels + 1), m)[None]
    key = np.random.default_rng(seed + 1).random(n_items)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(designs, "_CANDIDATE_MARGIN", margin)
        got = seq_list(modal, m, n_labels=n_labels, assigned=lists if coverage else None, rng=seed + 1)
    expected = np.flatnonzero(stratified_masks(strata, quota, key[None])[0])
    np.testing.assert_array_equal(np.sort(got), expected)
    assert np.unique(got).size == got.size
