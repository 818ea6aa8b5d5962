"""Job by job against a baseline replay of the same trace: what a site asks before it
trusts a new scheduler, beyond the means.

For each job (warm-up jobs left out): does it start earlier than under the baseline, at
the same time, or later, and later by more than an hour or a day; the p99 and the longest
wait; the mean wait by job size (total CPUs) and by length class (the trace's run time),
beside the baseline's. Both runs are read from their ``jobs.parquet``
(:mod:`cpsched.replay.outputs`), so runs made at different times compare as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cpsched.errors import InputError
from cpsched.replay.metrics import LENGTH_CLASSES, mean_or_none, rounded

SIZE_CLASSES: tuple[tuple[str, int, int | None], ...] = (
    ("1 cpu", 1, 1),
    ("2-16 cpus", 2, 16),
    ("17-128 cpus", 17, 128),
    ("> 128 cpus", 129, None),
)
"""(name, fewest CPUs, most CPUs or None) of the size classes, by a job's total CPUs."""

LATER_BY_S: dict[str, int] = {"later_1h": 3600, "later_1d": 86400}
"""The shares of jobs starting later than under the baseline by more than these."""


@dataclass(frozen=True, slots=True)
class Waits:
    """One run's jobs after the warm-up, sorted by job id."""

    job_id: np.ndarray
    wait: np.ndarray
    procs: np.ndarray
    length_class: np.ndarray

    @classmethod
    def read(cls, jobs_parquet: Path) -> Waits:
        """The jobs of a replay's ``jobs.parquet``, warm-up left out."""
        try:
            table = pq.read_table(
                jobs_parquet, columns=["job_id", "wait", "procs", "length_class", "warmup"]
            )
        except (OSError, KeyError, pa.ArrowException) as exc:
            raise InputError(f"{jobs_parquet}: not a replay's jobs table ({exc})") from None
        kept = ~table.column("warmup").to_numpy(zero_copy_only=False)
        ids = np.asarray(table.column("job_id").to_pylist(), dtype=object)[kept]
        order = np.argsort(ids.astype(str), kind="stable")
        return cls(
            job_id=ids[order],
            wait=table.column("wait").to_numpy()[kept][order],
            procs=table.column("procs").to_numpy()[kept][order],
            length_class=np.asarray(table.column("length_class").to_pylist(), dtype=object)[kept][
                order
            ],
        )


def job_by_job(run: Waits, baseline: Waits) -> dict[str, object]:
    """``run`` against ``baseline``, job by job; both must hold the same jobs."""
    if len(run.job_id) != len(baseline.job_id) or not np.array_equal(run.job_id, baseline.job_id):
        missing = len(set(baseline.job_id) ^ set(run.job_id))
        raise InputError(
            f"the runs did not replay the same jobs ({len(run.job_id)} against "
            f"{len(baseline.job_id)}, {missing} in only one): compare runs of one trace slice "
            "with one warm-up"
        )
    n = len(run.wait)
    later = run.wait - baseline.wait  # the same submit times: a later start is a longer wait

    def share(mask: np.ndarray) -> float | None:
        return rounded(mask.mean()) if n else None

    out: dict[str, object] = {
        "jobs": n,
        "earlier": share(later < 0),
        "same": share(later == 0),
        "later": share(later > 0),
        **{key: share(later > seconds) for key, seconds in LATER_BY_S.items()},
        "p99_wait_s": rounded(np.percentile(run.wait, 99)) if n else None,
        "max_wait_s": int(run.wait.max()) if n else None,
        "baseline_p99_wait_s": rounded(np.percentile(baseline.wait, 99)) if n else None,
        "baseline_max_wait_s": int(baseline.wait.max()) if n else None,
    }
    by_size: dict[str, object] = {}
    for name, low, high in SIZE_CLASSES:
        sel = (run.procs >= low) & (True if high is None else run.procs <= high)
        by_size[name] = _class(run.wait[sel], baseline.wait[sel])
    out["by_size"] = by_size
    out["by_length_class"] = {
        name: _class(run.wait[run.length_class == name], baseline.wait[run.length_class == name])
        for name in LENGTH_CLASSES
    }
    return out


def _class(wait: np.ndarray, baseline_wait: np.ndarray) -> dict[str, object]:
    return {
        "jobs": int(wait.size),
        "mean_wait_s": mean_or_none(wait),
        "baseline_mean_wait_s": mean_or_none(baseline_wait),
    }


def _pct(share: object) -> str:
    return "–" if not isinstance(share, float) else f"{share * 100:.1f}%"


def _seconds(value: object) -> str:
    return "–" if not isinstance(value, int | float) else f"{value:,.0f}"


def to_markdown(results: Mapping[str, Mapping[str, object]], baseline: str = "today") -> str:
    """The job-by-job tables of several runs against ``baseline``: the shares, then the
    mean wait by size and by length class (run / baseline)."""
    if not results:
        return ""
    lines = [
        f"Job by job against {baseline} (the same jobs, warm-up left out):",
        "",
        "| run | earlier | same | later | later > 1 h | later > 1 d | p99 wait s | "
        f"max wait s | {baseline} p99 / max s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in results.items():
        lines.append(
            f"| {label} | {_pct(r['earlier'])} | {_pct(r['same'])} | {_pct(r['later'])} | "
            f"{_pct(r['later_1h'])} | {_pct(r['later_1d'])} | {_seconds(r['p99_wait_s'])} | "
            f"{_seconds(r['max_wait_s'])} | {_seconds(r['baseline_p99_wait_s'])} / "
            f"{_seconds(r['baseline_max_wait_s'])} |"
        )
    for key, title in (("by_size", "job size"), ("by_length_class", "length class")):
        first = next(iter(results.values()))[key]
        assert isinstance(first, Mapping)
        names = list(first)
        lines += [
            "",
            f"Mean wait by {title}, s (run / {baseline}):",
            "",
            "| run | " + " | ".join(names) + " |",
            "|---|" + "---:|" * len(names),
        ]
        for label, r in results.items():
            classes = r[key]
            assert isinstance(classes, Mapping)
            cells = [
                f"{_seconds(c['mean_wait_s'])} / {_seconds(c['baseline_mean_wait_s'])}"
                for c in (classes[name] for name in names)
            ]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
