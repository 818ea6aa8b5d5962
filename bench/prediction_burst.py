"""A burst of new queued jobs with a learned predictor: the round trip of each call and
how many jobs it left unpredicted (planned with their requests), until every job is
predicted.

A service of its own (SQLite) learns --history finished jobs of 200 users, waits until
its predictor answers from a fitted model (the job page's prediction basis says so),
then gets a full machine (one running job on every core, so that nothing starts and the
queue stays) and --burst new queued jobs at once; the same queue is posted again every
10 s of cluster time until no job is left unpredicted. A learned predictor takes about
0.1 ms a job: before the service capped the time spent predicting (``PREDICTION_SHARE``
of the deadline), the first call predicted the whole burst, whatever the deadline.

    .venv/bin/python bench/prediction_burst.py [--predictor quantile-boost]
        [--burst 1000,10000] [--deadline 0.2] [--history 5000]
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import time
from pathlib import Path

import httpx
from service_common import HEADERS, TOKEN

from cpsched.cli.local_service import local_service

NOW = 10_000_000
NODES = 100
CORES = 64
UNPREDICTED = re.compile(r"(\d+) new queued jobs planned with their requests")
MODEL_WAIT_S = 300


def job(k: int, rng: random.Random, submit: int) -> dict[str, object]:
    return {
        "id": f"j{k}", "user": f"u{rng.randrange(200)}", "submit": submit,
        "time_limit": rng.choice([600, 3600, 4 * 3600, 86_400]), "units": rng.choice([1, 4, 16]),
        "per_unit": {"cpu": 1}, "name": f"app{rng.randrange(50)}",
    }  # fmt: skip


def learn(client: httpx.Client, history: int, rng: random.Random) -> None:
    """``history`` finished jobs, ending one every 30 s before NOW, in batches."""
    jobs = []
    for k in range(history):
        end = NOW - 30 * (history - k)
        done = {**job(k, rng, end - 90_000), "state": "completed"}
        done["start"] = end - rng.randrange(60, int(done["time_limit"]))  # type: ignore[call-overload]
        jobs.append({**done, "end": end})
    for at in range(0, history, 1000):
        batch = {"jobs": jobs[at : at + 1000]}
        client.post("/v1/clusters/burst/jobs/finished", json=batch, headers=HEADERS)


def wait_for_model(client: httpx.Client, predictor: str) -> float:
    """Seconds until a probe job's prediction rests on a fitted model (dry runs; at once
    for a predictor that fits none)."""
    began = time.perf_counter()
    for k in range(MODEL_WAIT_S * 2):
        probe = {**job(k, random.Random(k), NOW), "id": f"probe{k}"}
        body = {"time": NOW, "nodes": machine(), "running": [], "queued": [probe]}
        answer = client.post(
            "/v1/clusters/burst/dispatch", json={**body, "dry_run": True}, headers=HEADERS
        )
        answer.raise_for_status()
        info = client.get(f"/v1/clusters/burst/jobs/probe{k}", headers=HEADERS).json()
        basis = str(info.get("prediction_basis"))
        if basis.startswith(f"a {predictor} model") or "first fit" not in basis:
            return time.perf_counter() - began  # fitted, or a predictor without a model
        time.sleep(0.5)
    raise SystemExit(f"no fitted {predictor} model after {MODEL_WAIT_S} s")


def machine() -> list[dict[str, object]]:
    return [{"name": f"n{i:03d}", "resources": {"cpu": CORES}} for i in range(NODES)]


def full() -> list[dict[str, object]]:
    """One running job on every core until long after the burst."""
    allocation = {f"n{i:03d}": CORES for i in range(NODES)}
    return [
        {
            "id": "everything", "user": "u0", "submit": NOW - 100, "start": NOW - 100,
            "time_limit": 10 * 86_400, "units": NODES * CORES, "per_unit": {"cpu": 1},
            "allocation": allocation,
        }
    ]  # fmt: skip


def burst(client: httpx.Client, size: int, first: int, rng: random.Random) -> None:
    queue = [job(first + k, rng, NOW + k % 60) for k in range(size)]
    for call in range(100):
        body = {
            "time": NOW + 60 + 10 * call,
            "nodes": machine(),
            "running": full(),
            "queued": queue,
        }
        began = time.perf_counter()
        answer = client.post("/v1/clusters/burst/dispatch", json=body, headers=HEADERS)
        elapsed = time.perf_counter() - began
        answer.raise_for_status()
        notes = answer.json()["diagnostics"]["notes"]
        said = [int(m.group(1)) for note in notes if (m := UNPREDICTED.match(note))]
        left = said[0] if said else 0
        print(f"{size:>7,} {call + 1:>5} {elapsed:>9.3f} {left:>12,}", flush=True)
        if not left:
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--predictor", default="quantile-boost")
    parser.add_argument("--burst", default="1000,10000")
    parser.add_argument("--deadline", type=float, default=0.2)
    parser.add_argument("--history", type=int, default=5000)
    args = parser.parse_args()
    rng = random.Random(1)
    work = Path(tempfile.mkdtemp(prefix="cpsched-burst-"))
    defaults = {"predictor": args.predictor, "deadline": args.deadline}
    with (
        local_service(work, token=TOKEN, **defaults) as service,
        httpx.Client(base_url=service.url, timeout=600) as client,
    ):
        learn(client, args.history, rng)
        waited = wait_for_model(client, args.predictor)
        print(f"{args.predictor}: ready {waited:.1f} s after learning {args.history:,} jobs")
        print(f"{'burst':>7} {'call':>5} {'round s':>9} {'unpredicted':>12}")
        first = args.history
        for size in (int(s) for s in args.burst.split(",")):
            burst(client, size, first, rng)
            first += size


if __name__ == "__main__":
    main()
