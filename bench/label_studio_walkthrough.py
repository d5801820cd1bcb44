"""docs/label-studio.md's step by step, timed from ``make label-studio`` to the dashboard's first decision (issue 36).

Goes as a user would: ``make label-studio`` (a fresh virtualenv and data directory: pip install, first start
and its database), annoplan serving (uvicorn on a fresh SQLite file), a project of 404 items with the judge's and
the primary's labels uploaded, a plan from priors, a Label Studio project, ``annoplan connect label-studio``
with ``--annotator 1=ann-2``, then batch after batch of ann-2's planned list: the batch imported into Label
Studio as tasks and each task annotated through Label Studio's API with the one user's token (a Submit each),
every label arriving by webhook; after each batch the dashboard's document (``/reliability``) is read, until
the judge's decision is no longer ``continue`` or ``insufficient_data``. Labels are drawn (seeded) with human
accuracy 0.85 and judge accuracy 0.90 around a hidden truth. Prints each phase's time.

    .venv/bin/python bench/label_studio_walkthrough.py [--port 8096] [--ls-venv /tmp/ls-venv-fresh]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer, migrate

ADMIN = "ak_walkthrough_admin"
TOKEN = "annoplan-walkthrough-token-0123456789"
CONFIG = (
    '<View><Text name="text" value="$text"/><Choices name="sentiment" toName="text" choice="single">'
    '<Choice value="ok"/><Choice value="toxic"/></Choices></View>'
)
LABELS = ["ok", "toxic"]


def ok(r: httpx.Response) -> Any:
    if r.status_code >= 300:
        raise RuntimeError(f"{r.request.method} {r.request.url}: {r.status_code} {r.text[:400]}")
    return r.json() if r.content else None


def noisy(truth: str, accuracy: float, rng: random.Random) -> str:
    return truth if rng.random() < accuracy else LABELS[1 - LABELS.index(truth)]


def run(port: int, ls_venv: Path) -> None:
    rng = random.Random(36)
    marks: list[tuple[str, float]] = []
    t0 = time.monotonic()

    def mark(what: str) -> None:
        marks.append((what, time.monotonic() - t0))
        print(f"{time.monotonic() - t0:7.1f} s  {what}", flush=True)

    data_dir = ROOT / ".label-studio"  # make label-studio's data directory: a fresh one, never someone's data
    if data_dir.exists() or ls_venv.exists():
        raise SystemExit(f"{data_dir} or {ls_venv} exists: the timing starts from nothing (move them away first)")
    make = subprocess.Popen(
        ["make", "label-studio", f"LS_VENV={ls_venv}", f"LS_PORT={port}", f"LABEL_STUDIO_TOKEN={TOKEN}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    ls_url = f"http://127.0.0.1:{port}"
    installed = False
    try:
        while True:
            if not installed and (ls_venv / "bin" / "label-studio").exists():
                installed = True
                mark("make label-studio: pip install done")
            try:
                if httpx.get(f"{ls_url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if make.poll() is not None:
                raise RuntimeError(f"make label-studio exited with {make.returncode}")
            time.sleep(1)
        mark("Label Studio answering")
        walk(ls_url, TOKEN, rng, mark)
    finally:
        os.killpg(make.pid, 15)
        make.wait(30)
    print(json.dumps({what: round(at, 1) for what, at in marks}))


def walk(ls_url: str, token: str, rng: random.Random, mark: Any) -> None:
    ls = httpx.Client(base_url=ls_url, headers={"Authorization": f"Token {token}"}, timeout=60)
    with tempfile.TemporaryDirectory() as tmp:
        database_url = f"sqlite:///{tmp}/walkthrough.db"
        migrate(database_url)
        with LiveServer(database_url, ADMIN, outbound_allow_private=1) as server, server.client() as api:
            mark("annoplan serving")
            pid = ok(api.post("/projects", json={"name": "toxicity", "labels": LABELS, "scale": "nominal"}))["id"]
            truth = {f"q{i}": "toxic" if rng.random() < 0.3 else "ok" for i in range(1, 405)}
            ok(api.post(f"/projects/{pid}/items", json=[{"external_id": q, "text": f"text {q}"} for q in truth]))
            for ext, kind in [("gpt-judge", "judge"), ("ann-1", "primary"), ("ann-2", "human")]:
                ok(api.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}))
            rows = [{"item": q, "rater": "gpt-judge", "value": noisy(t, 0.90, rng)} for q, t in truth.items()]
            rows += [{"item": q, "rater": "ann-1", "value": noisy(t, 0.85, rng)} for q, t in truth.items()]
            ok(api.post(f"/projects/{pid}/labels", json=rows))
            plan = ok(
                api.post(
                    f"/projects/{pid}/plan", json={"purpose": "certify", "source": "prior", "p_h": 0.85, "p_j": 0.90}
                )
            )
            pm = ok(api.post(f"/projects/{pid}/keys", json={"role": "pm"}))["key"]
            mark(f"project, 404 items, judge and primary labels, plan (m {plan['m']})")

            lsp = ok(ls.post("/api/projects", json={"title": "toxicity", "label_config": CONFIG}))["id"]
            env = {**os.environ, "ANNOPLAN_KEY": pm, "LABEL_STUDIO_TOKEN": token}
            cmd = [str(ROOT / ".venv" / "bin" / "annoplan"), "connect", "label-studio", "--url", server.base_url]
            cmd += ["--project", pid, "--ls-project", str(lsp), "--ls-url", ls_url]
            cmd += ["--webhook-url", server.base_url, "--annotator", "1=ann-2"]
            subprocess.run(cmd, env=env, check=True, capture_output=True)
            mark("Label Studio project and annoplan connect label-studio")

            posted, decision = 0, None
            while True:
                r = api.post(f"/projects/{pid}/batches", json={"rater": "ann-2", "size": 20})
                if r.status_code >= 300:
                    break  # the planned list is done
                batch = r.json()
                if not batch["items"]:
                    break
                ok(
                    ls.post(
                        f"/api/projects/{lsp}/import",
                        json=ok(api.get(f"/projects/{pid}/batches/{batch['id']}/label-studio")),
                    )
                )
                tasks = ok(ls.get("/api/tasks", params={"project": lsp, "page_size": 1000}))["tasks"]
                for task in tasks:
                    if task["total_annotations"] or task["data"]["annoplan_item"] not in batch["items"]:
                        continue
                    choice = noisy(truth[task["data"]["annoplan_item"]], 0.85, rng)
                    result = [
                        {"from_name": "sentiment", "to_name": "text", "type": "choices", "value": {"choices": [choice]}}
                    ]
                    ok(ls.post(f"/api/tasks/{task['id']}/annotations", json={"result": result}))
                    posted += 1
                deadline = time.monotonic() + 30
                while ok(api.get(f"/projects/{pid}/batches/{batch['id']}"))["labeled"] < len(batch["items"]):
                    if time.monotonic() > deadline:
                        raise RuntimeError("webhooks did not deliver the batch's labels within 30 s")
                    time.sleep(0.2)
                doc = ok(api.get(f"/projects/{pid}/reliability"))
                decision = doc["judges"][0]["decision"]
                if decision not in ("continue", "insufficient_data"):
                    break
            mark(f"{posted} annotations through Label Studio; the dashboard's first decision: {decision}")
            if api.get(f"/projects/{pid}/dashboard").status_code != 200:
                raise RuntimeError("the dashboard page did not answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8096)
    parser.add_argument("--ls-venv", type=Path, default=Path(tempfile.gettempdir()) / "annoplan-walkthrough-ls")
    parser.add_argument("--ls-url", help="a running Label Studio (with --ls-token): time only the walk")
    parser.add_argument("--ls-token", default=TOKEN, help="its legacy API token")
    args = parser.parse_args()
    if args.ls_url:
        t0 = time.monotonic()
        walk(
            args.ls_url,
            args.ls_token,
            random.Random(36),
            lambda what: print(f"{time.monotonic() - t0:7.1f} s  {what}", flush=True),
        )
    else:
        run(args.port, args.ls_venv)


if __name__ == "__main__":
    main()
