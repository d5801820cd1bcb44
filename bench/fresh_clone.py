"""The README's first-run figure (issue 31): a fresh clone's ``make serve`` until ``/healthz`` answers 200.

Clones this checkout's HEAD into a temporary directory (``git clone``, so only committed files, as a new
user gets them), runs ``make serve`` there on a free port with its own ``.venv`` (pip's cache as it is on
this machine), and prints how long the install took (until the server prints that it serves) and how long
``/healthz`` then took to answer 200. The server is stopped and the clone removed at the end.

    .venv/bin/python bench/fresh_clone.py [--timeout 900]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
SERVING = "annoplan: serving"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before giving up")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "annoplan"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANNOPLAN_", "VIRTUAL_ENV"))}
        env.update(ANNOPLAN_PORT=str(port), ANNOPLAN_ADMIN_KEY="ak_bench_fresh_clone_0123456789")
        started = time.monotonic()
        server = subprocess.Popen(
            ["make", "serve"],
            cwd=clone,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # make, pip and the server in one group, stopped together
        )
        serving: list[float] = []
        lines: list[str] = []

        def read() -> None:
            assert server.stdout is not None
            for line in server.stdout:
                lines.append(line)
                if SERVING in line and not serving:
                    serving.append(time.monotonic())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        healthy = None
        try:
            while time.monotonic() - started < args.timeout and server.poll() is None:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                        healthy = time.monotonic()
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        if healthy is None or not serving:
            sys.exit("no /healthz 200 within the timeout; the output ended:\n" + "".join(lines[-30:]))
    installed, answered = serving[0] - started, healthy - serving[0]
    head = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    print(f"fresh clone of {head}")
    print(f"make serve: installed and started in {installed:5.1f} s")
    print(f"/healthz 200:       {answered:5.1f} s later ({installed + answered:.1f} s in all)")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
