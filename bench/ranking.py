"""``rank_judges`` (the fresh ``/ranking`` statistics) at 10,000 and 1,000,000 items x 10 raters.

The matrix is ``bench/document_stats.py``'s profile of the service at 1M (binary labels, the judge
and the primary on every item, 8 secondaries on 1/8 of the items each), ranked with the service's
defaults: one judge, the nine humans, rule "margin" on p_o, 1,000 resamples. CPU seconds
(``time.process_time``, least of 2) with the 1M / 10k ratio measured in the same run;
``--reference DIR`` (a checkout or ``git archive`` of an older tree) times the same call with that
tree's ``planner`` in a child process in the same run.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/ranking.py [--reference DIR]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
# run as a file, bench/ is first on sys.path (and its service.py would shadow the service package):
# drop it and append the repository, so that `bench` imports and a --reference tree on PYTHONPATH comes first
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH] + [str(BENCH.parent)]

from bench.document_stats import HUMANS, JUDGE, N_RESAMPLES, cpu, matrices
from bench.reference_tree import add_reference_options, reference_figures
from planner.ranking import rank_judges


def ranking_cpu() -> list[float]:
    """CPU seconds of rank_judges at 10k and 1M (any tree's API)."""
    return [
        cpu(lambda c=codes: rank_judges(c, judges=[JUDGE], humans=HUMANS, n_labels=2, n_resamples=N_RESAMPLES, rng=5))
        for codes in matrices()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_reference_options(parser)
    args = parser.parse_args()
    reference = reference_figures(__file__, args, ranking_cpu)
    small, large = ranking_cpu()
    line = f"rank_judges, {N_RESAMPLES:,} resamples, CPU s: 10k {small:.3f}; 1M {large:.3f} ({large / small:.1f}x)"
    if reference is not None:
        line += f"; reference 10k {reference[0]:.3f}, 1M {reference[1]:.3f} (ours {large / reference[1]:.2f}x)"
    print(line)


if __name__ == "__main__":
    main()
