"""Restart time with a long history: seconds from starting ``cpsched serve`` to /readyz
answering 200, with --jobs finished jobs stored for --clusters clusters (each with its
start prediction and real run time, as the service records them), on SQLite and
PostgreSQL. (Before issue 20 the predictor was rebuilt from every stored job: 119 s at 1.9
million; before issue 42 every cluster was rebuilt before the first answer: 53 s with
1,000 clusters. They are now built in the background, or by their first call: the last
column says when the rebuild was done, counted from the start as /readyz is.)

With ``--starts 2`` the service is started twice on the same database: a learned
predictor fits on the first start and stores its model when the service stops; the
second start takes that model back instead of fitting (the log says "its stored model
loaded").

The history is written straight into the database (executemany on SQLite, COPY on
PostgreSQL) in the service's schema: --users users, run times that vary job to job.

    .venv/bin/python bench/service_restart.py [--jobs 2000000] [--users 2000]
        [--clusters 1] [--predictor last-two] [--backends sqlite,postgres] [--starts 1]
        [--upper 0.9]
"""

from __future__ import annotations

import argparse
import random
import re
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import psycopg
from service_common import TOKEN, peak_rss_mb, postgres_database
from sqlalchemy.engine import make_url

from cpsched.cli.local_service import LocalService, free_port, write_config
from cpsched.service.store import migrate
from cpsched.service.store.database import make_engine

BATCH = 50_000
JOB_COLUMNS = (
    "cluster_id", "job_id", "user_name", "group_name", "job_name", "partition", "submit_time",
    "start_time", "end_time", "time_limit", "units", "per_unit", "state",
)  # fmt: skip
PREDICTION_COLUMNS = ("cluster_id", "job_id", "kind", "predictor", "predicted", "made_at", "actual")


def history(
    jobs: int, users: int, clusters: int = 1, seed: int = 1
) -> Iterator[tuple[tuple, tuple]]:
    """(finished job row, start prediction row) for ``jobs`` jobs ending one by one, the
    clusters (ids 1 to ``clusters``) taking turns."""
    rng = random.Random(seed)
    for i in range(jobs):
        cluster = 1 + i % clusters
        run = rng.randrange(60, 86_400)
        start = 1_000_000 + 30 * i
        job = (
            cluster, f"j{i}", f"u{rng.randrange(users)}", "g", f"app{rng.randrange(50)}", "batch",
            start - rng.randrange(0, 3600), start, start + run, 86_400, rng.choice([1, 4, 32]),
            '{"cpu": 1}', "completed",
        )  # fmt: skip
        predicted = (cluster, f"j{i}", "start", "last-two", rng.randrange(60, 86_400), start, run)
        yield job, predicted


def fill_sqlite(path: str, jobs: int, users: int, clusters: int) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    db.executemany("INSERT INTO clusters (name) VALUES (?)", [(f"c{k}",) for k in range(clusters)])
    insert_job = (
        f"INSERT INTO finished_jobs ({', '.join(JOB_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(JOB_COLUMNS))})"
    )
    insert_prediction = (
        f"INSERT INTO predictions ({', '.join(PREDICTION_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(PREDICTION_COLUMNS))})"
    )
    rows = history(jobs, users, clusters)
    while batch := [row for _, row in zip(range(BATCH), rows, strict=False)]:
        db.executemany(insert_job, [job for job, _ in batch])
        db.executemany(insert_prediction, [prediction for _, prediction in batch])
        db.commit()
    db.execute("ANALYZE")
    db.commit()
    db.close()


def fill_postgres(url: str, jobs: int, users: int, clusters: int) -> None:
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain) as db:
        with db.cursor() as cur:
            cur.executemany(
                "INSERT INTO clusters (name) VALUES (%s)", [(f"c{k}",) for k in range(clusters)]
            )
            with cur.copy(f"COPY finished_jobs ({', '.join(JOB_COLUMNS)}) FROM STDIN") as copy:
                for job, _ in history(jobs, users, clusters):
                    copy.write_row(job)
            columns = ", ".join(PREDICTION_COLUMNS)
            with cur.copy(f"COPY predictions ({columns}) FROM STDIN") as copy:
                for _, prediction in history(jobs, users, clusters):
                    copy.write_row(prediction)
        db.execute("ANALYZE")


REBUILT = re.compile(
    r"predictor rebuilt from (\d+) finished jobs in ([\d.]+) s(, its stored model loaded)?"
)
REBUILD_WAIT_S = 120


def time_to_ready(
    work: Path, url: str, predictor: str, upper: float = 0.0
) -> tuple[float, float, str]:
    policy: dict[str, object] = {"predictor": predictor}
    if upper:
        policy["prediction_upper_quantile"] = upper
    config = write_config(work / "cpsched.toml", url, TOKEN, policy)
    # The log says how long the rebuild took: at INFO level, for this run.
    config.write_text('log_level = "INFO"\n' + config.read_text())
    service = LocalService(config, free_port(), work / "service.log")
    began = time.perf_counter()
    service.start(timeout=600)
    ready = time.perf_counter() - began
    assert service.process is not None
    # The clusters' predictors are rebuilt in the background after /readyz: wait for the
    # rebuild's log line (a cluster's first call would wait for it too).
    log_file = work / "service.log"
    log_file.write_text("")  # this start's lines only
    rebuilt: list[tuple[str, str, str]] = []
    while not rebuilt and time.perf_counter() - began < REBUILD_WAIT_S:
        time.sleep(0.05)
        rebuilt = REBUILT.findall(log_file.read_text())
    built = time.perf_counter() - began
    peak = peak_rss_mb(service.process.pid)
    service.stop()
    what = (
        f"rebuilt from {rebuilt[-1][0]} jobs in {rebuilt[-1][1]} s, done {built:.2f} s "
        f"after the start{rebuilt[-1][2]}"
        if rebuilt
        else f"not rebuilt within {REBUILD_WAIT_S} s"
    )
    return ready, peak, what


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2_000_000)
    parser.add_argument("--users", type=int, default=2_000)
    parser.add_argument("--clusters", type=int, default=1)
    parser.add_argument("--predictor", default="last-two")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--starts", type=int, default=1, help="starts on the same database")
    parser.add_argument(
        "--upper", type=float, default=0.0, help="prediction_upper_quantile (0: none)"
    )
    args = parser.parse_args()
    upper = f" with a {args.upper:g} upper estimate" if args.upper else ""
    print(
        f"{args.jobs:,} finished jobs of {args.users:,} users in {args.clusters:,} clusters; "
        f"predictor {args.predictor}{upper}"
    )
    print(f"{'backend':<9} {'fill s':>7} {'to /readyz s':>13} {'peak MB':>8}  predictor")
    for backend in args.backends.split(","):
        work = Path(tempfile.mkdtemp(prefix=f"cpsched-restart-{backend}-"))
        postgres = backend == "postgres"
        with postgres_database("cpsched_restart") if postgres else nullcontext() as pg:
            url = pg if pg is not None else f"sqlite:///{work / 'cpsched.db'}"
            migrate.upgrade(make_engine(url))
            began = time.perf_counter()
            if postgres:
                fill_postgres(url, args.jobs, args.users, args.clusters)
            else:
                fill_sqlite(str(work / "cpsched.db"), args.jobs, args.users, args.clusters)
            filled = time.perf_counter() - began
            for start in range(args.starts):
                ready, peak, what = time_to_ready(work, url, args.predictor, args.upper)
                fill = f"{filled:>7.0f}" if start == 0 else f"{'':>7}"
                print(f"{backend:<9} {fill} {ready:>13.2f} {peak:>8.0f}  {what}", flush=True)


if __name__ == "__main__":
    main()
