"""Issue 30's fairness figure as a test: project B's ``POST /batches`` p99 while project A's pm floods the
server with plans (12 threads, retrying 0.05 s after each 429) stays within 3x of B's p99 alone.

It runs ``bench/fairness.py`` as ``make bench`` does, with a smaller project A (10,000 items) but the
bench's 300 of B's requests in 10 alternations of the two phases, on this run's database, and reads the
ratio it prints. Before the fair-sharing work the ratio was 5.78x (docs/performance.md); the phases
alternate so that other load on the machine meets both alike. With 150 requests in 5 alternations the
p99 was the second or third slowest of 150 requests, which one burst of outside load decided: it passed
3 of 4 runs on a loaded machine; of 300 in 10 alternations it is the third slowest, each phase's
requests spread over twice as many stretches of the run."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import PG_URL, ROOT


def test_project_bs_batch_p99_under_project_as_plan_flood_is_within_3x_of_its_baseline() -> None:
    args = [sys.executable, str(ROOT / "bench" / "fairness.py"), "--requests", "300", "--rounds", "10"]
    args += ["--items-a", "10000"] + (["--postgres", PG_URL] if PG_URL else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)  # the figures, for the run's log
    ratio = re.search(r"ratio under flood / alone:\s+p50\s+([\d.]+)x\s+p99\s+([\d.]+)x", done.stdout)
    assert ratio is not None, done.stdout
    plans = re.search(r"A's plans: \{(.*)\}", done.stdout)
    assert plans is not None and "201" in plans.group(1) and "429" in plans.group(1), done.stdout  # a real flood
    assert float(ratio.group(2)) <= 3.0, done.stdout
