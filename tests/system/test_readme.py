"""The README's shell blocks (and the user guide's, which continue its walkthrough) run as written against a
live server, so they cannot rot.

Every fenced shell block (``sh``, ``bash``, ...) after the quick start is run, in order, in one bash session
(``set -eo pipefail``) whose working directory holds a ``.venv/bin/annoplan`` that runs this
checkout's command line; the README's server address is replaced by the live server's. Each
``# -> output`` comment must appear in what the block printed. Blocks that start a server or
the test suite (the quick start, ``make serve``) are the live server itself.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from service.cli import app as cli
from tests.conftest import ROOT, fresh_database
from tests.live_server import LiveServer

README = ROOT / "README.md"
GUIDES = (ROOT / "docs" / "user-guide.md",)
"""Pages whose shell blocks continue the README's walkthrough, run after it in this order."""
README_URL = "http://127.0.0.1:8000"
README_KEY = "my-admin-key"


def shell_blocks(text: str) -> list[str]:
    """The README's shell blocks (``sh``, ``bash``, ``shell``, ``console``), without those that start a server
    or the suite."""
    blocks = re.findall(r"^```(?:sh|bash|shell|console)\n(.*?)^```", text, flags=re.S | re.M)
    return [b for b in blocks if "make serve" not in b and "make test" not in b]


def expected_outputs(block: str) -> list[str]:
    """The ``# -> ...`` comments of a block: outputs the README promises."""
    return re.findall(r"^# -> (.+)$", block, flags=re.M)


def test_readme_blocks_are_found() -> None:
    blocks = shell_blocks(README.read_text())
    assert len(blocks) >= 3 and any("annoplan simulate" in b for b in blocks)
    assert shell_blocks("```bash\necho a\n```\n```sh\necho b\n```\n```text\nc\n```\n") == ["echo a\n", "echo b\n"]


def test_readme_shell_blocks_run_as_written(template_url: str, tmp_path: Path) -> None:
    blocks = [b for page in (README, *GUIDES) for b in shell_blocks(page.read_text())]
    shim = tmp_path / ".venv" / "bin" / "annoplan"
    shim.parent.mkdir(parents=True)
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -c "from service.cli import main; main()" "$@"\n')
    shim.chmod(0o755)
    url = fresh_database(template_url, tmp_path)
    with LiveServer(url, README_KEY) as server:
        script = "set -eo pipefail\n" + "\n".join(blocks).replace(README_URL, server.base_url)
        result = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": str(ROOT), "ANNOPLAN_DATABASE_URL": url},
        )
    assert result.returncode == 0, f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    for promised in (p for b in blocks for p in expected_outputs(b)):
        assert promised in result.stdout, f"README promises {promised!r}"
    assert "Traceback" not in result.stdout + result.stderr
    # No response was the service's error body (it starts {"error": ...}); nested keys named "error"
    # (a simulated error rate) are fine.
    assert not re.search(r'(^|\})\{"error":', result.stdout, flags=re.M), result.stdout[-3000:]


def _table_rows(text: str) -> dict[str, str]:
    """A rich table's body rows (``│ name │ value │``) as name -> value, spacing ignored."""
    cells = (line.strip("│ ").split("│") for line in text.splitlines() if line.startswith("│"))
    return {name.strip(): value.strip() for name, value in cells}


def test_the_first_answer_shows_what_its_command_prints() -> None:
    """The first answer's output block is what its command prints now, row for row, and the sentences under it
    quote the same overlap and total: the README cannot drift from the service."""
    section = README.read_text().split("## Your first answer", 1)[1].split("\n## ", 1)[0]
    command = re.search(r"^```sh\n(.*?)\n```", section, flags=re.S | re.M)
    shown = re.search(r"^```text\n(.*?)\n```", section, flags=re.S | re.M)
    assert command and shown, "the first answer has its command and its output"
    argv = shlex.split(command.group(1))
    assert argv[0] == ".venv/bin/annoplan"
    result = CliRunner().invoke(cli, argv[1:])
    assert result.exit_code == 0, result.output
    printed, quoted = _table_rows(result.output), _table_rows(shown.group(1))
    assert quoted and quoted.items() <= printed.items(), (quoted, printed)
    # "... labels `m` = 120 of them ..., so the humans label 2,000 + 2 x 120 = 2,240 items in all"
    prose = section[shown.end() :]
    m, total = int(printed["m (overlap per secondary)"]), printed["total human labels"]
    n_items, n_raters = int(argv[argv.index("--n-items") + 1]), int(argv[argv.index("--n-raters") + 1])
    assert f"`m` = {m} of them" in prose
    assert f"{n_items:,} + {n_raters - 1} x {m} = {total} items" in prose
    assert f"{n_items:,} items" in prose and int(total.replace(",", "")) == n_items + (n_raters - 1) * m
