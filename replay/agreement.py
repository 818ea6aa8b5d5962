"""Whether two replays of one trace under one policy decided the same: what a replay over
HTTP must reproduce of the same replay in process (``cpsched http-check``, the end-to-end
tests).

What a replay *decides* is compared: every job's start, end, prediction and kill (from
``jobs.parquet``) and every summary figure derived from them (waits, slowdowns,
utilisation, allocation efficiency, extensions...). What the *wall clock* decides is not:
the measured times (``dispatch_ms_*``, ``replay_wall_s``) and the counters of calls that
ran out of time, :data:`WALL_CLOCK_KEYS`. On a busy machine one call in thousands can pass
its deadline and be answered by the fallback, often with the same decision; those
counters then differ, and are reported as information, not as a difference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from cpsched.replay.metrics import TIMING_KEYS

WALL_CLOCK_KEYS = ("fallbacks", "fallback_reasons", "solver_status", "model_size")
"""Summary keys that count how calls ended rather than what they decided: a fallback
answer (with its reason and the solver status ``deadline``), and the model a call built
before its time ran out, depend on how fast the machine was at that moment."""
JOB_KEYS = ("start", "end", "predicted", "killed")
"""The columns of ``jobs.parquet`` that hold a job's fate, compared job by job."""


def is_wall_clock(key: str) -> bool:
    """Whether the summary key ``key`` is measured on, or decided by, the wall clock."""
    return key in WALL_CLOCK_KEYS or key.startswith(TIMING_KEYS)


@dataclass(frozen=True, slots=True)
class Agreement:
    """How two replays compare: ``differing`` must be empty for them to agree."""

    differing: list[str]
    """What the replays decided differently: summary keys, and ``jobs.<column>`` when some
    job's row differs (with the first such job)."""
    counters: dict[str, tuple[object, object]] = field(default_factory=dict)
    """Wall-clock keys whose values differ: (first replay's, second replay's)."""

    @property
    def identical(self) -> bool:
        return not self.differing

    def counters_note(self) -> str:
        """``"fallbacks 1 vs 0, ..."``, or ``""`` when every counter agrees."""
        return ", ".join(f"{key} {a} vs {b}" for key, (a, b) in self.counters.items())


def compare_summaries(a: Mapping[str, object], b: Mapping[str, object]) -> Agreement:
    """Compare two ``summary.json`` contents (their ``settings`` left out)."""
    keys = sorted((a.keys() | b.keys()) - {"settings"})
    differing = [k for k in keys if a.get(k) != b.get(k)]
    return Agreement(
        differing=[k for k in differing if not is_wall_clock(k)],
        counters={k: (a.get(k), b.get(k)) for k in differing if is_wall_clock(k)},
    )


def compare_replays(a: Path, b: Path) -> Agreement:
    """Compare two replays' output directories: summaries, and every job's row."""
    summaries = [json.loads((out / "summary.json").read_text()) for out in (a, b)]
    agreement = compare_summaries(*summaries)
    return Agreement(agreement.differing + _job_differences(a, b), agreement.counters)


def _job_differences(a: Path, b: Path) -> list[str]:
    """``"jobs.start (first: job 17, 1200 vs 1260)"`` for each column some job differs in."""
    columns = ["job_id", *JOB_KEYS]
    rows = [pq.read_table(out / "jobs.parquet", columns=columns).to_pydict() for out in (a, b)]
    if rows[0]["job_id"] != rows[1]["job_id"]:
        return ["jobs.job_id (not the same jobs)"]
    found = []
    for column in JOB_KEYS:
        pairs = zip(rows[0]["job_id"], rows[0][column], rows[1][column], strict=True)
        first = next(((job, x, y) for job, x, y in pairs if x != y), None)
        if first is not None:
            job, x, y = first
            found.append(f"jobs.{column} (first: job {job}, {x} vs {y})")
    return found
