"""Hostile traffic: does an authorised dispatch keep its pace while clients without a
token post 60 MB bodies in a loop? (Before issue 20 the whole body was read and parsed
before the token was checked: three such clients pushed a dispatch's p50 from 6 ms to
238 ms and the service to 1.6 GB.)

A service on SQLite (--postgres: on a PostgreSQL database of its own at 127.0.0.1:5432;
127.0.0.1 only) is measured idle, then while --attackers clients
each send --body-mb MB bodies without a token (a declared Content-Length; --chunked: no
length) to /v1/clusters/x/dispatch for --seconds, over raw sockets: the authorised
client's dispatch round trips (p50, p99), /healthz's (max, p99), the attack's requests
and bytes, the service's peak memory.

    .venv/bin/python bench/service_hostile.py [--attackers 3] [--body-mb 60]
        [--seconds 20] [--dispatcher easy] [--chunked] [--postgres] [--http h11,httptools]
        [--control] [--pin]

--http runs the whole measurement once per HTTP parser of ``cpsched serve``, one after
the other, so that they can be compared side by side. --control sends the attack to a
sink process instead of the service (what the attack's load on the machine costs by
itself); --pin puts the service and the measuring client on CPU 0 and the attackers on
CPU 1, as if they were another host. Each attacker is a process of its own.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import httpx
from service_common import HEADERS, TOKEN, peak_rss_mb, percentile, postgres_database

from cpsched.cli.local_service import local_service


def snapshot(call: int) -> bytes:
    nodes = [{"name": f"n{i}", "resources": {"cpu": 32, "mem": 128_000}} for i in range(100)]
    running = [
        {
            "id": f"r{j}", "user": f"u{j % 20}", "submit": 0, "start": 100, "time_limit": 86_400,
            "units": 32, "per_unit": {"cpu": 1}, "allocation": {f"n{j}": 32},
        }
        for j in range(80)
    ]  # fmt: skip
    queued = [
        {
            "id": f"q{call}-{k}", "user": f"u{k % 20}", "submit": 1000 + k,
            "time_limit": 3600, "units": 1 + k % 64, "per_unit": {"cpu": 1},
        }
        for k in range(200)
    ]  # fmt: skip
    return json.dumps(
        {"time": 10_000 + call, "nodes": nodes, "running": running, "queued": queued}
    ).encode()


def measure(url: str, seconds: float) -> dict[str, list[float]]:
    """Dispatch round trips and /healthz round trips, alternating, for ``seconds``."""
    dispatch: list[float] = []
    health: list[float] = []
    until = time.perf_counter() + seconds
    call = 0
    with httpx.Client(base_url=url, timeout=60) as client:
        while time.perf_counter() < until:
            body = snapshot(call)
            began = time.perf_counter()
            answer = client.post("/v1/clusters/ok/dispatch", content=body, headers=HEADERS)
            dispatch.append(time.perf_counter() - began)
            answer.raise_for_status()
            began = time.perf_counter()
            client.get("/healthz").raise_for_status()
            health.append(time.perf_counter() - began)
            call += 1
            time.sleep(0.02)
    return {"dispatch": dispatch, "health": health}


def attack(
    port: int, body_mb: int, chunked: bool, stop: EventType, tallies: Queue, cpus: set[int]
) -> None:
    """Post unauthenticated bodies of ``body_mb`` MB in a loop until ``stop``, on ``cpus``
    (empty: any); put the tally (requests, bytes, statuses) on ``tallies`` at the end.

    Each attacker is a process of its own: as threads of the measuring process they would
    also slow the measuring client (the GIL), which is not the service's doing."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    tally: dict = {"requests": 0, "bytes": 0, "status": {}}
    size = body_mb * 1_000_000
    payload = b"[" + b"1," * (size // 2 - 1) + b"1]"
    while not stop.is_set():
        length = b"Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}".encode()
        head = b"POST /v1/clusters/x/dispatch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        head += b"Content-Type: application/json\r\n" + length + b"\r\n\r\n"
        sent = 0
        status = b"?"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(head)
                view = memoryview(payload)
                step = 1 << 20
                for at in range(0, len(view), step):
                    chunk = view[at : at + step]
                    if chunked:
                        sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    else:
                        sock.sendall(chunk)
                    sent += len(chunk)
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
                status = sock.recv(64).split(b" ")[1:2][0]
        except OSError:
            status = b"reset"
        tally["requests"] += 1
        tally["bytes"] += sent
        tally["status"][status] = tally["status"].get(status, 0) + 1
    tallies.put(tally)


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process ``pid`` on ``cpus`` (``taskset -a -p``)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cpus)


SINK = """
import socket, threading
def serve(conn):
    with conn:
        buf = bytearray(1 << 20)
        tail = b""
        while True:
            n = conn.recv_into(buf)
            if not n:
                return
            tail = (tail + bytes(buf[max(0, n - 8):n]))[-8:]
            if tail.endswith(b"1]") or tail.endswith(b"0\\r\\n\\r\\n"):
                conn.sendall(b"HTTP/1.1 401 Unauthorized\\r\\ncontent-length: 0\\r\\n\\r\\n")
                tail = b""
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
"""The control's sink: reads each attack body to its end and answers 401, nothing else."""


def summary(label: str, m: dict[str, list[float]]) -> str:
    d, h = m["dispatch"], m["health"]
    return (
        f"{label:<8} dispatch p50 {percentile(d, 0.5) * 1000:6.1f} ms  p99 "
        f"{percentile(d, 0.99) * 1000:6.1f} ms ({len(d)} calls)   /healthz p99 "
        f"{percentile(h, 0.99) * 1000:5.1f} ms  max {max(h) * 1000:5.1f} ms"
    )


def run(args: argparse.Namespace, http: str) -> None:
    """Idle, then hostile, on a fresh service using the ``http`` parser; prints the figures."""
    work = Path(tempfile.mkdtemp(prefix="cpsched-hostile-"))
    with (
        postgres_database() if args.postgres else nullcontext() as url,
        local_service(
            work,
            database_url=url,
            token=TOKEN,
            serve_args=("--http", http),
            dispatcher=args.dispatcher,
        ) as service,
    ):
        assert service.process is not None
        # --pin: the service and the measuring client on CPU 0, the attack on CPU 1, as if
        # the attackers were another host (on two cores they otherwise share the service's).
        service_cpus, attack_cpus = ({0}, {1}) if args.pin else (set(), set())
        if service_cpus:
            pin(service.process.pid, service_cpus)
            pin(os.getpid(), service_cpus)
        measure(service.url, 2)  # warm-up
        idle = measure(service.url, args.seconds)
        stop = multiprocessing.Event()
        tallies: Queue = multiprocessing.Queue()
        sink = None
        target = service.port
        if args.control:  # the same attack at another process: the machine's load alone
            sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE)
            assert sink.stdout is not None
            target = int(sink.stdout.readline())
            if attack_cpus:
                pin(sink.pid, attack_cpus)
        attackers = [
            multiprocessing.Process(
                target=attack,
                args=(target, args.body_mb, args.chunked, stop, tallies, attack_cpus),
            )
            for _ in range(args.attackers)
        ]
        for process in attackers:
            process.start()
        time.sleep(1)
        hostile = measure(service.url, args.seconds)
        stop.set()
        tally: dict = {"requests": 0, "bytes": 0, "status": {}}
        for _ in attackers:
            one = tallies.get(timeout=120)
            tally["requests"] += one["requests"]
            tally["bytes"] += one["bytes"]
            for status, n in one["status"].items():
                tally["status"][status] = tally["status"].get(status, 0) + n
        for process in attackers:
            process.join()
        if sink is not None:
            sink.kill()
        peak = peak_rss_mb(service.process.pid)
    print(
        f"{args.attackers} clients without a token, {args.body_mb} MB bodies "
        f"({'chunked' if args.chunked else 'Content-Length'}), {args.seconds:.0f} s each phase;"
        f" dispatcher {args.dispatcher}; {'PostgreSQL' if args.postgres else 'SQLite'};"
        f" HTTP parser {http}"
        + ("; CONTROL: the attack goes to a sink" if args.control else "")
        + ("; pinned: service and client on CPU 0, attack on CPU 1" if args.pin else "")
    )
    print(summary("idle", idle))
    print(summary("hostile", hostile))
    ratio = percentile(hostile["dispatch"], 0.99) / percentile(idle["dispatch"], 0.99)
    statuses = ", ".join(f"{k.decode()}: {v}" for k, v in sorted(tally["status"].items()))
    print(
        f"dispatch p99 hostile/idle x{ratio:.2f}; attack: {tally['requests']} requests "
        f"({statuses}), {tally['bytes'] / 1e9:.1f} GB sent; service peak memory {peak:.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attackers", type=int, default=3)
    parser.add_argument("--body-mb", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--dispatcher", default="easy")
    parser.add_argument("--chunked", action="store_true")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL, not SQLite.")
    parser.add_argument(
        "--http", default="httptools", help="comma-separated HTTP parsers, run one after another"
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="send the attack to a sink process instead: what the machine's load alone costs",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the service and the measuring client on CPU 0, the attackers on CPU 1",
    )
    args = parser.parse_args()
    for http in args.http.split(","):
        run(args, http)


if __name__ == "__main__":
    main()
