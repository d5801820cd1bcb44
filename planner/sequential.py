"""Anytime-valid monitoring: a judge decision that may be read at every look (docs/method.md §8).

A fixed-sample decision (docs/method.md §3) holds once, at the planned overlap. Here every
held-out human ``r_k`` gets two e-processes over its per-item differences ``xi_t`` in
arrival order: one that grows when the judge is within the margin (``won``), one that grows
when it is worse (``lost``). By Ville's inequality an e-process under its null crosses
``1/a`` with probability at most ``a`` over the whole, unbounded sequence of looks, so the
decision may be read after every label and acted on at once.

Codes follow ``planner.codes``: an int matrix ``(n_items, n_raters)``, ``-1`` for missing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.codes import MISSING, checked_code_array, code_type
from planner.confidence_sequences import (
    Running,
    accumulated,
    alpha_iv,
    running_e_processes,
    running_eb_bounds,
    running_monitor_path,
    shares_band_sums,
)
from planner.intervals import ConfidenceInterval
from planner.list_arrival import PlannedList, listed_arrival
from planner.monitor_paths import (
    NEVER,
    differences,
    first_certified,
    list_positions,
    monitor_decision,
    n_distinct,
    needed_ranks,
    row_order,
)
from planner.rules import DEFAULT_EPSILON, RULES, checked_inclusion

MULTIPLICITY = ("e-bh", "bonferroni")
DECISIONS = ("pass", "reject", "continue", "inconclusive", "insufficient_data")
STATUSES = ("won", "lost", "open")


@dataclass(frozen=True)
class RaterMonitoring:
    """One held-out human ``r_k`` under anytime-valid monitoring (docs/method.md §8).

    ``status`` is ``"won"``/``"lost"`` once the corresponding e-process was certified at
    some look (the first certification stands), else ``"open"``. ``e_value`` and
    ``e_value_lost`` are the current capitals against "the judge is worse than the margin"
    and "the judge is within the margin"; ``threshold`` is what a lone e-value must reach
    (e-BH needs less when several humans are certified together). ``d`` is the mean of
    ``xi`` over the ``n`` usable items (weighted when the monitor is) and ``cs`` its
    confidence-sequence bounds now;
    ``arrival``, ``lower``, ``upper`` give the bounds after each usable item (by arrival rank).
    """

    rater: int
    status: str
    e_value: float
    e_value_lost: float
    threshold: float
    n: int
    d: float
    cs: ConfidenceInterval
    certified_at: int | None
    arrival: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


@dataclass(frozen=True)
class Monitoring:
    """The judge's decision valid at every look (docs/method.md §8).

    ``decision`` is one of ``DECISIONS``: the first look at which enough humans were
    certified won (pass) or lost (reject) fixes it; otherwise ``continue``, or
    ``inconclusive`` once every human reached ``budget`` usable items. ``looks`` counts the
    prefixes (distinct arrival ranks) at which it was evaluated; ``decided_at`` is the
    arrival rank of the deciding label (None while open). ``needed`` humans must be won
    to pass; more than ``len(raters) - needed`` lost rejects. ``weighting`` is ``"ht"`` when
    every item was weighted by its inverse inclusion probability (docs/method.md §9), else
    ``"none"``.
    """

    decision: str
    reason: str
    raters: tuple[RaterMonitoring, ...]
    looks: int
    decided_at: int | None
    needed: int
    rule: str
    epsilon: float
    alpha: float
    omega_threshold: float
    multiplicity: str
    budget: int | None
    n_items: int
    weighting: str


def _monitor_iv(
    codes: object,
    order: object,
    judge: object,
    humans: object,
    n_labels: int,
    rule: str,
    coefficient: str,
    epsilon: float | None,
    alpha: float,
    omega_threshold: float,
    multiplicity: str,
    budget: int | None,
) -> tuple[np.ndarray, np.ndarray, int, list[int], float]:
    """Validate ``monitor_judge``'s inputs (``inclusion`` apart: ``_monitor_weights``)."""
    if coefficient != "po":
        raise ValueError(
            f"coefficient {coefficient!r} is a ratio, not a bounded mean: anytime-valid "
            "monitoring covers p_o (rule='margin') and the alt-test only (docs/method.md §8); "
            "read it as a fixed-sample decision, provisional until the planned overlap"
        )
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES} for monitoring (docs/method.md §8), got {rule!r}")
    codes = checked_code_array(codes, n_labels)  # compact types stay compact: cells are gathered, not copied
    n_cols = codes.shape[1]
    if not (isinstance(judge, (int, np.integer)) and 0 <= judge < n_cols):
        raise ValueError(f"judge must be a single column index in 0..{n_cols - 1}, got {judge!r}")
    columns = list(np.atleast_1d(np.asarray(humans)))
    if not all(isinstance(h, (int, np.integer)) and 0 <= h < n_cols for h in columns):
        raise ValueError(f"humans must be column indices in 0..{n_cols - 1}, got {humans!r}")
    if len(set(columns)) != len(columns) or int(judge) in columns:
        raise ValueError("humans must not repeat a column or include the judge")
    if order is None:
        ranks = row_order(codes)
    else:
        ranks = np.asarray(order)
        if ranks.shape != codes.shape or not np.issubdtype(ranks.dtype, np.integer):
            raise ValueError(
                f"order must be an integer array of the codes' shape {codes.shape}, got {ranks.dtype} {ranks.shape}"
            )
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else epsilon
    if not (np.isfinite(epsilon) and 0.0 <= epsilon < 1.0):
        raise ValueError(f"epsilon must be a number in [0, 1), got {epsilon!r}")
    alpha_iv(alpha)
    if not 0.0 < omega_threshold <= 1.0:
        raise ValueError(f"omega_threshold must be in (0, 1], got {omega_threshold!r}")
    if multiplicity not in MULTIPLICITY:
        raise ValueError(f"multiplicity must be one of {MULTIPLICITY}, got {multiplicity!r}")
    if budget is not None and not (isinstance(budget, (int, np.integer)) and budget >= 1):
        raise ValueError(f"budget must be a positive integer or None, got {budget!r}")
    return codes, ranks, int(judge), [int(h) for h in columns], float(epsilon)


def _monitor_weights(inclusion: object, n_items: int) -> np.ndarray | None:
    """Per item ``min(pi) / pi_i`` in ``(0, 1]``, or None without ``inclusion`` (docs/method.md §9)."""
    prob = checked_inclusion(inclusion, n_items)
    if prob is None:
        return None
    weights: np.ndarray = prob.min() / prob
    return weights


def monitor_judge(
    codes: object,
    *,
    judge: int,
    humans: list[int],
    n_labels: int,
    order: object = None,
    rule: str = "margin",
    coefficient: str = "po",
    epsilon: float | None = None,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    multiplicity: str = "e-bh",
    budget: int | None = None,
    inclusion: object = None,
    tiebreak: object = None,
    lists: Sequence[PlannedList] = (),
) -> Monitoring:
    """Anytime-valid validation decision of a judge against humans (docs/method.md §8).

    Per held-out human, ``xi_t`` in ``[-1, 1]`` (margin rule with ``p_o``: agreement share of
    the judge minus that of ``r_k`` against the other humans; alt-test: ``W_f - W_h``) in
    arrival order (``order``: each label's arrival rank, shape of ``codes``; None = row
    order), ``y = (xi + 1)/2`` and ``m0 = (1 - epsilon)/2``. ``r_k`` is certified won when
    the plug-in empirical-Bernstein e-process against ``E[y] <= m0`` crosses its e-BH (or
    Bonferroni) threshold at level ``alpha`` over the humans, lost by the mirror against
    ``E[y] >= m0``. At every prefix: pass when ``ceil(omega_threshold K)`` humans are won,
    reject when more than ``K - ceil(omega_threshold K)`` are lost; the first such look
    decides. For a judge within the margin of every human, P(some look rejects) <= alpha;
    for one worse than the margin against every human, P(some look passes) <= alpha.
    ``budget`` is the planned usable overlap per human: reached and still open gives
    ``inconclusive``. Ratio coefficients raise ``ValueError`` (not bounded means). Each human's
    band (``cs``, ``lower``, ``upper``) is the predictable plug-in empirical-Bernstein confidence
    sequence of its ``xi`` at level ``alpha`` (weighted with ``inclusion``), valid at every look.

    ``inclusion`` (shape ``(n_items,)``, in ``(0, 1]``) is each item's probability of
    entering the overlap under an unequal-probability design (a Neyman panel). The bets are
    then on ``w_i (y_i - m0)`` with ``w_i = min(pi) / pi_i`` in ``(0, 1]``, and ``d`` and its
    band are the weighted means (docs/method.md §9): valid when each arriving item's stratum
    is drawn in proportion to the allocation (the panel's interleaved order keeps every
    prefix within an item of it); unweighted, the over-sampled strata bias every human.

    ``tiebreak`` (shape ``(n_items,)``, integers) orders entries of equal arrival rank: the smaller
    key first (None: the earlier row). A key drawn independently of the labels (the service's seeded
    item order, docs/method.md §8.2) reads the items of one write in a random order.

    ``lists`` (``planner.list_arrival``: per planned list its column, rows in list order and ``since``
    rank) reads each listed human's labels in its list's order: a label behind an unlabeled item of its
    list waits, and entries of equal rank on a list are read in list order (docs/method.md §8.2).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(0, 2, 3000)
    >>> noisy = lambda p: np.where(rng.random(3000) < p, truth, 1 - truth)
    >>> codes = np.column_stack([noisy(0.85), noisy(0.85), noisy(0.85), noisy(0.97)])
    >>> m = monitor_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2)
    >>> m.decision, [r.status for r in m.raters]
    ('pass', ['won', 'won', 'won'])
    """
    codes, ranks, judge, humans, epsilon = _monitor_iv(
        codes,
        order,
        judge,
        humans,
        n_labels,
        rule,
        coefficient,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
    )
    weights = _monitor_weights(inclusion, codes.shape[0])
    given = codes
    codes, ranks = listed_arrival(codes, ranks, lists, judge=judge, humans=humans)
    monitoring = _monitoring(
        codes,
        ranks,
        judge,
        humans,
        n_labels,
        rule,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
        weights,
        None,
        keep=False,
        tiebreak=_monitor_tiebreak(tiebreak, codes.shape[0]),
        positions=list_positions(lists, humans, codes.shape[0]),
    )[0]
    return _with_waiting(monitoring, given, codes)


def _with_waiting(monitoring: Monitoring, given: np.ndarray, read: np.ndarray) -> Monitoring:
    """``monitoring``, its open decision's reason naming how many listed labels wait (the labels ``given``
    that the lists' reading, ``read``, holds back: docs/method.md §8.2 rule 4), so a decision left open by a
    missing judge's or human's label says what would move it."""
    if monitoring.decision != "continue" or given is read:
        return monitoring
    waiting = int(np.count_nonzero((given != MISSING) & (read == MISSING)))
    if waiting == 0:
        return monitoring
    why = (
        f"{waiting} listed label{'s' if waiting != 1 else ''} wait until their item and every item before it on "
        "the list hold the secondary's, the judge's and another human's label"
    )
    return replace(monitoring, reason=f"{monitoring.reason}; {why}")


@dataclass(frozen=True)
class _HumanPath:
    """A held-out human's monitored path so far: its entries' arrival ranks, ``xi`` and rows, their
    bounds, the sums it ends with, its needed e-BH ranks now (won, lost) and ``marks``: the sums before
    entries about ``_PATH_CHUNK`` apart (position, sums; the first at 0), from which a path changed
    after a mark is computed again (the numbers of one pass: :func:`_continued_path`)."""

    times: np.ndarray
    xi: np.ndarray
    rows: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    running: Running
    ranks: tuple[int, int]
    marks: tuple[tuple[int, Running], ...] = ()


@dataclass(frozen=True)
class MonitorState:
    """What :func:`kept_monitoring` keeps of a monitoring to bring it up to date from the labels added
    since (docs/method.md §8): its settings, the codes it saw and the largest arrival rank of their
    labels, each human's path and the first certifications."""

    settings: tuple[object, ...]
    weights: np.ndarray | None
    tiebreak: np.ndarray | None
    positions: tuple[np.ndarray | None, ...]
    codes: np.ndarray
    last_rank: int
    paths: tuple[_HumanPath, ...]
    first_won: np.ndarray
    first_lost: np.ndarray
    looks: int


def kept_monitoring(
    codes: object,
    *,
    previous: MonitorState | None,
    judge: int,
    humans: list[int],
    n_labels: int,
    order: object,
    rule: str = "margin",
    coefficient: str = "po",
    epsilon: float | None = None,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    multiplicity: str = "e-bh",
    budget: int | None = None,
    inclusion: object = None,
    tiebreak: object = None,
    lists: Sequence[PlannedList] = (),
) -> tuple[Monitoring, MonitorState]:
    """:func:`monitor_judge` and what it keeps to be brought up to date (docs/method.md §8).

    With ``previous`` (the state of an earlier call) the result is computed from the labels added
    since alone when they are additions only: every cell of the judge and humans that ``previous``
    saw labeled is unchanged, and every cell labeled since has an arrival rank above every rank it
    saw (``order`` holds label sequence numbers). A label added later dates only the items it
    completes, and is not in the pool of any earlier entry, so each human's path grows at its end
    and its e-processes, bounds and certifications continue from their sums: the same numbers as
    :func:`monitor_judge` on the whole matrix, bit for bit. Anything else (a changed or retracted
    label, another shape, setting or inclusion) computes it afresh.
    """
    if order is None:
        raise ValueError("kept_monitoring needs the arrival order (label sequence numbers) of the labels")
    codes, ranks, judge, humans, epsilon = _monitor_iv(
        codes,
        order,
        judge,
        humans,
        n_labels,
        rule,
        coefficient,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
    )
    weights = _monitor_weights(inclusion, codes.shape[0])
    given = codes
    codes, ranks = listed_arrival(codes, ranks, lists, judge=judge, humans=humans)
    monitoring, state = _monitoring(
        codes,
        ranks,
        judge,
        humans,
        n_labels,
        rule,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
        weights,
        previous,
        keep=True,
        tiebreak=_monitor_tiebreak(tiebreak, codes.shape[0]),
        positions=list_positions(lists, humans, codes.shape[0]),
    )
    assert state is not None
    return _with_waiting(monitoring, given, codes), state


def _monitor_tiebreak(tiebreak: object, n_items: int) -> np.ndarray | None:
    """``tiebreak`` checked: None, or one integer key per item."""
    if tiebreak is None:
        return None
    keys = np.asarray(tiebreak)
    if keys.shape != (n_items,) or not np.issubdtype(keys.dtype, np.integer):
        raise ValueError(f"tiebreak must hold one integer key per item ({n_items}), got {keys.dtype} {keys.shape}")
    return keys


def _changed_rows(
    previous: MonitorState,
    settings: tuple[object, ...],
    weights: np.ndarray | None,
    tiebreak: np.ndarray | None,
    positions: tuple[np.ndarray | None, ...],
    codes: np.ndarray,
    ranks: np.ndarray,
    columns: list[int],
) -> tuple[np.ndarray, bool] | None:
    """Rows where the judge or a human has a label added, changed or retracted since ``previous``, and
    whether labels were only added (each ranked above every rank it saw); None when the settings, the
    shape, the weights, the tie-break keys or the list positions changed. Rows where nothing changed are
    found by one pass over the matrix; only the others are looked at column by column. A cell labeled in
    ``previous`` with its label unchanged and no rank above the ones it saw keeps its rank (a correction
    keeps a cell's ``label_seq``, a new label takes a larger one)."""
    same_weights = (
        previous.weights is None
        if weights is None
        else previous.weights is not None and np.array_equal(previous.weights, weights)
    )
    same_keys = (
        previous.tiebreak is None
        if tiebreak is None
        else previous.tiebreak is not None and np.array_equal(previous.tiebreak, tiebreak)
    )
    same_positions = len(previous.positions) == len(positions) and all(
        (a is None) == (b is None) and (a is None or b is None or np.array_equal(a, b))
        for a, b in zip(previous.positions, positions, strict=True)
    )
    if previous.settings != settings or not same_weights or not same_keys or not same_positions:
        return None
    cells = np.flatnonzero((codes != previous.codes) | (ranks > previous.last_rank))  # few: a write's
    moved = np.unique(cells // codes.shape[1])
    old, new = previous.codes[moved][:, columns], codes[moved][:, columns]
    later = ranks[moved][:, columns] > previous.last_rank
    was = old != MISSING
    added = (new != MISSING) & ~was
    changed = was & ((new != old) | later)
    rows: np.ndarray = moved[(added | changed).any(axis=1)]
    return rows, not (np.any(changed) or np.any(added & ~later))


def _insertion_points(
    times: np.ndarray,
    rows: np.ndarray,
    new_times: np.ndarray,
    new_rows: np.ndarray,
    tiebreak: np.ndarray | None,
    position: np.ndarray | None,
) -> np.ndarray | None:
    """Where each new entry goes in a path sorted by ``(arrival rank, list position, tie-break key)`` (no
    position without ``position``; the key: the row without ``tiebreak``), by a bisection of all new entries
    at once (``log2`` of the path's length steps, each touching one kept entry per new one); None when a new
    entry ties a kept one on all three."""
    low = np.zeros(new_times.size, dtype=np.int64)
    if times.size == 0:
        return low
    key = (lambda r: r) if tiebreak is None else (lambda r: tiebreak[r])
    place = (lambda r: np.zeros(r.shape, dtype=np.int32)) if position is None else (lambda r: position[r])
    new_keys, new_places = key(new_rows), place(new_rows)
    high = np.full(new_times.size, times.size, dtype=np.int64)
    for _ in range(int(times.size).bit_length()):
        mid = np.minimum((low + high) // 2, times.size - 1)
        at_t, at_place, at_key = times[mid], place(rows[mid]), key(rows[mid])
        before = (at_t < new_times) | (
            (at_t == new_times) & ((at_place < new_places) | ((at_place == new_places) & (at_key < new_keys)))
        )
        open_ = low < high
        low = np.where(open_ & before, mid + 1, low)
        high = np.where(open_ & ~before, mid, high)
    at = np.minimum(low, times.size - 1)
    tied = (times[at] == new_times) & (place(rows[at]) == new_places) & (key(rows[at]) == new_keys)
    if np.any((low < times.size) & tied):
        return None
    return low


def _patched_paths(
    previous: MonitorState,
    redo: np.ndarray,
    codes: np.ndarray,
    ranks: np.ndarray,
    judge: int,
    humans: list[int],
    rule: str,
    tiebreak: np.ndarray | None,
    positions: tuple[np.ndarray | None, ...],
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] | None:
    """Each human's path (:func:`differences`) with the entries of rows ``redo`` read again: the kept
    entries of the other rows, which are unchanged, merged with the new entries of ``redo`` by arrival
    rank, list position and tie-break key (docs/method.md §8), and the first position where it differs
    from the kept path (an entry read again as it was is no change: a later label is in no earlier
    entry's pool). None when a new entry ties a kept one on all three (their order would depend on the
    rows' blocks): read afresh."""
    keys = None if tiebreak is None else tiebreak[redo]
    part = differences(codes[redo], ranks[redo], judge, humans, rule, keys, _rows_of(positions, redo))
    redone = np.zeros(codes.shape[0], dtype=bool)
    redone[redo] = True
    paths = []
    for path, (times, xi, local), position in zip(previous.paths, part, positions, strict=True):
        stays = ~redone[path.rows]
        kept_times, kept_rows = path.times[stays], path.rows[stays]
        rows = redo[local]
        at = _insertion_points(kept_times, kept_rows, times, rows, tiebreak, position)
        if at is None:
            return None
        new = np.insert(kept_times, at, times), np.insert(path.xi[stays], at, xi), np.insert(kept_rows, at, rows)
        paths.append((*new, _first_difference((path.times, path.xi, path.rows), new)))
    return paths


def _first_difference(old: tuple[np.ndarray, ...], new: tuple[np.ndarray, ...]) -> int:
    """The first position where two paths (ranks, ``xi``, rows) differ in any of the three (the shorter one's
    length when one extends the other)."""
    n = min(old[0].size, new[0].size)
    differs = np.zeros(n, dtype=bool)
    for a, b in zip(old, new, strict=True):
        differs |= a[:n] != b[:n]
    first = np.flatnonzero(differs)
    return int(first[0]) if first.size else n


def _first_change(previous: MonitorState, patched: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]) -> int:
    """The smallest arrival rank at which a patched path (:func:`_patched_paths`) may differ from its kept
    one: every look before it reads the kept entries alone (``NEVER``: no path changed)."""
    cut = NEVER
    for path, (times, _, _, same) in zip(previous.paths, patched, strict=True):
        for at in (path.times, times):
            if same < at.size:
                cut = min(cut, int(at[same]))
    return cut


def _restarted(
    path: _HumanPath, patched: tuple[np.ndarray, np.ndarray, np.ndarray, int], cut: int, n_humans: int
) -> tuple[_HumanPath, tuple[np.ndarray, np.ndarray, np.ndarray], int]:
    """A patched path split at its last mark before its first entry ranked ``cut`` or later (at 0 when that
    is its first entry): the kept prefix with the mark's sums, the entries to compute again, and how many of
    those rank below ``cut``. The prefix's needed ranks are an empty path's: read only at 0, a split past 0
    leaving entries below ``cut`` to compute."""
    times, xi, rows, _ = patched
    first = int(np.searchsorted(times, cut, side="left"))
    at, running = 0, Running()
    for position, sums in path.marks:
        if position < first:
            at, running = position, sums
    marks = tuple(m for m in path.marks if m[0] < at)
    none = (n_humans + 1, n_humans + 1)
    prefix = _HumanPath(times[:at], xi[:at], rows[:at], path.lower[:at], path.upper[:at], running, none, marks)
    return prefix, (times[at:], xi[at:], rows[at:]), first - at


def _rows_of(positions: tuple[np.ndarray | None, ...], rows: np.ndarray) -> tuple[np.ndarray | None, ...]:
    """Each human's list positions of ``rows`` alone."""
    return tuple(None if p is None else p[rows] for p in positions)


def _last_rank(codes: np.ndarray, ranks: np.ndarray, below: int) -> int:
    """The largest rank of a labeled cell of ``codes``, or ``below`` when it is larger."""
    return max(below, int(np.max(ranks, where=codes != MISSING, initial=np.iinfo(ranks.dtype).min)))


def _frozen(a: np.ndarray) -> bool:
    """Whether no one can write ``a``'s cells: it and every array it views are read-only and the last owns
    its memory (not a buffer of another object's, such as a mapping, that may be written through it)."""
    base: object = a
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return base is None


def _row_type(n_items: int) -> type[np.signedinteger]:
    """The smallest integer type of a path's rows (half the bytes of int64 below 2^31 items)."""
    return np.int32 if n_items < 2**31 else np.int64


def _monitoring(
    codes: np.ndarray,
    ranks: np.ndarray,
    judge: int,
    humans: list[int],
    n_labels: int,
    rule: str,
    epsilon: float,
    alpha: float,
    omega_threshold: float,
    multiplicity: str,
    budget: int | None,
    weights: np.ndarray | None,
    previous: MonitorState | None,
    *,
    keep: bool,
    tiebreak: np.ndarray | None = None,
    positions: tuple[np.ndarray | None, ...] = (),
) -> tuple[Monitoring, MonitorState | None]:
    """The monitoring of checked inputs, continued from ``previous`` when only labels were added since,
    its paths patched from it when fewer than half the rows changed; with ``keep``, the state to continue
    it from."""
    n_humans = len(humans)
    needed = math.ceil(omega_threshold * n_humans - 1e-9)
    settings = (
        judge,
        tuple(humans),
        n_labels,
        rule,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
        codes.shape,
    )
    since, patched = None, None
    if previous is not None and keep and n_humans >= 2:
        changed = _changed_rows(previous, settings, weights, tiebreak, positions, codes, ranks, [judge, *humans])
        if changed is not None and changed[1]:
            since = changed[0]
        elif changed is not None and 2 * changed[0].size <= codes.shape[0]:
            since = changed[0]
            patched = _patched_paths(previous, since, codes, ranks, judge, humans, rule, tiebreak, positions)
            since = None if patched is None else since
    # Each path continues a prefix (``before``) with entries (``found``), of which the first ``skips`` were
    # certified before (e-BH is run from the others on, continuing the needed ranks of the one before them);
    # first certifications below ``cut`` stand.
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    cut, recount = NEVER, True
    if patched is not None and previous is not None and since is not None:  # computed again from a mark
        cut = _first_change(previous, patched)
        restarted = [_restarted(p, q, cut, n_humans) for p, q in zip(previous.paths, patched, strict=True)]
        before = [prefix for prefix, _, _ in restarted]
        found = [entries for _, entries, _ in restarted]
        skips = [skip for _, _, skip in restarted]
        first_before = (previous.first_won, previous.first_lost)
        looks_before = 0
        last_rank = previous.last_rank
    elif since is None or previous is None:
        found = differences(codes, ranks, judge, humans, rule, tiebreak, positions) if n_humans >= 2 else []
        empty = np.zeros(0, dtype=np.int64)
        before = [
            _HumanPath(empty, np.zeros(0), empty, np.zeros(0), np.zeros(0), Running(), (n_humans + 1, n_humans + 1))
        ] * len(found)
        skips = [0] * len(found)
        first_before = (np.full(n_humans, NEVER, dtype=np.int64),) * 2
        looks_before = 0
        last_rank = None
    else:
        recount = False
        last_rank = previous.last_rank
        keys = None if tiebreak is None else tiebreak[since]
        part = differences(codes[since], ranks[since], judge, humans, rule, keys, _rows_of(positions, since))
        found = [(t[t > last_rank], xi[t > last_rank], since[rows[t > last_rank]]) for t, xi, rows in part]
        skips = [0] * len(found)
        before, first_before, looks_before = (
            list(previous.paths),
            (previous.first_won, previous.first_lost),
            previous.looks,
        )
    null_mean = (1.0 - epsilon) / 2.0
    log_inv_a = math.log(n_humans / alpha)
    row_type = _row_type(codes.shape[0])
    paths, won_ranks, lost_ranks = [], [], []
    starts: tuple[list[int], list[int]] = ([], [])
    for (t, xi, rows), path, skip in zip(found, before, skips, strict=True):
        w = None if weights is None else weights[rows]
        won_now, lost_now, low, high, running, marks = _continued_path(
            xi, w, path.running, null_mean, log_inv_a, alpha, n_humans, multiplicity
        )
        won_ranks.append(won_now[skip:])
        lost_ranks.append(lost_now[skip:])
        starts[0].append(int(won_now[skip - 1]) if skip else path.ranks[0])
        starts[1].append(int(lost_now[skip - 1]) if skip else path.ranks[1])
        kept_marks = list(path.marks)
        for at, sums in marks:
            if not kept_marks or path.times.size + at - kept_marks[-1][0] >= _PATH_CHUNK:
                kept_marks.append((path.times.size + at, sums))
        paths.append(
            _HumanPath(
                np.concatenate([path.times, t]),
                np.concatenate([path.xi, xi]) if keep else path.xi,
                np.concatenate([path.rows, rows]).astype(row_type, copy=False) if keep else path.rows,
                np.concatenate([path.lower, low]),
                np.concatenate([path.upper, high]),
                running,
                (int(won_now[-1]), int(lost_now[-1])) if xi.size else path.ranks,
                tuple(kept_marks),
            )
        )
    times = [t[skip:] for (t, _, _), skip in zip(found, skips, strict=True)]
    first_won, first_lost = (
        np.where(old < cut, old, first_certified(times, ranks_now, n_humans, starts[side]))
        for old, ranks_now, side in ((first_before[0], won_ranks, 0), (first_before[1], lost_ranks, 1))
    )
    looked = [p.times for p in paths] if recount else [t for t, _, _ in found]
    n_looks = looks_before + (n_distinct(np.concatenate(looked)) if looked else 0)
    raters = tuple(
        _rater_monitoring(humans[k], path, first_won[k], first_lost[k], n_humans / alpha)
        for k, path in enumerate(paths)
    )
    decision, reason, decided_at = monitor_decision(
        first_won, first_lost, needed, n_humans, n_looks, [r.n for r in raters], budget
    )
    monitoring = Monitoring(
        decision=decision,
        reason=reason,
        raters=raters,
        looks=n_looks,
        decided_at=decided_at,
        needed=needed,
        rule=rule,
        epsilon=epsilon,
        alpha=float(alpha),
        omega_threshold=float(omega_threshold),
        multiplicity=multiplicity,
        budget=None if budget is None else int(budget),
        n_items=int(codes.shape[0]),
        weighting="none" if weights is None else "ht",
    )
    if not keep:
        return monitoring, None
    if last_rank is None or since is None:
        last_rank = _last_rank(codes, ranks, int(np.iinfo(np.int64).min))
    elif since.size:
        last_rank = _last_rank(codes[since], ranks[since], last_rank)
    kept = codes  # frozen in the compact type (a matrix's): kept as it is, else a copy in the compact type
    if not _frozen(codes) or codes.dtype != code_type(n_labels):
        kept = codes.astype(code_type(n_labels))  # int64 codes would be 8x the bytes
        kept.flags.writeable = False
    keys = tiebreak if tiebreak is None or not tiebreak.flags.writeable else tiebreak.copy()  # read-only: shared
    state = MonitorState(
        settings, weights, keys, positions, kept, last_rank, tuple(paths), first_won, first_lost, n_looks
    )
    return monitoring, state


_PATH_CHUNK = 1 << 13
"""Entries of a path whose e-processes and bounds are computed at once, and the spacing of its kept marks:
their temporaries (64 KiB of float64 each) stay below the worker's mapping threshold
(``service.core.allocator``) and in cache, so a path of a million entries costs no page faults of fresh
mappings, and a correction late in a path computes at most this many entries before it again."""


def _continued_path(
    xi: np.ndarray,
    w: np.ndarray | None,
    start: Running,
    null_mean: float,
    log_inv_a: float,
    alpha: float,
    n_humans: int,
    multiplicity: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Running, list[tuple[int, Running]]]:
    """A path's next entries ``xi`` (weights ``w``) after a prefix ending with ``start``: the needed e-BH
    ranks won and lost, the running bounds low and high, the sums the longer path ends with, and the sums
    before each chunk (position among ``xi``, sums) (docs/method.md §8). Read ``_PATH_CHUNK`` entries at a
    time, each chunk continuing from the sums of the one before: the numbers of one pass over the whole
    path, bit for bit."""
    won_ranks, lost_ranks, lows, highs = [], [], [], []
    marks: list[tuple[int, Running]] = []
    running = start
    for at in range(0, xi.size, _PATH_CHUNK):
        marks.append((at, running))
        x = xi[at : at + _PATH_CHUNK]
        if w is None and shares_band_sums(running):
            won, lost, low, high, running = running_monitor_path(x, null_mean, log_inv_a, alpha, running)
        else:
            v = None if w is None else w[at : at + _PATH_CHUNK]
            won, lost, low, high, running = _chunk_apart(x, v, null_mean, log_inv_a, alpha, running)
        won_ranks.append(needed_ranks(won, n_humans, alpha, multiplicity))
        lost_ranks.append(needed_ranks(lost, n_humans, alpha, multiplicity))
        lows.append(low)
        highs.append(high)
    if not won_ranks:
        empty_ranks, empty = np.zeros(0, dtype=np.int64), np.zeros(0)
        return empty_ranks, empty_ranks, empty, empty, start, marks
    return (
        np.concatenate(won_ranks),
        np.concatenate(lost_ranks),
        np.concatenate(lows),
        np.concatenate(highs),
        running,
        marks,
    )


def _chunk_apart(
    x: np.ndarray, v: np.ndarray | None, null_mean: float, log_inv_a: float, alpha: float, running: Running
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Running]:
    """:func:`running_monitor_path` of a path's chunk ``x`` whose band sums are not its bets' (weighted: ``v``
    its weights), through the e-processes and the band computed apart (docs/method.md §8)."""
    won, lost, sums = running_e_processes((x + 1.0) / 2.0, null_mean, log_inv_a, v, running)
    mean, low, high, bounds = running_eb_bounds(x, alpha, v, running)
    lows = accumulated(np.maximum, low, running.low)
    highs = accumulated(np.minimum, high, running.high)
    end = replace(
        bounds,
        n=sums.n,
        y_sum=sums.y_sum,
        dev_sum=sums.dev_sum,
        sigma2=sums.sigma2,
        won=sums.won,
        lost=sums.lost,
        low=float(lows[-1]),
        high=float(highs[-1]),
        mean=float(mean[-1]),
    )
    return won, lost, lows, highs, end


def _rater_monitoring(rater: int, path: _HumanPath, won_at: int, lost_at: int, threshold: float) -> RaterMonitoring:
    """One human's status (the first certification stands), e-values and confidence sequence."""
    status, at = "open", None
    if min(won_at, lost_at) < NEVER and won_at != lost_at:
        status = "won" if won_at < lost_at else "lost"
        at = int(min(won_at, lost_at))
    running = path.running
    if running.n == 0:
        empty = np.zeros(0)
        return RaterMonitoring(
            rater,
            status,
            1.0,
            1.0,
            threshold,
            0,
            math.nan,
            ConfidenceInterval(math.nan, math.nan, method="confidence-sequence"),
            at,
            path.times,
            empty,
            empty,
        )
    assert running.won is not None and running.lost is not None
    assert running.low is not None and running.high is not None
    return RaterMonitoring(
        rater=rater,
        status=status,
        e_value=float(np.exp(min(running.won, 700.0))),
        e_value_lost=float(np.exp(min(running.lost, 700.0))),
        threshold=threshold,
        n=running.n,
        d=running.mean,
        cs=ConfidenceInterval(running.low, running.high, method="confidence-sequence"),
        certified_at=at,
        arrival=path.times,
        lower=path.lower,
        upper=path.upper,
    )
