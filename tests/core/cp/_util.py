"""Helpers shared by the CP dispatcher tests."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from cpsched.core import check_decision, make_dispatcher
from cpsched.core.allocators import BestFit
from cpsched.core.cp import HCP3Dispatcher, ModelConfig, SearchConfig
from cpsched.core.cp.pcp3_greedy import candidate_node_plans, hostable
from cpsched.core.cp.prepare import Prepared, prepare, priorities, priority_order
from tests.factories import job, limits_as_durations, nodes, running, snapshot

# Reproducible runs: limited by deterministic time (short: the instances are tiny), with
# the wall deadline far away.
DETERMINISTIC = SearchConfig(
    deterministic=True, initial_limit=0.1, max_limit=1.6, patience=2, deadline=60.0
)


def hcp3(model=None, search=DETERMINISTIC, **kwargs):
    return HCP3Dispatcher(BestFit(), search, model, **kwargs)


def decide(snap, durations=None, dispatcher=None):
    """A checked HCP3 decision: every decision must pass the independent validator."""
    dispatcher = dispatcher or hcp3()
    decision = dispatcher.decide(snap, durations or limits_as_durations(snap))
    check_decision(snap, decision)
    return decision


def prepared_of(snap, durations=None, model=None) -> Prepared:
    """The pooled instance HCP3 builds for ``snap`` (no guard)."""
    durations = durations or limits_as_durations(snap)
    prios = priorities(snap.queued, durations, snap.time)
    order = priority_order(snap.queued, prios, durations)
    return prepare(
        snap, durations, model or ModelConfig(reserve_above=None, reserve_after=None), order, prios
    )


def without_timings(decision):
    """The decision without its measured phase times (wall clock: they differ per run)."""
    notes = tuple(n for n in decision.diagnostics.notes if not n.startswith("phases ms:"))
    return dataclasses.replace(
        decision, diagnostics=dataclasses.replace(decision.diagnostics, notes=notes)
    )


def started(decision):
    return [s.job_id for s in decision.starts]


def filled_starts(decision) -> list[str]:
    """The jobs the fill started (``core/cp/fill.py``): its starts come last, and a note
    counts them."""
    for note in decision.diagnostics.notes:
        if note.endswith("in what the plan left idle"):
            count = int(note.split()[0])
            return [s.job_id for s in decision.starts[-count:]]
    return []


def objective(prepared: Prepared, planned: dict[str, int]) -> int:
    """``Σ w_i (s_i − t)`` in model units, from a decision's planned starts (seconds)."""
    t, unit = prepared.time, prepared.time_unit
    return sum(j.weight * (planned[j.job.id] - t) // unit for j in prepared.jobs)


def pooled_violations(prepared: Prepared, plan_units: dict[str, int]) -> list[str]:
    """Independent check of a plan (units from t) against the pooled model."""
    end = prepared.horizon + max((j.length for j in prepared.jobs), default=0) + 1
    end = max(end, max((load.length for load in prepared.running), default=0) + 1)
    used = [[0] * len(prepared.capacity) for _ in range(end)]
    for load in prepared.running:
        for x in range(load.length):
            for k, a in enumerate(load.demand):
                used[x][k] += a
    problems = []
    for j in prepared.jobs:
        s = plan_units[j.job.id]
        upper = prepared.horizon if j.latest is None else min(prepared.horizon, j.latest)
        if not 0 <= s <= upper:
            problems.append(f"{j.job.id} starts at {s}, outside [0, {upper}]")
            continue
        for x in range(s, s + j.length):
            for k, a in enumerate(j.demand):
                used[x][k] += a
    for x, row in enumerate(used):
        for k, a in enumerate(row):
            if a > prepared.capacity[k]:
                problems.append(f"type {k} over capacity at {x}: {a}")
    return problems


NOW = 6
"""The dispatch time of the random instances."""


@st.composite
def small_instances(draw, *, max_nodes=4, max_running=3, min_queued=1, max_units=3):
    """A random small snapshot at ``NOW``: 1–2 resource types, running jobs that fit their
    node, queued jobs that each request something."""
    types = draw(st.integers(1, 2))
    resources = ("cpu", "gpu")[:types]
    count = draw(st.integers(1, max_nodes))
    caps = [tuple(draw(st.integers(2, 4)) for _ in range(types)) for _ in range(count)]
    free = [list(c) for c in caps]
    run = []
    for i in range(draw(st.integers(0, max_running))):
        node = draw(st.integers(0, count - 1))
        unit = tuple(draw(st.integers(0, c)) for c in free[node])
        if not any(unit):
            continue
        for r, a in enumerate(unit):
            free[node][r] -= a
        rj = job(f"r{i}", limit=draw(st.integers(1, 10)), unit=unit)
        run.append(running(rj, draw(st.integers(0, NOW)), [(node, 1)]))
    queue = []
    for i in range(draw(st.integers(min_queued, 4))):
        unit = tuple(draw(st.integers(0, 2)) for _ in range(types))
        if not any(unit):
            unit = (1, *unit[1:])
        queue.append(
            job(
                f"q{i}",
                submit=draw(st.integers(0, NOW)),
                units=draw(st.integers(1, max_units)),
                unit=unit,
                limit=draw(st.integers(1, 4)),
            )
        )
    return snapshot(NOW, nodes(*caps), run, queue, resources)


def mixed_instance():
    """Three nodes of two sizes with cpu and mem, one running job and eight queued jobs
    of varied shapes; with the node-level greedy plans PCP3 and PCP'20 hint from."""
    r = job("r", units=3, unit=(1, 2), limit=50)
    machine = nodes((4, 8), (4, 8), (2, 4))
    queue = [
        job(f"q{i}", submit=i, units=1 + i % 3, unit=(1, 1 + i % 4), limit=10 + 7 * i)
        for i in range(8)
    ]
    snap = snapshot(20, machine, [running(r, 0, [(0, 3)])], queue, resources=("cpu", "mem"))
    durations = limits_as_durations(snap)
    prepared, hosts = hostable(snap, prepared_of(snap))
    easy = make_dispatcher("easy", "best-fit").decide(snap, durations)
    seeded = {s.job_id: s.allocation for s in easy.starts}
    plans = candidate_node_plans(snap, durations, prepared, hosts, seeded)
    return snap, durations, prepared, hosts, plans
