"""The soak's steady workload in process: Python's own allocations against RSS.

``bench/soak_retention.py`` drives a real service and sees its RSS; this drives the app
in process (FastAPI's test client) with the same simulated cluster, and prints every
``--every`` calls the memory Python's allocator holds (``tracemalloc``), the RSS and
the number of objects the collector tracks. Python's figures flat while RSS rises say
the growth is not Python objects kept (a leak) but the allocator's or native memory.

    .venv/bin/python bench/soak_memory.py [--every 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import tracemalloc
from pathlib import Path

from fastapi.testclient import TestClient
from soak_retention import Cluster, cycle

from cpsched.service.app import create_app
from cpsched.service.settings import load_settings

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--every", type=int, default=400)
parser.add_argument("--rounds", type=int, default=5)
args = parser.parse_args()
work = Path(tempfile.mkdtemp())
settings = load_settings(
    None,
    database_url=f"sqlite:///{work / 'db'}",
    upgrade_on_start=True,
    tokens=[{"name": "b", "secret": "s" * 32}],
    defaults={"deadline": 2.0},
    retention={"audit_days": 1, "predictions_days": 1, "finished_days": 1, "interval_s": 5},
)
H = {"Authorization": "Bearer " + "s" * 32}
cluster = Cluster(200)
cluster.arrive(300)


def rss() -> float:
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024


with TestClient(create_app(settings), headers=H) as http:
    tracemalloc.start(1)
    for k in range(args.rounds):
        for _ in range(args.every):
            cycle(http, cluster, 120, 300)
        gc.collect()
        traced, _ = tracemalloc.get_traced_memory()
        print(
            f"calls {(k + 1) * args.every}: traced {traced / 2**20:.1f} MB, rss {rss():.0f} MB, "
            f"objects {len(gc.get_objects())}, running {len(cluster.running)}",
            flush=True,
        )
