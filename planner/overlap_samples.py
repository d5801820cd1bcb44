"""The overlap a plan check draws: a corpus and each design's selection, step by step (docs/method.md §6).

The primary labels every slot; each secondary's items are drawn as the served design draws them
(random, strat, disjoint, seq-coverage), with hypergeometric splits of the label counts.
"""

from __future__ import annotations

import numpy as np

from planner.designs import proportional_allocation, stratified_masks
from planner.seq_designs import MAX_PATTERN_STRATA, coverage_quota

Rng = int | np.random.Generator | None


CHECK_DESIGNS = ("random", "strat", "disjoint", "seq-coverage")
"""Designs the plan check simulates (docs/method.md §6)."""


def hypergeometric_split(counts: np.ndarray, take: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Per row, how many of ``take`` items drawn without replacement come from each cell of
    ``counts`` ``(T, C)`` (multivariate hypergeometric, drawn cell by cell)."""
    counts = np.asarray(counts, dtype=np.int64)
    left = counts[:, ::-1].cumsum(axis=1)[:, ::-1]  # items in cells c, c+1, ...
    drawn = np.zeros_like(counts)
    wanted = np.broadcast_to(np.asarray(take, dtype=np.int64), counts.shape[:1]).copy()
    for c in range(counts.shape[1] - 1):
        drawn[:, c] = gen.hypergeometric(counts[:, c], left[:, c] - counts[:, c], wanted)
        wanted -= drawn[:, c]
    drawn[:, -1] = wanted
    return drawn


class _Corpus:
    """The materialised items of one check: per slot the primary's label (``-1``: empty) and
    every rater's label, drawn when the slot is filled, and the untouched items per primary label."""

    def __init__(
        self,
        width: int,
        primary_counts: np.ndarray,
        posterior: np.ndarray,
        accuracies: np.ndarray,
        gen: np.random.Generator,
    ) -> None:
        trials, n_labels = primary_counts.shape
        self.prim = np.full((trials, width), -1, dtype=np.int8)
        self.codes = np.zeros((1 + accuracies.size, trials, width), dtype=np.int8)
        self.filled = np.zeros(trials, dtype=np.int64)
        self.untouched = primary_counts.copy()
        self.n_labels = n_labels
        self._cdf = np.cumsum(posterior, axis=1)
        self._accuracies = accuracies
        self._gen = gen

    def add(self, counts: np.ndarray) -> np.ndarray:
        """Materialise ``counts[t, l]`` untouched items of primary label ``l``; their slots ``(T, W)``.

        Each new item's truth is drawn given its primary label, every other rater's label from the
        truth (the symmetric noise channel of ``accuracies``). A row's new items take the next free
        slots in primary-label order; the work grows with the new items, not with ``T x W``."""
        trials, width = self.prim.shape
        counts = np.asarray(counts, dtype=np.int64)
        total = counts.sum(axis=1)
        rows = np.repeat(np.arange(trials), total)
        within = np.arange(rows.size) - np.repeat(np.cumsum(total) - total, total)
        slots = rows * width + self.filled[rows] + within  # ascending: the row-major order of the slots
        prim = np.repeat(np.tile(np.arange(self.n_labels, dtype=np.int8), trials), counts.ravel())
        self.filled += total
        self.untouched -= counts
        u = self._gen.random(prim.size)
        truth = np.zeros(prim.size, dtype=np.int8)
        for column in self._cdf.T[:-1]:
            truth += u > column[prim]
        raters = self._accuracies.size
        wrong = self._gen.random((raters, prim.size)) >= self._accuracies[:, None]
        if self.n_labels == 2:
            others = truth ^ wrong  # the other label when wrong
        else:
            shift = 1 + self._gen.integers(0, self.n_labels - 1, (raters, prim.size))
            others = np.where(wrong, (truth + shift) % self.n_labels, truth)
        self.prim.reshape(-1)[slots] = prim
        codes = self.codes.reshape(self.codes.shape[0], -1)
        codes[0, slots] = prim
        codes[1:, slots] = others
        new = np.zeros(trials * width, dtype=bool)
        new[slots] = True
        return new.reshape(trials, width)


def lowest_keys(key: np.ndarray, eligible: np.ndarray, take: np.ndarray) -> np.ndarray:
    """Per row of ``key`` ``(T, W)``, the ``take[t]`` eligible entries of lowest key (at most as many as
    are eligible): ``stratified_masks`` with one stratum of eligible entries, by a sort of the keys
    (no argsort) of the rows that take any."""
    mask = np.zeros(key.shape, dtype=bool)
    count = np.minimum(take, eligible.sum(axis=1))
    rows = np.flatnonzero(count > 0)
    if rows.size:
        keys = np.where(eligible[rows], key[rows], np.inf)
        bound = np.sort(keys, axis=1)[np.arange(rows.size), count[rows] - 1]
        mask[rows] = keys <= bound[:, None]
    return mask


def _random_step(corpus: _Corpus, n_items: int, m: int, gen: np.random.Generator) -> np.ndarray:
    """One secondary's uniform ``m``-subset of the corpus (``uniform_masks``' law)."""
    from_slots = gen.hypergeometric(corpus.filled, n_items - corpus.filled, m)
    mask = lowest_keys(gen.random(corpus.prim.shape), corpus.prim >= 0, from_slots)
    return np.asarray(mask | corpus.add(hypergeometric_split(corpus.untouched, m - from_slots, gen)))


def _disjoint_step(corpus: _Corpus, quota: np.ndarray, coverage: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """One secondary's stratified subset, least-covered items first (``disjoint``'s selection)."""
    fresh = np.minimum(quota, corpus.untouched)
    slot_stratum = np.where(corpus.prim < 0, corpus.n_labels, corpus.prim)
    rest = np.column_stack([quota - fresh, np.zeros(quota.shape[0], dtype=np.int64)])
    mask = stratified_masks(slot_stratum, rest, gen.random(corpus.prim.shape), coverage)
    return np.asarray(mask | corpus.add(fresh))


class _Coverage:
    """What Seq-Coverage's strata read of the secondaries configured so far, kept as they are added:
    per slot the count of each label among them and which of them has it (``coverage_codes``' pattern).
    The same strata as ``batched_modal_strata`` and ``coverage_codes`` over the raters in hand, at a
    cost per secondary that does not grow with the secondaries before it."""

    def __init__(self, corpus: _Corpus) -> None:
        trials, width = corpus.prim.shape
        self.held = np.zeros((corpus.n_labels, trials, width), dtype=np.int16)  # secondaries' labels
        self.pattern = np.zeros((trials, width), dtype=np.int64)  # bit j: secondary j has the slot
        self.n_assigned = 0

    def stratum_codes(self, corpus: _Corpus) -> tuple[np.ndarray, int]:
        """Stratum codes ``modal * width + pattern`` ``(T, W)`` of the filled slots, and ``width``.

        The modal label of the primary and the secondaries so far, ties to the primary's (every
        filled slot has the primary's label, so no filled slot is without one)."""
        top = np.zeros(corpus.prim.shape, dtype=np.int16)
        lowest = np.zeros(corpus.prim.shape, dtype=np.int64)  # the lowest label with the top count
        own = np.zeros(corpus.prim.shape, dtype=np.int16)  # the count of the primary's label
        for label in range(corpus.n_labels):
            primary = corpus.prim == label
            count = self.held[label] + primary
            np.copyto(lowest, label, where=count > top)
            np.maximum(top, count, out=top)
            np.copyto(own, count, where=primary)
        modal = np.where(own == top, corpus.prim, lowest)
        if (corpus.n_labels + 1) * 2**self.n_assigned <= MAX_PATTERN_STRATA:
            return modal * 2**self.n_assigned + self.pattern, 2**self.n_assigned
        return modal * (self.n_assigned + 1) + self.held.sum(axis=0), self.n_assigned + 1

    def assign(self, labels: np.ndarray, member: np.ndarray) -> None:
        """Count a new secondary's ``labels`` ``(T, W)`` on its slots ``member``."""
        for label in range(self.held.shape[0]):
            self.held[label] += (labels == label) & member
        if (self.held.shape[0] + 1) * 2 ** (self.n_assigned + 1) <= MAX_PATTERN_STRATA:
            self.pattern += np.left_shift(member, self.n_assigned, dtype=np.int64)
        self.n_assigned += 1


def _coverage_step(corpus: _Corpus, coverage: _Coverage, m: int, gen: np.random.Generator) -> np.ndarray:
    """One secondary's Seq-Coverage subset: strata = modal label in hand x who has the item."""
    codes, width = coverage.stratum_codes(corpus)
    n_strata = (corpus.n_labels + 1) * width
    codes = np.where(corpus.prim < 0, n_strata, codes)
    trials = codes.shape[0]
    keys = (np.arange(trials)[:, None] * (n_strata + 1) + codes).ravel()
    sizes = np.bincount(keys, minlength=trials * (n_strata + 1)).reshape(trials, n_strata + 1)[:, :n_strata]
    sizes = sizes.reshape(trials, corpus.n_labels + 1, width)
    sizes[:, : corpus.n_labels, 0] += corpus.untouched  # untouched: primary's label, nobody has them
    quota = coverage_quota(sizes, m).reshape(trials, corpus.n_labels + 1, width)
    fresh = quota[:, : corpus.n_labels, 0].copy()
    quota[:, : corpus.n_labels, 0] = 0
    slot_quota = np.column_stack([quota.reshape(trials, -1), np.zeros(trials, dtype=np.int64)])
    mask = stratified_masks(codes, slot_quota, gen.random(codes.shape))
    return np.asarray(mask | corpus.add(fresh))


def overlap_sample(
    design: str,
    *,
    n_items: int,
    n_humans: int,
    m: int,
    primary_counts: np.ndarray,
    posterior: np.ndarray,
    accuracies: np.ndarray,
    gen: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Labels ``(1 + R, T, W)`` and human masks ``(K, T, W)`` of the items a design puts in overlap.

    ``primary_counts`` ``(T, L)``: items per primary label in each trial's corpus;
    ``posterior[l]``: the truth's law given primary label ``l``; ``accuracies``: the other
    raters (``K - 1`` secondaries, then judges), each reporting the truth with its accuracy,
    else a uniformly chosen other label. Row 0 of the mask (the primary) marks the
    materialised items, which are exactly those some secondary has.
    """
    trials = primary_counts.shape[0]
    width = m if design == "strat" else min(n_items, (n_humans - 1) * m)
    corpus = _Corpus(width, primary_counts, posterior, accuracies, gen)
    member = np.zeros((n_humans - 1, trials, width), dtype=bool)
    quota = proportional_allocation(primary_counts, m)
    coverage = np.zeros((trials, width), dtype=np.int64)  # secondaries per item so far (disjoint)
    in_hand = _Coverage(corpus) if design == "seq-coverage" else None
    for k in range(n_humans - 1):
        if design == "strat":
            member[k] = corpus.add(quota) if k == 0 else member[0]
        elif design == "random":
            member[k] = _random_step(corpus, n_items, m, gen)
        elif design == "disjoint":
            member[k] = _disjoint_step(corpus, quota, coverage, gen)
            coverage += member[k]
        elif design == "seq-coverage":
            assert in_hand is not None
            member[k] = _coverage_step(corpus, in_hand, m, gen)
            in_hand.assign(corpus.codes[1 + k], member[k])
        else:
            raise ValueError(f"design must be one of {', '.join(CHECK_DESIGNS)}; got {design!r}")
    mask = np.concatenate([(corpus.prim >= 0)[None], member])
    return corpus.codes, mask
