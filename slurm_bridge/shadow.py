"""Shadow mode's record and report: what cpsched would have done vs what Slurm did.

Each shadow cycle appends one JSON line: the cycle time, the jobs cpsched would start
now (with nodes), and what Slurm shows (jobs running with their start and nodes). The
report takes, per job, the first cycle in which cpsched would have started it and the
start Slurm really gave it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cpsched.slurm_bridge.model import ClusterState
from cpsched.wire.schemas import DecisionOut


def record(path: Path, state: ClusterState, decision: DecisionOut) -> None:
    entry = {
        "time": state.time,
        "would_start": {s.job_id: sorted(s.allocation) for s in decision.starts},
        # Of those, the trial runs (seconds): shown, never made, in shadow mode.
        "would_try": {s.job_id: s.trial_s for s in decision.starts if s.trial_s is not None},
        "planned": decision.planned or {},
        "pending": sorted(j.id for j in state.pending),
        "slurm_started": {
            j.id: {"start": j.start, "nodes": sorted(j.allocation)}
            for j in state.jobs
            if j.start is not None
        },
        "dispatcher": decision.diagnostics.dispatcher,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, separators=(",", ":")) + "\n")


@dataclass(frozen=True, slots=True)
class JobComparison:
    job_id: str
    cpsched_start: int | None  # first cycle cpsched would have started it
    cpsched_nodes: list[str]
    slurm_start: int | None
    slurm_nodes: list[str]

    @property
    def delta_s(self) -> int | None:
        if self.cpsched_start is None or self.slurm_start is None:
            return None
        return self.cpsched_start - self.slurm_start


def compare(path: Path) -> list[JobComparison]:
    first_cp: dict[str, tuple[int, list[str]]] = {}
    last_planned: dict[str, int] = {}
    slurm: dict[str, tuple[int, list[str]]] = {}
    seen: set[str] = set()
    first_time: int | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        first_time = entry["time"] if first_time is None else first_time
        seen.update(entry["pending"])
        for job_id, nodes in entry["would_start"].items():
            first_cp.setdefault(job_id, (entry["time"], nodes))
        # Slurm may start a job before cpsched would: then the last plan made while it
        # was still pending says when cpsched meant to start it.
        for job_id, planned in (entry.get("planned") or {}).items():
            if job_id in entry["pending"] and job_id not in first_cp:
                last_planned[job_id] = int(planned)
        for job_id, info in entry["slurm_started"].items():
            if info["start"] is not None and info["nodes"]:
                slurm.setdefault(job_id, (info["start"], info["nodes"]))
            elif info["start"] is not None:
                slurm.setdefault(job_id, (info["start"], []))
    # Jobs Slurm started between two cycles, never seen pending: Slurm-only starts.
    seen.update(j for j, (start, _) in slurm.items() if first_time and start >= first_time)
    for job_id, planned in last_planned.items():
        first_cp.setdefault(job_id, (planned, []))
    jobs = sorted(seen | set(first_cp), key=lambda j: (len(j), j))
    return [
        JobComparison(
            job_id=j,
            cpsched_start=first_cp.get(j, (None, []))[0],
            cpsched_nodes=first_cp.get(j, (None, []))[1],
            slurm_start=slurm.get(j, (None, []))[0],
            slurm_nodes=slurm.get(j, (None, []))[1],
        )
        for j in jobs
    ]


def summary(rows: list[JobComparison], *, tolerance_s: int) -> dict[str, float | int]:
    """Counts of jobs cpsched would have started earlier / later / about the same."""
    deltas = [r.delta_s for r in rows if r.delta_s is not None]
    return {
        "jobs": len(rows),
        "compared": len(deltas),
        "earlier": sum(1 for d in deltas if d < -tolerance_s),
        "later": sum(1 for d in deltas if d > tolerance_s),
        "same": sum(1 for d in deltas if abs(d) <= tolerance_s),
        "cpsched_only": sum(1 for r in rows if r.cpsched_start and r.slurm_start is None),
        "slurm_only": sum(1 for r in rows if r.slurm_start and r.cpsched_start is None),
        "mean_delta_s": round(sum(deltas) / len(deltas), 1) if deltas else 0.0,
        "same_nodes": sum(1 for r in rows if r.cpsched_nodes and r.cpsched_nodes == r.slurm_nodes),
    }
