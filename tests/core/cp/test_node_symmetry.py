"""Symmetry breaking between interchangeable nodes in PCP3: same optima, valid hints."""

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from cpsched.core.cp.node_symmetry import canonical, interchangeable_nodes
from cpsched.core.cp.pcp3 import build_node_model
from cpsched.core.cp.pcp3_greedy import (
    NodePlan,
    candidate_node_plans,
    hostable,
    node_capacities,
    node_loads,
)
from tests.core.cp._util import prepared_of
from tests.factories import job, limits_as_durations, nodes, running, snapshot


def test_nodes_differing_in_capacity_load_or_hosting_are_not_grouped():
    # Nodes 0-2 idle with 4 cores, node 3 busy, node 4 has 8 cores.
    machine = nodes(4, 4, 4, 4, 8)
    busy = running(job("r", limit=50), 0, [(3, 1)])
    snap = snapshot(10, machine, [busy], [job("a", units=2, limit=20)])
    durations = limits_as_durations(snap)
    prepared = prepared_of(snap, durations)
    caps = node_capacities(snap, prepared)
    hosts = [tuple((n, 2) for n in range(5))]
    groups = interchangeable_nodes(caps, node_loads(snap, durations, prepared), hosts)
    assert groups == [(0, 1, 2)]
    # A job that may use node 0 only sets it apart.
    hosts = [((0, 2),), tuple((n, 2) for n in range(5))]
    groups = interchangeable_nodes(caps, node_loads(snap, durations, prepared), hosts)
    assert groups == [(1, 2)]


def four_nodes():
    """Nodes 0-2 idle with 4 cores, node 3 with one core busy until t+50; four jobs."""
    busy = running(job("r", limit=60), 0, [(3, 1)])
    queue = [
        job(f"j{k}", submit=k, units=u, limit=10 * (k + 1)) for k, u in enumerate((3, 2, 4, 1))
    ]
    snap = snapshot(10, nodes(4, 4, 4, 4), [busy], queue)
    durations = limits_as_durations(snap)
    prepared, hosts = hostable(snap, prepared_of(snap, durations))
    return snap, durations, prepared, hosts


def solve(model: cp_model.CpModel) -> tuple[int, float]:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    return solver.solve(model), solver.objective_value


def groups_of(snap, durations, prepared, hosts):
    caps = node_capacities(snap, prepared)
    return interchangeable_nodes(caps, node_loads(snap, durations, prepared), hosts)


def is_a_solution(snap, durations, prepared, hosts, groups, plan: NodePlan) -> bool:
    """Whether ``plan`` satisfies the node model with ``groups``' symmetry broken."""
    built = build_node_model(snap, durations, prepared, hosts, node_groups=groups)
    for j, start, xs in zip(prepared.jobs, built.starts, built.units, strict=True):
        built.model.add(start == plan.starts[j.job.id])
        for n, x in xs:
            built.model.add(x == plan.units[j.job.id].get(n, 0))
    return solve(built.model)[0] == cp_model.OPTIMAL


def test_a_plan_is_renamed_fullest_node_first_and_stays_a_solution():
    snap, durations, prepared, hosts = four_nodes()
    groups = groups_of(snap, durations, prepared, hosts)
    assert groups == [(0, 1, 2)]
    # Everything at t on the group's nodes, emptiest first: j3 on node 0, j1 on node 1,
    # j0 and j2 would not fit, so they start later on node 2.
    plan = NodePlan(
        {"j0": 40, "j1": 0, "j2": 60, "j3": 0},
        {"j0": {2: 3}, "j1": {1: 2}, "j2": {2: 4}, "j3": {0: 1}},
    )
    hint = canonical(plan, groups)
    assert hint.starts == plan.starts
    assert hint.units == {"j0": {0: 3}, "j1": {1: 2}, "j2": {0: 4}, "j3": {2: 1}}
    assert is_a_solution(snap, durations, prepared, hosts, groups, hint)


def test_the_greedy_hints_renamed_are_solutions_of_the_model_with_the_symmetry_broken():
    snap, durations, prepared, hosts = four_nodes()
    groups = groups_of(snap, durations, prepared, hosts)
    plans = candidate_node_plans(snap, durations, prepared, hosts, {})
    for plan in plans.values():
        assert is_a_solution(snap, durations, prepared, hosts, groups, canonical(plan, groups))


@st.composite
def identical_nodes(draw):
    """2-4 identical idle nodes (and maybe one more, partly busy), 2-4 one-core-unit jobs."""
    count, cores = draw(st.integers(2, 4)), draw(st.integers(2, 4))
    run = []
    if draw(st.booleans()):  # node 0 set apart: one more node keeps two idle ones
        run = [running(job("r", limit=draw(st.integers(2, 8))), 0, [(0, 1)])]
        count += 1
    queue = [
        job(f"j{k}", submit=k, units=draw(st.integers(1, cores)), limit=draw(st.integers(1, 6)))
        for k in range(draw(st.integers(2, 4)))
    ]
    return snapshot(1, nodes(*[cores] * count), run, queue)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(identical_nodes())
def test_breaking_node_symmetry_keeps_the_optimum(snap):
    durations = limits_as_durations(snap)
    prepared, hosts = hostable(snap, prepared_of(snap, durations))
    groups = groups_of(snap, durations, prepared, hosts)
    assert groups  # at least the idle nodes are interchangeable
    event(f"{sum(len(g) for g in groups)} nodes in groups")
    plain = solve(build_node_model(snap, durations, prepared, hosts).model)
    broken = solve(build_node_model(snap, durations, prepared, hosts, node_groups=groups).model)
    assert plain[0] == broken[0] == cp_model.OPTIMAL
    assert plain[1] == broken[1]
