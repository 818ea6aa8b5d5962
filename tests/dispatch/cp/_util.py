"""Helpers shared by the CP dispatcher tests."""

from __future__ import annotations

from service.dispatch import check_decision
from service.dispatch.allocators import BestFit
from service.dispatch.cp import HCP3Dispatcher, ModelConfig, SearchConfig
from service.dispatch.cp.prepare import Prepared, prepare, priorities, priority_order
from tests.factories import limits_as_durations

# Reproducible runs: limited by deterministic time (short: the instances are tiny), with
# the wall deadline far away.
DETERMINISTIC = SearchConfig(deterministic=True, initial_limit=0.1, max_limit=1.6, deadline=60.0)


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
    return prepare(snap, durations, model or ModelConfig(reserve_above=None), order, prios)


def started(decision):
    return [s.job_id for s in decision.starts]


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
