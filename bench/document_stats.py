"""The reliability document's statistics other than monitoring, at 10,000 and 1,000,000 items x 10 raters.

The matrix is the lead's profile of ``/reliability`` at 1M: binary labels, the judge and the
primary on every item, 8 secondaries on 1/8 of the items each. Pieces, each as CPU seconds
(``time.process_time``, steadier than wall time on a shared machine) with the 1M / 10k ratio
measured in the same run:

- ``patterns``: the one pass over the matrix (``item_patterns`` of the int8 codes);
- ``resample``: the document's one resample of the items (``ItemResample.draw``, 1,000 resamples);
- ``validation``: ``validate_judge`` reading it;
- ``coefficients``: ``summary_table`` of the humans reading it (merged into their patterns);
- ``pilot``: ``pilot_moments``, 200 resamples (the document's ``recipe_now``), on the patterns;
- ``document``: the five above, what the document pays;
- ``separate``: the three statistics each drawing its own resamples (``rng=``), which the
  document did before it shared one.

``--reference DIR`` (a checkout or ``git archive`` of an older tree) times ``separate`` with that
tree's ``planner`` in a child process in the same run and prints the document's figure as a
ratio of it.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/document_stats.py [--reference DIR]``
(multithreaded BLAS on a loaded machine spends more CPU than the products).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
# run as a file, bench/ is first on sys.path (and its service.py would shadow the service package):
# drop it and append the repository, so that `bench` imports and a --reference tree on PYTHONPATH comes first
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH] + [str(BENCH.parent)]

from bench.reference_tree import add_reference_options, reference_figures
from planner.decision import validate_judge
from planner.patterns import ItemPatterns, item_patterns
from planner.rater_pairs import summary_table
from planner.xi_moments import pilot_moments

N_RATERS, N_RESAMPLES, PILOT_RESAMPLES = 10, 1000, 200
JUDGE, HUMANS = 0, list(range(1, N_RATERS))
SIZES = (10_000, 1_000_000)


def profile_codes(n_items: int, rng: np.random.Generator) -> np.ndarray:
    """Judge (accuracy .9) and primary (.85) on every item, 8 secondaries (.85) on 1/8 each; int8."""
    truth = rng.random(n_items) < 0.7
    codes = np.full((n_items, N_RATERS), -1, dtype=np.int8)
    for k in range(N_RATERS):
        on = np.arange(n_items) if k < 2 else np.flatnonzero(rng.random(n_items) < 1 / 8)
        right = rng.random(on.size) < (0.9 if k == 0 else 0.85)
        codes[on, k] = np.where(truth[on] == right, 0, 1)
    return codes


def cpu(run: Callable[[], object], repeats: int = 2) -> float:
    """Least CPU seconds of ``repeats`` calls."""
    best = np.inf
    for _ in range(repeats):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return float(best)


def pilot(patterns: ItemPatterns) -> object:
    return pilot_moments(patterns, judge=JUDGE, humans=HUMANS, n_labels=2, n_resamples=PILOT_RESAMPLES, rng=0)


def separate(codes: np.ndarray) -> float:
    """CPU seconds of the patterns and the three statistics each drawing its own resamples (any tree's API)."""

    def run() -> object:
        patterns = item_patterns(codes, 2)
        validate_judge(patterns, judge=JUDGE, humans=HUMANS, n_labels=2, n_resamples=N_RESAMPLES, rng=5)
        summary_table(patterns.select(HUMANS), n_labels=2, n_resamples=N_RESAMPLES, rng=5)
        return pilot(patterns)

    return cpu(run)


def pieces(codes: np.ndarray) -> dict[str, float]:
    from planner.resampling import ItemResample

    patterns = item_patterns(codes, 2)
    resample = ItemResample.draw(patterns.counts, patterns.n_items, N_RESAMPLES, 5)
    humans, groups = patterns.grouped(HUMANS)
    times = {
        "patterns": cpu(lambda: item_patterns(codes, 2)),
        "resample": cpu(lambda: ItemResample.draw(patterns.counts, patterns.n_items, N_RESAMPLES, 5)),
        "validation": cpu(
            lambda: validate_judge(
                patterns, judge=JUDGE, humans=HUMANS, n_labels=2, n_resamples=N_RESAMPLES, resample=resample
            )
        ),
        "coefficients": cpu(
            lambda: summary_table(humans, n_labels=2, resample=resample.merged(groups, humans.counts.size))
        ),
        "pilot": cpu(lambda: pilot(patterns)),
    }
    times["document"] = sum(times.values())
    times["separate"] = separate(codes)
    return times


def matrices() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [profile_codes(n, rng) for n in SIZES]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_reference_options(parser)
    args = parser.parse_args()
    reference = reference_figures(__file__, args, lambda: [separate(codes) for codes in matrices()])
    small, large = (pieces(codes) for codes in matrices())
    n_patterns = item_patterns(matrices()[1], 2).counts.size
    print(f"1M x {N_RATERS} raters: {n_patterns} distinct rows; {N_RESAMPLES} resamples; CPU seconds, least of 2")
    print(f"{'piece':<14} {'10k':>8} {'1M':>8} {'1M/10k':>7}")
    for name in small:
        print(f"{name:<14} {small[name]:8.3f} {large[name]:8.3f} {large[name] / max(small[name], 1e-9):7.1f}")
    if reference is not None:
        print(
            f"{'reference':<14} {reference[0]:8.3f} {reference[1]:8.3f} {reference[1] / reference[0]:7.1f}"
            f"   (separate statistics, {args.reference})"
        )
        print(
            f"document / reference: 10k {small['document'] / reference[0]:.2f}x, "
            f"1M {large['document'] / reference[1]:.2f}x"
        )


if __name__ == "__main__":
    main()
