"""Benchmark of planner.sequential (issue 12): what peeking costs, and what monitoring costs.

1. Peeking-error table. A PM reads the decision after every 20 overlap items, up to 5x the
   fixed-sample ``m_cert``, and stops at the first pass or reject. Fixed: the shipped
   fixed-sample decision (``validate_judge``, margin rule, inconclusive guard, 200
   resamples). Anytime: ``monitor_judge`` (e-BH). K = 3..5 humans on a shared panel,
   p_h = .85, L = 2, epsilon = .05. False approval: a judge exactly on the margin;
   false rejection: a judge as good as the humans (p_j = p_h); both with Monte Carlo SE.
2. Expected stopping overlap of ``monitor_judge`` for a good judge (p_j = .90) next to
   ``m_cert`` and the share of runs decided by 5x ``m_cert``.
3. ``monitor_judge`` on 100,000 items x 9 humans (target < 0.5 s), with one
   ``validate_judge`` (1,000 resamples) on the same matrix as the reference, and the
   inverse-inclusion-weighted monitor (three inclusion classes, docs/method.md §9) against
   the unweighted one.
4. ``service.documents.monitoring.judge_monitorings`` (the /reliability monitoring block) on the
   project of ``bench/million.py``: a judge and the primary on every item, 8 secondaries on
   1/8 each, every rater's labels arriving in item order, then 1,000 of the judge's labels
   corrected (so they arrive last). 10,000 vs 1,000,000 items in the same run (target
   <= 0.2 s at 1M), and the size of the block's JSON (bounded: its bands are sampled).
5. ``kept_monitoring`` brought up to date after 1,000 labels added (secondaries' labels on items
   they had not labeled, arriving last), after 1,000 of the judge's labels corrected (its paths
   patched, then run again from their start: the opening's labels come first), and after those 1,000
   added labels corrected (run again from the mark before them), next to ``monitor_judge`` on the
   whole matrix, on the same project in its compact types with every label before the writes in one
   opening (one tie, read in seeded key order, as the service reads it), 10,000 and 1,000,000 items in
   the same run (in-process CPU, best of 3; the results are checked equal), and the bytes a kept state
   holds.

6. The plan's promised power (``plan_monitoring``: the monitor's m for power .8 in the service's
   order, docs/method.md §8.1) next to the power simulated on further projects followed in that order.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/monitoring.py [runs]`` (default 100
runs per cell; the fixed column dominates the time); ``bench/monitoring.py scale`` runs 4 only,
``bench/monitoring.py delta`` 5 only, ``bench/monitoring.py power`` 6 only.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package, not bench/service.py

from planner.codes import code_type  # noqa: E402
from planner.decision import validate_judge
from planner.false_rejection import m_cert
from planner.monitor_sizing import monitor_runs  # noqa: E402
from planner.sequential import MonitorState, kept_monitoring, monitor_judge
from planner.xi_moments import prior_moments
from service.documents.monitoring import ArrivalOrder, judge_monitorings  # noqa: E402
from service.matrices.arrival import seeded_item_keys  # noqa: E402
from service.matrices.matrix import LabelMatrix, RaterColumn, rank_type  # noqa: E402
from service.planning.monitoring_costs import plan_monitoring  # noqa: E402
from service.schemas.projects import DecisionSettings  # noqa: E402

P_H, EPSILON, N_LABELS, LOOK_EVERY = 0.85, 0.05, 2, 20
P_MARGIN = (0.595 - EPSILON) / 0.7  # L = 2: E[xi] = 0.7 p_j - 0.595 = -epsilon


def panel(rng: np.random.Generator, n_items: int, n_humans: int, p_j: float) -> np.ndarray:
    """Symmetric noise channel; every human labels every item; the judge is the last column."""
    truth = rng.integers(0, N_LABELS, n_items)
    cols = [np.where(rng.random(n_items) < p, truth, 1 - truth) for p in [P_H] * n_humans + [p_j]]
    return np.column_stack(cols)


def fixed_first_decision(codes: np.ndarray, n_humans: int) -> str:
    """The fixed-sample decision read every 20 items: the first pass or reject stands."""
    for look in range(LOOK_EVERY, codes.shape[0] + 1, LOOK_EVERY):
        v = validate_judge(
            codes[:look],
            judge=n_humans,
            humans=list(range(n_humans)),
            n_labels=N_LABELS,
            n_resamples=200,
            rng=look,
        )
        if v.decision in ("pass", "reject"):
            return v.decision
    return "continue"


def rate(flags: list[bool]) -> str:
    p = float(np.mean(flags))
    return f"{p:.3f} ± {math.sqrt(p * (1 - p) / len(flags)):.3f}"


def peeking_table(runs: int, m: int) -> None:
    print(f"Peeking: a look every {LOOK_EVERY} items up to {5 * m} (5 x m_cert = 5 x {m}), {runs} runs per cell")
    print(f"{'K':>2} | {'FA fixed':>14} | {'FA anytime':>14} | {'FR fixed':>14} | {'FR anytime':>14}")
    for k in (3, 4, 5):
        rng = np.random.default_rng(k)
        cells = {}
        for name, p_j, wrong in (("FA", P_MARGIN, "pass"), ("FR", P_H, "reject")):
            fixed, anytime = [], []
            for _ in range(runs):
                codes = panel(rng, 5 * m, k, p_j)
                fixed.append(fixed_first_decision(codes, k) == wrong)
                mon = monitor_judge(codes, judge=k, humans=list(range(k)), n_labels=N_LABELS)
                anytime.append(mon.decision == wrong)
            cells[name] = (rate(fixed), rate(anytime))
        print(f"{k:>2} | {cells['FA'][0]:>14} | {cells['FA'][1]:>14} | {cells['FR'][0]:>14} | {cells['FR'][1]:>14}")


def stopping_table(runs: int, m: int) -> None:
    print(f"\nStopping overlap for a good judge (p_j = .90), {runs * 5} runs; m_cert = {m}")
    print(f"{'K':>2} | {'mean stop':>9} | {'median':>6} | {'ratio to m_cert':>15} | {'decided by 5 m':>14}")
    for k in (3, 4, 5):
        rng = np.random.default_rng(100 + k)
        stops = []
        for _ in range(runs * 5):
            mon = monitor_judge(panel(rng, 5 * m, k, 0.90), judge=k, humans=list(range(k)), n_labels=N_LABELS)
            stops.append(np.inf if mon.decided_at is None else mon.decided_at + 1)
        stops_arr = np.array(stops)
        done = np.isfinite(stops_arr)
        mean = float(stops_arr[done].mean())
        print(f"{k:>2} | {mean:>9.0f} | {np.median(stops_arr[done]):>6.0f} | {mean / m:>15.2f} | {done.mean():>14.3f}")


def timing() -> None:
    rng = np.random.default_rng(0)
    n, k = 100_000, 9
    truth = rng.integers(0, 3, n)
    cols = [np.where(rng.random(n) < 0.8, truth, (truth + rng.integers(1, 3, n)) % 3) for _ in range(k + 1)]
    for col in cols[1:k]:
        col[rng.random(n) >= 0.10] = -1  # secondaries label 10%
    codes = np.column_stack(cols)
    order = rng.permutation(codes.size).reshape(codes.shape)
    inclusion = rng.choice([0.05, 0.1, 0.2], n)

    def fastest(**weights: np.ndarray) -> float:
        best = np.inf
        for _ in range(3):
            start = time.process_time()
            monitor_judge(codes, judge=k, humans=list(range(k)), n_labels=3, order=order, **weights)
            best = min(best, time.process_time() - start)
        return best

    best, weighted = fastest(), fastest(inclusion=inclusion)
    start = time.process_time()
    validate_judge(codes, judge=k, humans=list(range(k)), n_labels=3, rng=0)
    reference = time.process_time() - start
    print(
        f"\nmonitor_judge, 100,000 items x 9 humans: {best:.3f} s CPU (target < 0.5 s); "
        f"validate_judge with 1,000 resamples on the same matrix: {reference:.3f} s "
        f"(ratio {best / reference:.2f}); weighted by inverse inclusion: {weighted:.3f} s "
        f"(ratio {weighted / best:.2f} to the unweighted monitor)"
    )


def service_matrix(n_items: int, rng: np.random.Generator) -> LabelMatrix:
    """bench/million.py's project as a label matrix: judge, primary, 8 secondaries on 1/8 each,
    each rater's labels in item order (``order`` = label_seq), then 1,000 judge corrections."""
    truth = rng.random(n_items) < 0.7
    raw = np.full((n_items, 10), -1, dtype=np.int64)
    order = np.full(raw.shape, -1, dtype=np.int64)
    seq = 0
    for k in range(10):
        on = np.arange(n_items) if k < 2 else np.flatnonzero(rng.random(n_items) < 1 / 8)
        right = rng.random(on.size) < (0.9 if k == 0 else 0.85)
        raw[on, k] = np.where(truth[on] == right, 0, 1)
        order[on, k] = seq + np.arange(on.size)
        seq += on.size
    fixed = rng.choice(n_items, size=1_000, replace=False)
    raw[fixed, 0] = 1 - raw[fixed, 0]
    order[fixed, 0] = seq + np.arange(fixed.size)
    raters = [RaterColumn(1, "judge", "judge"), RaterColumn(2, "prim", "primary")] + [
        RaterColumn(3 + k, f"h{k}", "human") for k in range(8)
    ]
    return LabelMatrix(
        raw=raw,
        item_ids=np.arange(n_items),
        raters=raters,
        n_labels=2,
        label_seq=seq + fixed.size,
        criterion="default",
        order=order,
    )


def scale() -> None:
    """judge_monitorings at 10k and 1M items in the same run (in the compact types a document's child
    process reads), and its JSON size."""
    settings = DecisionSettings()
    figures = {}
    for n in (10_000, 1_000_000):
        dense = service_matrix(n, np.random.default_rng(n))
        matrix = dataclasses.replace(
            dense, raw=dense.raw.astype(code_type(dense.n_labels)), order=dense.order.astype(rank_type(dense.label_seq))
        )
        humans = matrix.columns("primary", "human")
        best, block = np.inf, {}
        for _ in range(3):
            start = time.process_time()
            [block] = judge_monitorings(matrix, [0], humans, settings, None, None, ArrivalOrder(opening=0, seed=0))
            best = min(best, time.process_time() - start)
        figures[n] = (best, len(json.dumps(block)), block["decision"], block["looks"])
        print(
            f"judge_monitorings, {n:>9,} items x 10 raters: {best:.3f} s CPU "
            f"(best of 3); block JSON {figures[n][1]:,} bytes; decision {block['decision']}, "
            f"{block['looks']:,} looks"
        )
    (small, small_json, *_), (large, large_json, *_) = figures[10_000], figures[1_000_000]
    print(
        f"1M / 10k: time {large / small:.0f}x for 100x the items (target <= 0.2 s at 1M: "
        f"{'met' if large <= 0.2 else 'not met'}); JSON {large_json / small_json:.2f}x"
    )


def best_cpu(call: Callable[..., object], *args: object, **kwargs: object) -> float:
    """The least CPU seconds of three ``call(*args, **kwargs)``."""
    best = np.inf
    for _ in range(3):
        start = time.process_time()
        call(*args, **kwargs)
        best = min(best, time.process_time() - start)
    return best


def _state_bytes(state: MonitorState) -> int:
    """Bytes of a kept monitoring's arrays (its codes, each human's path and bounds)."""
    paths = sum(a.nbytes for p in state.paths for a in (p.times, p.xi, p.rows, p.lower, p.upper))
    return state.codes.nbytes + paths


def delta() -> None:
    """kept_monitoring after 1,000 labels added and after 1,000 corrections vs monitor_judge on the whole
    matrix, 10k and 1M items."""
    figures = {}
    for n in (10_000, 1_000_000):
        dense = service_matrix(n, np.random.default_rng(n))
        codes = dense.raw.astype(code_type(dense.n_labels))
        order = dense.order.astype(rank_type(dense.label_seq + 2_000))
        order = np.where(order >= 0, np.maximum(order, dense.label_seq), -1).astype(order.dtype)  # the opening
        keys = seeded_item_keys(n, 0)
        options = {
            "judge": 0,
            "humans": dense.columns("primary", "human"),
            "n_labels": dense.n_labels,
            "tiebreak": keys,
        }
        _, state = kept_monitoring(codes, previous=None, order=order, **options)
        empty = np.argwhere(codes[:, 2:] < 0)
        empty = empty[np.random.default_rng(1).choice(empty.shape[0], 1_000, replace=False)]
        added, added_order = codes.copy(), order.copy()
        added[empty[:, 0], 2 + empty[:, 1]] = 1
        added_order[empty[:, 0], 2 + empty[:, 1]] = dense.label_seq + 1 + np.arange(1_000)
        corrected = codes.copy()
        fixed = np.random.default_rng(2).choice(n, 1_000, replace=False)
        corrected[fixed, 0] = 1 - corrected[fixed, 0]  # a correction keeps its cell's rank
        late = added.copy()  # the 1,000 labels added, corrected: late in the paths
        late[empty[:, 0], 2 + empty[:, 1]] = 0
        after_added = kept_monitoring(added, previous=state, order=added_order, **options)[1]
        row = []
        for after, after_order, before in (
            (added, added_order, state),
            (corrected, order, state),
            (late, added_order, after_added),
        ):
            kept = kept_monitoring(after, previous=before, order=after_order, **options)[0]
            full = monitor_judge(after, order=after_order, **options)
            assert [r.e_value for r in kept.raters] == [r.e_value for r in full.raters] and kept.looks == full.looks
            row += [
                best_cpu(monitor_judge, after, order=after_order, **options),
                best_cpu(kept_monitoring, after, previous=before, order=after_order, **options),
            ]
        figures[n] = (*row, _state_bytes(state))
    print("\nmonitoring after a write of 1,000 labels, in-process CPU (best of 3): whole matrix / kept state")
    for n, (whole, kept_cpu, whole_fix, kept_fix, whole_late, kept_late, size) in figures.items():
        print(
            f"  {n:>9,} items x 10 raters: added {whole:.3f} s / {kept_cpu:.3f} s ({whole / kept_cpu:.1f}x less); "
            f"opening labels corrected {whole_fix:.3f} s / {kept_fix:.3f} s ({whole_fix / kept_fix:.1f}x less); "
            f"the added labels corrected {whole_late:.3f} s / {kept_late:.3f} s ({whole_late / kept_late:.1f}x "
            f"less); kept state {size / 2**20:.0f} MiB"
        )
    small, (_, large_kept, _, large_fix, _, large_late, _) = figures[10_000], figures[1_000_000]
    print(
        f"  kept state at 1M: added {large_kept / small[0]:.2f}x, opening labels corrected "
        f"{large_fix / small[2]:.2f}x, added labels corrected {large_late / small[4]:.2f}x the whole-matrix "
        "monitoring at 10k of the same run"
    )


def power_table(runs: int) -> None:
    """6. The plan's promised power next to the power simulated in the service's order.

    Promised: ``plan_monitoring`` (the block a plan stores: the monitor's m for ``decision.power``
    = .8, sized on its own runs). Simulated: ``runs`` further projects followed batch by batch in
    the service's order (``planner.monitor_sizing.monitor_runs`` on another stream), the share
    passed by the plan's m, with its Monte Carlo SE; and the share by m/2 and by the one-look m."""
    print("\n6. plan's promised power vs simulated in the service's order (d = +.03, random lists, n = 5000)")
    print(
        f"{'p_h':>5} {'K':>2} {'m_fixed':>7} {'m_any':>6} {'budget':>6} {'promised':>8} {'simulated':>14} "
        f"{'by m/2':>7} {'by m_fixed':>10} {'FR':>6} {'FA':>6} {'s':>5}"
    )
    for p_h in (0.8, 0.9):
        slope = 2 * p_h - 1
        p_j = (p_h * p_h + (1 - p_h) ** 2 + 0.03 - (1 - p_h)) / slope  # mu_d = +.03, L = 2
        for k in (3, 5):
            mu_d, sigma0_sq = prior_moments(p_h, p_j, n_labels=N_LABELS)
            m_fixed = int(m_cert(mu_d, sigma0_sq, epsilon=EPSILON))
            start = time.perf_counter()
            block = plan_monitoring(
                DecisionSettings(),
                (p_h, p_j),
                n_labels=2,
                n_humans=k,
                n_items=5000,
                design="random",
                m_fixed=m_fixed,
                seed=1,
            )
            m = block["m"]
            sim = monitor_runs(
                p_h, p_j, n_labels=2, n_humans=k, horizon=m, design="random", n_items=5000, n_trials=runs, rng=12345
            )
            got = sim.rate("pass", m)
            se = math.sqrt(max(got * (1 - got), 1e-9) / runs)
            print(
                f"{p_h:>5} {k:>2} {m_fixed:>7} {m:>6} {block['budget']:>6} {block['power_at_m']:>8.3f} "
                f"{got:>8.3f} +-{se:.3f} {sim.rate('pass', m // 2):>7.3f} {sim.rate('pass', m_fixed):>10.3f} "
                f"{block['fr']:>6.3f} {block['fa'] or 0:>6.3f} {time.perf_counter() - start:>5.1f}"
            )


def main() -> None:
    if sys.argv[1:] == ["power"]:
        power_table(200)
        return
    if sys.argv[1:] == ["scale"]:
        scale()
        return
    if sys.argv[1:] == ["delta"]:
        delta()
        return
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    mu_d, sigma0_sq = prior_moments(P_H, 0.90, n_labels=N_LABELS)
    m = int(m_cert(mu_d, sigma0_sq, epsilon=EPSILON))
    timing()
    scale()
    delta()
    stopping_table(runs, m)
    peeking_table(runs, m)
    power_table(runs)


if __name__ == "__main__":
    main()
