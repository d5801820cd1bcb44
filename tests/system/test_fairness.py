"""Issue 30's fairness figure as a test: project B's ``POST /batches`` p99 while project A's pm floods the
server with plans (12 threads, retrying 0.05 s after each 429) stays within 3x of B's p99 alone.

It runs ``bench/fairness.py`` as ``make bench`` does, smaller: a 4,000-item project A (16,000 label cells, so
its plans compute on the worker's threads, beside B's requests) and 200 of B's requests in 10 alternations of
the two phases, on this run's database, and reads the ratio it prints. A baseline starts once A's plans in
flight are done, a flooded phase 0.3 s after the flood's first request (no fixed 2 s pauses);
the phases alternate so that other load on the machine meets both alike. Before the fair-sharing work the
ratio was 5.78x (docs/performance.md). At this size on a 2-core machine at load average 9-13, with the
service's share it was 2.13x and 2.41x; with A allowed all 12 plans at once (``--plans-share 12``: the service
without fair sharing of plans) 3.98x in one run and 1.88x in another (docs/performance.md): it does not
reliably fail without fair sharing on a machine that loaded. At 300 requests with fixed 2 s pauses it took
about 116 s in CI."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import PG_URL, ROOT

BENCH = ["--requests", "200", "--rounds", "10", "--items-a", "4000", "--settle", "0.3"]


def test_project_bs_batch_p99_under_project_as_plan_flood_is_within_3x_of_its_baseline() -> None:
    args = [sys.executable, str(ROOT / "bench" / "fairness.py"), *BENCH] + (["--postgres", PG_URL] if PG_URL else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)  # the figures, for the run's log
    ratio = re.search(r"ratio under flood / alone:\s+p50\s+([\d.]+)x\s+p99\s+([\d.]+)x", done.stdout)
    assert ratio is not None, done.stdout
    plans = re.search(r"A's plans: \{(.*)\}", done.stdout)
    assert plans is not None and "201" in plans.group(1) and "429" in plans.group(1), done.stdout  # a real flood
    assert float(ratio.group(2)) <= 3.0, done.stdout
