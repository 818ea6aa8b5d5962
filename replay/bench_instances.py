"""Re-solve dumped dispatch instances and summarise latency, model size, statuses, quality.

The dispatchers named are called side by side on each instance (one after the other,
same process), so their ratios hold even when the machine is shared and absolute times
drift. Latency is the wall time of one ``decide`` call, measured here, outside the
dispatch core. The objective figures come from the CP dispatchers' own notes (the
model's ``Σ w_i (s_i − t)``): the search's objective against that of the
"heuristic-seeded" plan (the fallback's starts now, then priority order), which is
the heuristic's decision expressed in the same model.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cpsched.core.dispatcher import Dispatcher
from cpsched.core.problem import Decision
from cpsched.core.registry import is_cp
from cpsched.replay.instances import Instance, open_instances
from cpsched.runtime.gc_pause import decide_paused

_SEARCH = re.compile(r"^search: \d+ run\(s\), objective (-?\d+|None)")
_HEURISTIC = re.compile(r"heuristic-seeded (-?\d+)")
_PRIORITY = re.compile(r"priority greedy (-?\d+)")
_PHASE = re.compile(r"(\w+) (\d+(?:\.\d+)?)")


@dataclass(frozen=True, slots=True)
class CallRecord:
    file: str
    index: int
    dispatcher: str
    queued: int
    running: int
    wall_ms: float
    cpu_ms: float
    """CPU time of this process during the call: on a shared machine, where the wall
    time also counts waiting for a core, what the call would take on an idle one."""
    status: str
    fallback: bool
    reason: str | None
    """Why the fallback answered, from the decision's notes."""
    variables: int
    constraints: int
    intervals: int
    objective: int | None
    """The model objective of the decision returned (the hint's when falling back)."""
    heuristic_objective: int | None
    started: int
    phases_ms: dict[str, float]
    """Time per phase of the call, from the dispatcher's notes (CP dispatchers)."""


def objectives(decision: Decision) -> tuple[int | None, int | None]:
    """(objective of the decision returned, objective of the heuristic-seeded plan).

    A node-level dispatcher offers no heuristic-seeded plan when the heuristic starts
    nothing; the priority-order plan is then the same thing."""
    found: int | None = None
    heuristic: int | None = None
    for note in decision.diagnostics.notes:
        if note.startswith("hint: "):
            m = _HEURISTIC.search(note) or _PRIORITY.search(note)
            heuristic = int(m.group(1)) if m is not None else None
        elif (m := _SEARCH.match(note)) is not None and m.group(1) != "None":
            found = int(m.group(1))
    if decision.diagnostics.fallback:
        found = heuristic  # the fallback's own decision was returned
    return found, heuristic


def phases(decision: Decision) -> dict[str, float]:
    for note in decision.diagnostics.notes:
        if note.startswith("phases ms: "):
            return {
                name: float(ms) for name, ms in _PHASE.findall(note.removeprefix("phases ms: "))
            }
    return {}


def fallback_reason(decision: Decision) -> str | None:
    d = decision.diagnostics
    return (d.fallback_reason or "unknown") if d.fallback else None


def selected(
    instances: Iterable[Instance],
    *,
    every: int,
    limit: int | None,
    max_queued: int | None,
    min_queued: int = 0,
) -> Iterable[Instance]:
    """Every ``every``-th instance with ``min_queued`` to ``max_queued`` queued jobs,
    ``limit`` at most."""
    taken = 0
    for instance in instances:
        if instance.index % every:
            continue
        queued = len(instance.snapshot.queued)
        if queued < min_queued or (max_queued is not None and queued > max_queued):
            continue
        if limit is not None and taken >= limit:
            return
        taken += 1
        yield instance


def bench(
    files: Sequence[Path],
    dispatchers: Mapping[str, Dispatcher],
    *,
    every: int = 1,
    limit: int | None = None,
    max_queued: int | None = None,
    min_queued: int = 0,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
    progress: Callable[[int], None] | None = None,
) -> list[CallRecord]:
    """Call every dispatcher on every selected instance of ``files``."""
    records: list[CallRecord] = []
    calls = 0
    for path in files:
        source = open_instances(path)
        kept = source.instances(keep=lambda index: index % every == 0)
        chosen = selected(
            kept, every=every, limit=limit, max_queued=max_queued, min_queued=min_queued
        )
        for instance in chosen:
            snap = instance.snapshot
            for name, dispatcher in dispatchers.items():
                began, cpu_began = clock(), cpu_clock()
                decision = decide_paused(dispatcher, snap, instance.durations)
                wall_ms = (clock() - began) * 1000.0
                cpu_ms = (cpu_clock() - cpu_began) * 1000.0
                d = decision.diagnostics
                found, heuristic = objectives(decision)
                records.append(
                    CallRecord(
                        file=path.name,
                        index=instance.index,
                        dispatcher=name,
                        queued=len(snap.queued),
                        running=len(snap.running),
                        wall_ms=wall_ms,
                        cpu_ms=cpu_ms,
                        status=d.solver_status,
                        fallback=d.fallback,
                        reason=fallback_reason(decision),
                        variables=d.model_variables,
                        constraints=d.model_constraints,
                        intervals=d.model_intervals,
                        objective=found,
                        heuristic_objective=heuristic,
                        started=len(decision.starts),
                        phases_ms=phases(decision),
                    )
                )
            calls += 1
            if progress is not None:
                progress(calls)
    return records


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0, "mean": 0.0}
    a = np.asarray(values, dtype=float)
    return {
        "p50": round(float(np.percentile(a, 50)), 2),
        "p99": round(float(np.percentile(a, 99)), 2),
        "max": round(float(a.max()), 2),
        "mean": round(float(a.mean()), 2),
    }


def summarise_one(records: Sequence[CallRecord], deadline_s: float | None) -> dict[str, Any]:
    """Latency (ms), model size, statuses, fallbacks and quality of one dispatcher's calls."""
    modelled = [r for r in records if r.variables]
    compared = [r for r in records if r.objective is not None and r.heuristic_objective is not None]
    gains = [
        1 - r.objective / r.heuristic_objective  # type: ignore[operator]
        for r in compared
        if r.heuristic_objective
    ]
    out: dict[str, Any] = {
        "calls": len(records),
        "latency_ms": _percentiles([r.wall_ms for r in records]),
        "cpu_ms": _percentiles([r.cpu_ms for r in records]),
        "model": {
            "calls_with_model": len(modelled),
            "variables": _percentiles([r.variables for r in modelled]),
            "constraints": _percentiles([r.constraints for r in modelled]),
            "intervals": _percentiles([r.intervals for r in modelled]),
        },
        "statuses": dict(sorted(Counter(r.status for r in records).items())),
        "fallbacks": sum(r.fallback for r in records),
        "fallback_reasons": dict(
            sorted(Counter(r.reason for r in records if r.reason is not None).items())
        ),
        "objective_vs_heuristic": {
            "calls": len(compared),
            "better": sum(r.objective < r.heuristic_objective for r in compared),  # type: ignore[operator]
            "equal": sum(r.objective == r.heuristic_objective for r in compared),
            "worse": sum(r.objective > r.heuristic_objective for r in compared),  # type: ignore[operator]
            "mean_reduction": round(float(np.mean(gains)), 4) if gains else None,
        },
        "queued": _percentiles([r.queued for r in records]),
        "phases_ms": {
            name: _percentiles([r.phases_ms[name] for r in records if name in r.phases_ms])
            for name in dict.fromkeys(n for r in records for n in r.phases_ms)
        },
    }
    if deadline_s is not None:
        out["past_deadline"] = sum(r.wall_ms > deadline_s * 1000.0 for r in records)
    return out


def size_ratios(records: Sequence[CallRecord], numerator: str, denominator: str) -> dict[str, Any]:
    """Per-instance ratio of model variables, ``numerator`` over ``denominator``."""
    by_key = {(r.file, r.index, r.dispatcher): r for r in records}
    ratios = []
    for r in records:
        if r.dispatcher != numerator or not r.variables:
            continue
        other = by_key.get((r.file, r.index, denominator))
        if other is not None and other.variables:
            ratios.append(r.variables / other.variables)
    if not ratios:
        return {"instances": 0}
    a = np.asarray(ratios)
    return {
        "instances": len(ratios),
        "median": round(float(np.median(a)), 4),
        "max": round(float(a.max()), 4),
        "below_0.1": int((a < 0.1).sum()),
    }


def summarise(
    records: Sequence[CallRecord], names: Sequence[str], deadline_s: float | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "dispatchers": {
            name: summarise_one([r for r in records if r.dispatcher == name], deadline_s)
            for name in names
        },
        "deadline_s": deadline_s,
    }
    cp = [n for n in names if is_cp(n.partition("@")[0])]
    if len(cp) >= 2:
        out["variables_ratio"] = {
            f"{a}/{b}": size_ratios(records, a, b) for i, a in enumerate(cp) for b in cp[i + 1 :]
        }
    return out


def records_as_dicts(records: Sequence[CallRecord]) -> list[dict[str, Any]]:
    return [asdict(r) for r in records]
