"""A benchmark's figures with an older tree's ``planner`` in the same run (``--reference DIR``).

``DIR`` is a checkout or a ``git archive`` of the older tree. The benchmark script runs again in a
child process with ``DIR`` first on ``PYTHONPATH`` (so ``planner`` is the older one), measures, and
prints its figures as JSON for the parent to print beside its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

CHILD_FLAG = "--as-reference"


def add_reference_options(parser: argparse.ArgumentParser) -> None:
    """``--reference DIR`` (and the child's hidden flag) on a benchmark's parser."""
    parser.add_argument("--reference", help="an older tree (checkout or git archive) whose planner runs the same calls")
    parser.add_argument(CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)


def reference_figures(script: str, args: argparse.Namespace, measure: Callable[[], Any]) -> Any | None:
    """``measure()`` with the ``--reference`` tree's planner, or None without ``--reference``.

    In the child process it prints ``measure()`` as JSON and exits instead.
    """
    if args.as_reference:
        print(json.dumps(measure()))
        raise SystemExit(0)
    if not args.reference:
        return None
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.abspath(args.reference), here])}
    child = subprocess.run([sys.executable, script, CHILD_FLAG], env=env, check=True, capture_output=True, text=True)
    return json.loads(child.stdout)
