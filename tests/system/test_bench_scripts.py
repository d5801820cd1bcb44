"""Every ``bench/`` script starts as ``make bench`` runs it: a file given to the interpreter, from a
directory that is not the repository's, with no ``PYTHONPATH`` (issue 37: five of them stopped at
``ModuleNotFoundError: bench``).

A script with options answers ``--help`` (its imports and its parser, no measurement); one without
is executed as a file under another name than ``__main__``, so its imports run and its main does not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BENCH = ROOT / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))
IMPORT_AS_FILE = (
    "import runpy, sys; sys.path[0] = sys.argv[1]; sys.argv = sys.argv[2:]; "
    "runpy.run_path(sys.argv[0], run_name='bench_import_check')"
)


def test_every_bench_script_is_checked() -> None:
    assert len(SCRIPTS) >= 20 and BENCH / "document_stats.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bench_script_starts_as_a_file(script: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if "ArgumentParser(" in script.read_text():
        args = [sys.executable, str(script), "--help"]
    else:
        args = [sys.executable, "-c", IMPORT_AS_FILE, str(BENCH), str(script)]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    if "--help" in args:
        assert "usage:" in done.stdout
