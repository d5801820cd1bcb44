"""Concurrency soak at scale (issue 8): the soak of ``tests/system/test_soak.py`` at a larger count.

Starts the real service (uvicorn) on a fresh SQLite file — and on PostgreSQL when
``--postgres URL`` is given — runs ``--clients`` annotator clients on loopback mixing batch
requests, label posts and reliability polls for ``--requests`` requests in all, and prints the
throughput, the error count and the counts checked (duplicate assignments, labels stored
against labels acknowledged).

    python bench/soak.py [--requests 5000] [--clients 50] [--postgres postgresql+psycopg://user@host:port/db]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer, migrate, wipe_postgres
from tests.system.test_soak import SoakResult, run_soak

KEY = "ak_bench_admin"


def report(label: str, r: SoakResult) -> bool:
    """Print the figures; True when every check holds."""
    kinds: Counter = Counter()
    for (kind, status), n in r.statuses.items():
        kinds[f"{kind} {status}"] += n
    lost = len(r.acked_cells - r.stored_cells)
    extra = len(r.stored_cells - r.acked_cells)
    fivexx = sum(n for (_, status), n in r.statuses.items() if status >= 500)
    print(f"[{label}] {r.requests:,} requests in {r.seconds:.1f} s -> {r.throughput:,.0f} req/s")
    print(f"[{label}]   by kind and status: {dict(sorted(kinds.items()))}")
    print(f"[{label}]   errors: {len(r.errors)} (5xx: {fivexx})" + (f", first: {r.errors[0]}" if r.errors else ""))
    print(f"[{label}]   items issued in batches: {len(r.issued):,}, duplicate (rater, item): {r.duplicates}")
    print(
        f"[{label}]   labels acknowledged: {r.acked_labels:,} (cells {len(r.acked_cells):,}), events written: "
        f"{r.label_events:,}, stored: {len(r.stored_cells):,}, lost: {lost}, unacknowledged extra: {extra}"
    )
    return not r.errors and r.duplicates == 0 and lost == extra == 0 and r.acked_labels == r.label_events


def run(url: str, label: str, args: argparse.Namespace) -> bool:
    migrate(url)
    with LiveServer(url, KEY, bootstrap_resamples=args.bootstrap) as server:
        result = run_soak(
            server, clients=args.clients, requests=args.requests, n_raters=args.raters, n_items=args.items, m=args.m
        )
    return report(label, result)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--postgres", help="PostgreSQL URL (its public schema is wiped)")
    ap.add_argument("--requests", type=int, default=5_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--raters", type=int, default=10)
    ap.add_argument("--items", type=int, default=1_000)
    ap.add_argument("--m", type=int, default=600, help="overlap items planned per secondary")
    ap.add_argument("--bootstrap", type=int, default=50, help="bootstrap resamples of the reliability document")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        ok &= run(f"sqlite:///{tmp}/soak.db", "sqlite", args)
    if args.postgres:
        wipe_postgres(args.postgres)
        ok &= run(args.postgres, "postgresql", args)
    if not ok:
        sys.exit("soak checks failed")


if __name__ == "__main__":
    main()
