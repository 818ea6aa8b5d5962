"""The soak's steady workload in process: where RSS goes, Python's or the C allocator's.

``bench/soak_retention.py`` drives a real service and sees its RSS; this drives the app
in process (FastAPI's test client) with the same simulated cluster, and prints every
``--every`` calls the RSS, the memory Python's allocator holds (``tracemalloc``), the
number of objects the collector tracks and, from glibc's ``mallinfo2``, what the C heaps
hold in use and free. Python's figures flat while RSS rises say the growth is not Python
objects kept (a leak); the C heaps' free part rising while their in-use part stays flat
says it is the allocator's fragmentation (:mod:`cpsched.service.malloc`).

    .venv/bin/python bench/soak_memory.py [--every 400] [--rounds 5] [--mmap-threshold-kib 128]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import tempfile
import tracemalloc
from pathlib import Path

from fastapi.testclient import TestClient
from soak_retention import Cluster, cycle

from cpsched.service.app import create_app
from cpsched.service.malloc import fix_mmap_threshold
from cpsched.service.settings import load_settings


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--every", type=int, default=400)
parser.add_argument("--rounds", type=int, default=5)
parser.add_argument(
    "--mmap-threshold-kib", type=int, default=128, help="as the service sets it (0: glibc's)"
)
parser.add_argument("--tracemalloc", action="store_true", help="also Python's allocations")
parser.add_argument("--deadline", type=float, default=0.2, help="the policy's (as the service's)")
parser.add_argument("--dispatcher", default="hcp3", help="the policy's (default: the default's)")
args = parser.parse_args()
fix_mmap_threshold(args.mmap_threshold_kib)
work = Path(tempfile.mkdtemp())
settings = load_settings(
    None,
    database_url=f"sqlite:///{work / 'db'}",
    upgrade_on_start=True,
    tokens=[{"name": "b", "secret": "s" * 32}],
    defaults={"deadline": args.deadline, "dispatcher": args.dispatcher},
    retention={"audit_days": 1, "predictions_days": 1, "finished_days": 1, "interval_s": 5},
)
H = {"Authorization": "Bearer " + "s" * 32}
cluster = Cluster(200)
cluster.arrive(300)


def rss() -> float:
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024


print(f"mmap threshold {args.mmap_threshold_kib} KiB (0: glibc's moving one)")
print("calls  RSS MB  C heaps in use MB  C heaps free MB  Python MB  objects  running")
with TestClient(create_app(settings), headers=H) as http:
    if args.tracemalloc:
        tracemalloc.start(1)
    for k in range(args.rounds):
        for _ in range(args.every):
            cycle(http, cluster, 120, 300)
        gc.collect()
        heaps = libc.mallinfo2()
        traced = tracemalloc.get_traced_memory()[0] / 2**20 if args.tracemalloc else float("nan")
        print(
            f"{(k + 1) * args.every:5d}  {rss():6.0f}  {heaps.uordblks / 2**20:17.1f}  "
            f"{heaps.fordblks / 2**20:15.1f}  {traced:9.1f}  {len(gc.get_objects()):7d}  "
            f"{len(cluster.running):7d}",
            flush=True,
        )
