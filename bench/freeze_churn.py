"""Does a large machine sent whole at every call make the service grow? Its RSS, call
after call.

The service freezes a new translation of a machine of at least ``LARGE_MACHINE`` nodes
out of the collector's scans (:func:`cpsched.runtime.gc_pause.freeze_after_calls`);
whatever garbage lives in cycles at that moment stays for good. This posts idle snapshots
of ``--nodes`` nodes, whole (as a bridge without deltas does), with a queue of new jobs
each time, to a service of its own (SQLite), and prints the service's RSS every
``--every`` calls and how many answers the fallback gave. ``--rename``: the node names
alternate between two sets, so that every call brings a machine that really changed.

    .venv/bin/python bench/freeze_churn.py [--nodes 5000] [--queued 200] [--every 50]
        [--rounds 4] [--rename]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

import httpx
from service_common import HEADERS, TOKEN, rss_mb
from service_scale import NOW, machine, startable_job

from cpsched.cli.local_service import local_service
from cpsched.service.orchestrator import LARGE_MACHINE

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--nodes", type=int, default=LARGE_MACHINE)
parser.add_argument("--queued", type=int, default=200)
parser.add_argument("--every", type=int, default=50)
parser.add_argument("--rounds", type=int, default=4)
parser.add_argument("--dispatcher", default="easy")
parser.add_argument("--rename", action="store_true", help="a changed machine at every call")
args = parser.parse_args()

rng = random.Random(1)
sets = []
for prefix in ("a", "b"):
    nodes = machine(args.nodes)
    for node in nodes:
        node["name"] = f"{prefix}{node['name']}"
    sets.append(nodes)


work = Path(tempfile.mkdtemp(prefix="cpsched-churn-"))
print(
    f"{args.nodes} nodes sent whole, {'renamed' if args.rename else 'the same'} at every "
    f"call, {args.queued} new jobs queued each call, {args.dispatcher}"
)
print("calls  service RSS MB  fallback answers")
with (
    local_service(work, token=TOKEN, dispatcher=args.dispatcher, deadline=0.2) as service,
    httpx.Client(base_url=service.url, timeout=600, headers=HEADERS) as client,
):
    assert service.process is not None
    call = fallbacks = 0
    for _ in range(args.rounds):
        for _ in range(args.every):
            queue = [startable_job(call * args.queued + k, rng) for k in range(args.queued)]
            nodes = sets[call % 2 if args.rename else 0]
            body = {"time": NOW + 10 * call, "nodes": nodes, "running": [], "queued": queue}
            response = client.post("/v1/clusters/churn/dispatch", content=json.dumps(body))
            if response.status_code != 200:
                raise SystemExit(f"{response.status_code}: {response.text[:500]}")
            fallbacks += response.json()["diagnostics"]["fallback"]
            call += 1
        print(f"{call:5d}  {rss_mb(service.process.pid):14.0f}  {fallbacks:16d}", flush=True)
