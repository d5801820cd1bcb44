"""Monte Carlo check of an overlap plan: synthetic matrices, design masks, §3 replayed (docs/method.md §6).

Everything is vectorised across trials. ``planner.synthetic.synthetic_codes`` returns ``(trials, n_items,
n_raters)``; inside, arrays are rater-major, ``(n_raters, trials, n_items)``, so each
rater's labels are one contiguous ``(trials, n_items)`` block: humans (row 0 = the
primary, who labels every item), judges in a separate array, masks like the humans.
The loops that remain run over raters, labels and grid points, never over items or
trials.

Per trial the simulator computes, on the sparse matrix (the design's mask) and on the
dense one (every human labels every item):

- the **human-pool score**: the mean over the ``K`` humans of ``S_F(r_k; H_k)``
  (docs/method.md §3), undefined terms left out (never counted as 0);
- per judge and held-out human, ``d_k = S_F(judge; H_k) - S_F(r_k; H_k)``; under
  ``rule="margin"`` the rater is won when ``d_k >= -epsilon`` (default 0.05), under
  ``rule="alt-test"`` (``F = p_o`` only) when Benjamini–Yekutieli at ``q`` rejects the
  one-sided t-test of ``W_h - W_f`` against ``epsilon`` (default 0.2), humans with fewer
  than 30 items in ``O_k`` skipped, as in ``planner.decision.validate_judge``. ``omega``
  is the share of won raters among those not skipped, and the judge passes when
  ``omega >= omega_threshold``. A sparse decision with no usable human counts as a rejection.

``S_F`` for ``po`` is the per-item averaged agreement with the pool over ``O_k``; for the
ratio coefficients (``kappa``, ``alpha``, nominal) it is ``F`` between ``x`` and each pool
member on their common items of ``O_k``, averaged with weights equal to those common
counts, undefined pairs left out (docs/method.md §2-§3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from planner.codes import check_codes, code_type
from planner.design_masks import design_masks
from planner.designs import DESIGNS
from planner.intervals import optional_float
from planner.rules import (
    COEFFICIENTS,
    DEFAULT_EPSILON,
    RULES,
)
from planner.simulation_inputs import (
    accuracy_grid,
    choices_of,
    label_count,
    overlap_rates,
    positive_int,
    prevalence_shares,
    probability,
)
from planner.synthetic import synthetic_codes
from planner.trial_decisions import (
    DecisionRule,
    Evaluation,
    evaluate_decisions,
)

_TRIAL_CELLS = 8_000_000  # trials x items x raters simulated at once (~300 MB of arrays)


@dataclass(frozen=True)
class SimulationCell:
    """Metrics of one grid point over ``trials`` trials (docs/method.md §6).

    ``bias``/``std`` are the mean and standard deviation of sparse-minus-dense human-pool
    score over the trials where the sparse score is defined (``undefined`` counts the
    others); ``reliability`` is the share of all trials with ``|sparse - dense| <= delta``
    (an undefined score is not reliable). ``false_rejection`` is the share of sparse
    rejections among (trial, judge) pairs that pass densely, ``false_approval`` the share
    of sparse passes among those that fail densely (NaN when there are none),
    ``wrong_decision`` the share of pairs whose sparse and dense decisions differ, and
    ``rater_false_rejection`` the share of held-out humans lost sparsely among those won
    densely and not skipped sparsely (docs/method.md §4, item 1). ``m`` is the number of items
    per secondary human.
    """

    rho: float
    design: str
    coefficient: str
    p_h: float | tuple[float, ...] | None
    m: int
    bias: float
    std: float
    reliability: float
    false_rejection: float
    false_approval: float
    wrong_decision: float
    rater_false_rejection: float
    undefined: int
    trials: int

    def as_dict(self) -> dict[str, object]:
        """The cell as plain JSON values (NaN -> None, tuples -> lists)."""
        return {key: _plain(value) for key, value in asdict(self).items()}


@dataclass(frozen=True)
class SimulationResult:
    """All grid cells of a simulation or replay, with the settings that produced them."""

    cells: tuple[SimulationCell, ...]
    n_items: int
    n_humans: int
    n_labels: int
    rule: str
    epsilon: float
    delta: float
    omega_threshold: float
    q: float

    def min_rho(
        self,
        alpha_sig: float = 0.05,
        *,
        design: str | None = None,
        coefficient: str | None = None,
        p_h: float | tuple[float, ...] | None = None,
    ) -> float | None:
        """Smallest ``rho`` whose reliability reaches ``1 - alpha_sig`` (docs/method.md §6); None if none does.

        When the grid holds several designs, coefficients or ``p_h`` values, name the one
        curve to read with ``design``, ``coefficient`` and ``p_h``.
        """
        if not 0.0 < alpha_sig < 1.0:
            raise ValueError(f"alpha_sig must be in (0, 1), got {alpha_sig!r}")
        wanted = {"design": design, "coefficient": coefficient, "p_h": _grid_value(p_h)}
        cells = [c for c in self.cells if all(v is None or getattr(c, k) == v for k, v in wanted.items())]
        if not cells:
            raise ValueError(f"no cell matches design={design!r}, coefficient={coefficient!r}, p_h={p_h!r}")
        curves = {(c.design, c.coefficient, c.p_h) for c in cells}
        if len(curves) > 1:
            raise ValueError("the grid holds several curves; name design=, coefficient= and p_h= to pick one")
        reached = [c.rho for c in cells if c.reliability >= 1.0 - alpha_sig]
        return min(reached) if reached else None

    def as_dict(self) -> dict[str, object]:
        """The result as plain JSON values."""
        out = {key: _plain(value) for key, value in asdict(self).items() if key != "cells"}
        out["cells"] = [c.as_dict() for c in self.cells]
        return out


def _plain(value: object) -> object:
    if isinstance(value, float):
        return optional_float(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _grid_value(value: float | Sequence[float] | None) -> float | tuple[float, ...] | None:
    if value is None:
        return None
    if isinstance(value, (int, float, np.number)):
        return float(value)
    return tuple(float(v) for v in value)


def _share(flags: np.ndarray, among: np.ndarray) -> float:
    total = int(among.sum())
    return float(flags[among].sum() / total) if total else float("nan")


def _cell(
    sparse: Evaluation,
    dense: Evaluation,
    *,
    delta: float,
    rho: float,
    design: str,
    coefficient: str,
    p_h: float | tuple[float, ...] | None,
    m: int,
) -> SimulationCell:
    """Bias, std, reliability and decision error rates of one grid point (docs/method.md §6)."""
    diff = sparse.score - dense.score
    ok = np.isfinite(diff)
    trials = diff.size
    bias = float(diff[ok].mean()) if ok.any() else float("nan")
    std = float(diff[ok].std(ddof=1)) if ok.sum() > 1 else float("nan")
    dense_passed = np.broadcast_to(dense.passed, sparse.passed.shape)
    dense_won = np.broadcast_to(dense.won, sparse.won.shape) & sparse.defined
    return SimulationCell(
        rho=float(rho),
        design=design,
        coefficient=coefficient,
        p_h=p_h,
        m=int(m),
        bias=bias,
        std=std,
        reliability=float((np.abs(np.where(ok, diff, np.inf)) <= delta).mean()),
        false_rejection=_share(~sparse.passed, dense_passed),
        false_approval=_share(sparse.passed, ~dense_passed),
        wrong_decision=float((sparse.passed != dense_passed).mean()),
        rater_false_rejection=_share(~sparse.won, dense_won),
        undefined=int(trials - ok.sum()),
        trials=int(trials),
    )


def decision_rule(
    rule: str,
    epsilon: float | None,
    delta: float,
    omega_threshold: float,
    q: float,
    coefficients: list[str],
) -> DecisionRule:
    """The checked decision rule (``epsilon`` None: the rule's default); ValueError on bad settings."""
    if not isinstance(rule, str) or rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}; got {rule!r}")
    if rule == "alt-test" and coefficients != ["po"] * len(coefficients):
        raise ValueError("rule='alt-test' compares per-item agreement; use coefficient='po'")
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else probability(epsilon, "epsilon")
    probability(delta, "delta")
    if not 0.0 < omega_threshold <= 1.0:
        raise ValueError(f"omega_threshold must be in (0, 1], got {omega_threshold!r}")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    return DecisionRule(rule, float(epsilon), float(omega_threshold), float(q))


# --- public entry points ----------------------------------------------------------------


def _grid_evaluations(
    humans: np.ndarray,
    judges: np.ndarray,
    *,
    rhos: list[tuple[float, int]],
    designs: list[str],
    coefficients: list[str],
    n_labels: int,
    rule: DecisionRule,
    rng: np.random.Generator,
    tick: Callable[[], None],
) -> list[Evaluation]:
    """The sparse evaluation of every (design, rho, coefficient), in that nesting order."""
    evaluations = []
    for design in designs:
        for _, m in rhos:
            mask = design_masks(design, humans, m, n_labels=n_labels, rng=rng)
            for coefficient in coefficients:
                evaluations.append(
                    evaluate_decisions(humans, judges, mask, coefficient=coefficient, n_labels=n_labels, rule=rule)
                )
                tick()
    return evaluations


def _grid_cells(
    sparse: list[Evaluation],
    dense: dict[str, Evaluation],
    *,
    rhos: list[tuple[float, int]],
    designs: list[str],
    coefficients: list[str],
    p_h: float | tuple[float, ...] | None,
    delta: float,
) -> list[SimulationCell]:
    """One cell per (design, rho, coefficient) from :func:`_grid_evaluations`."""
    points = [(d, r, c) for d in designs for r in rhos for c in coefficients]
    return [
        _cell(evaluation, dense[c], delta=delta, rho=rho, design=d, coefficient=c, p_h=p_h, m=m)
        for evaluation, (d, (rho, m), c) in zip(sparse, points, strict=True)
    ]


def _joined(parts: Sequence[Evaluation]) -> Evaluation:
    """Evaluations of consecutive trial chunks as one, trials in order."""
    return Evaluation(*(np.concatenate([getattr(e, f.name) for e in parts]) for f in fields(Evaluation)))


def _trial_chunks(trials: int, n_items: int, n_raters: int) -> list[int]:
    """Trials per chunk: as many as keep ``trials x n_items x n_raters`` under ``_TRIAL_CELLS``."""
    per_chunk = max(1, _TRIAL_CELLS // (n_items * n_raters))
    return [min(per_chunk, trials - start) for start in range(0, trials, per_chunk)]


def _result(
    cells: list[SimulationCell],
    n_items: int,
    n_humans: int,
    n_labels: int,
    rule: DecisionRule,
    delta: float,
) -> SimulationResult:
    return SimulationResult(
        tuple(cells),
        n_items,
        n_humans,
        n_labels,
        rule.name,
        rule.epsilon,
        float(delta),
        rule.omega_threshold,
        rule.q,
    )


def _progress_ticker(progress: Callable[[int, int], None] | None, total: int) -> Callable[[], None]:
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    return tick


def simulate(
    *,
    n_items: int,
    n_humans: int,
    n_labels: int,
    p_h: float | Sequence[float | Sequence[float]],
    p_j: float | Sequence[float],
    prevalence: Sequence[float] | None = None,
    rho: float | Sequence[float],
    design: str | Sequence[str],
    coefficient: str | Sequence[str] = "po",
    rule: str = "margin",
    epsilon: float | None = None,
    delta: float = 0.05,
    omega_threshold: float = 0.5,
    q: float = 0.05,
    trials: int = 300,
    clusters: int | None = None,
    cluster_difficulty: float = 0.5,
    rng: int | np.random.Generator | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationResult:
    """Simulate designs and overlap rates on synthetic matrices (docs/method.md §6).

    ``rho`` (items per secondary human = ``round(rho * n_items)``), ``design`` (one of
    ``DESIGNS``), ``coefficient`` (``po``, ``kappa``, ``alpha``) and ``p_h`` may be lists:
    one cell per combination. A ``p_h`` entry may itself be a list of ``n_humans``
    rater-specific accuracies; ``p_j`` is one accuracy per judge. Within one ``p_h`` the
    same synthetic matrices serve every design, ``rho`` and coefficient (common random
    numbers), so differences between cells are not drawing noise. ``progress(done,
    total)`` is called after each cell of each chunk of trials: trials run in chunks of
    at most ``_TRIAL_CELLS`` trials x items x raters, so memory is bounded whatever
    ``trials`` and ``n_items``; a run of one chunk draws exactly as one of several would
    not (the generator's draws interleave chunk by chunk), so results for a seed depend on
    the chunk size, never on anything else.

    >>> result = simulate(n_items=200, n_humans=3, n_labels=2, p_h=0.9, p_j=0.9,
    ...                   rho=[0.1, 1.0], design="random", trials=20, rng=0)
    >>> [(c.rho, c.m) for c in result.cells], result.cells[1].std
    ([(0.1, 20), (1.0, 200)], 0.0)
    """
    n_items = positive_int(n_items, "n_items")
    n_humans = positive_int(n_humans, "n_humans")
    if n_humans < 2:
        raise ValueError("n_humans must be at least 2 (each held-out human needs a pool)")
    n_labels = label_count(n_labels)
    trials = positive_int(trials, "trials")
    grid = accuracy_grid(p_h, n_humans)
    judge_acc = [p_j] if isinstance(p_j, (int, float, np.number)) else list(p_j)
    if not judge_acc:
        raise ValueError("p_j must hold at least one judge accuracy")
    judge_acc = [probability(v, "p_j") for v in judge_acc]
    prevalence_shares(prevalence, n_labels)
    rhos = overlap_rates(rho, n_items)
    designs = choices_of(design, DESIGNS, "design")
    coefficients = choices_of(coefficient, COEFFICIENTS, "coefficient")
    decision = decision_rule(rule, epsilon, delta, omega_threshold, q, coefficients)
    gen = np.random.default_rng(rng)
    chunks = _trial_chunks(trials, n_items, n_humans + len(judge_acc))
    n_cells = len(grid) * len(rhos) * len(designs) * len(coefficients)
    tick = _progress_ticker(progress, n_cells * len(chunks))
    cells: list[SimulationCell] = []
    for accuracy in grid:
        human_acc = [accuracy] * n_humans if isinstance(accuracy, float) else list(accuracy)
        sparse_parts, dense_parts = [], []
        for chunk in chunks:
            codes = synthetic_codes(
                n_items,
                n_labels=n_labels,
                accuracies=human_acc + judge_acc,
                prevalence=prevalence,
                clusters=clusters,
                cluster_difficulty=cluster_difficulty,
                trials=chunk,
                rng=gen,
            )
            by_rater: np.ndarray = np.ascontiguousarray(np.moveaxis(codes, 2, 0), dtype=code_type(n_labels))
            del codes
            humans, judges = by_rater[:n_humans], by_rater[n_humans:]
            full = np.ones(humans.shape, dtype=bool)
            dense_parts.append(
                [
                    evaluate_decisions(humans, judges, full, coefficient=c, n_labels=n_labels, rule=decision)
                    for c in coefficients
                ]
            )
            sparse_parts.append(
                _grid_evaluations(
                    humans,
                    judges,
                    rhos=rhos,
                    designs=designs,
                    coefficients=coefficients,
                    n_labels=n_labels,
                    rule=decision,
                    rng=gen,
                    tick=tick,
                )
            )
        dense = {c: _joined([part[i] for part in dense_parts]) for i, c in enumerate(coefficients)}
        sparse = [_joined(parts) for parts in zip(*sparse_parts, strict=True)]
        cells += _grid_cells(
            sparse,
            dense,
            rhos=rhos,
            designs=designs,
            coefficients=coefficients,
            p_h=accuracy,
            delta=delta,
        )
    return _result(cells, n_items, n_humans, n_labels, decision, delta)


def replay(
    codes: object,
    *,
    judges: object,
    n_labels: int,
    rho: float | Sequence[float],
    design: str | Sequence[str],
    coefficient: str | Sequence[str] = "po",
    primary: int = 0,
    rule: str = "margin",
    epsilon: float | None = None,
    delta: float = 0.05,
    omega_threshold: float = 0.5,
    q: float = 0.05,
    trials: int = 300,
    rng: int | np.random.Generator | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationResult:
    """The metrics of ``simulate`` on a real dense matrix, subsampling its mask (docs/method.md §6).

    ``codes`` holds the humans' labels, shape ``(n_items, n_humans)``, complete (no
    ``-1``); ``primary`` is the column of the primary, who keeps every item. ``judges``
    holds one column per judge, shape ``(n_items,)`` or ``(n_items, n_judges)``. The
    dense reference is the matrix itself; each trial draws a fresh mask with the design.

    >>> humans = np.array([[0, 0, 0], [1, 1, 0], [0, 0, 0], [1, 1, 1]] * 10)
    >>> result = replay(humans, judges=humans[:, 0], n_labels=2, rho=1.0, design="strat", trials=3)
    >>> result.cells[0].bias, result.cells[0].wrong_decision
    (0.0, 0.0)
    """
    humans = check_codes(codes, n_labels)
    n_items, n_humans = humans.shape
    if n_items == 0 or n_humans < 2:
        raise ValueError(f"codes must hold at least one item and two humans, got shape {humans.shape}")
    if np.any(humans < 0):
        raise ValueError("codes must be a dense matrix (no -1): replay subsamples it")
    judge_codes = np.asarray(judges)
    if judge_codes.ndim == 1:
        judge_codes = judge_codes[:, None]
    judge_codes = check_codes(judge_codes, n_labels)
    if judge_codes.shape[0] != n_items or judge_codes.shape[1] == 0 or np.any(judge_codes < 0):
        raise ValueError(f"judges must be complete codes with {n_items} rows, got shape {np.asarray(judges).shape}")
    if not isinstance(primary, (int, np.integer)) or not 0 <= primary < n_humans:
        raise ValueError(f"primary must be a column index in 0..{n_humans - 1}, got {primary!r}")
    trials = positive_int(trials, "trials")
    rhos = overlap_rates(rho, n_items)
    designs = choices_of(design, DESIGNS, "design")
    coefficients = choices_of(coefficient, COEFFICIENTS, "coefficient")
    decision = decision_rule(rule, epsilon, delta, omega_threshold, q, coefficients)
    order = [primary] + [k for k in range(n_humans) if k != primary]
    small = code_type(n_labels)
    n_judges = judge_codes.shape[1]
    # rater-major, the same matrix for every trial (a view, no copy per trial)
    humans = np.broadcast_to(humans[:, order].T[:, None, :].astype(small), (n_humans, trials, n_items))
    judge_codes = np.broadcast_to(judge_codes.T[:, None, :].astype(small), (n_judges, trials, n_items))
    one = (slice(None), slice(0, 1))
    full = np.ones((n_humans, 1, n_items), dtype=bool)
    dense = {
        c: evaluate_decisions(humans[one], judge_codes[one], full, coefficient=c, n_labels=n_labels, rule=decision)
        for c in coefficients
    }
    sparse = _grid_evaluations(
        humans,
        judge_codes,
        rhos=rhos,
        designs=designs,
        coefficients=coefficients,
        n_labels=n_labels,
        rule=decision,
        rng=np.random.default_rng(rng),
        tick=_progress_ticker(progress, len(rhos) * len(designs) * len(coefficients)),
    )
    cells = _grid_cells(sparse, dense, rhos=rhos, designs=designs, coefficients=coefficients, p_h=None, delta=delta)
    return _result(cells, n_items, n_humans, n_labels, decision, delta)
