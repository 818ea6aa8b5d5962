"""Symmetry breaking between interchangeable nodes in PCP3: same optima, valid hints."""

from hypothesis import HealthCheck, event, given, settings
from ortools.sat.python import cp_model

from service.dispatch.allocators import BestFit
from service.dispatch.cp import ModelConfig
from service.dispatch.cp.node_symmetry import canonical, interchangeable_nodes
from service.dispatch.cp.pcp3 import PCP3Dispatcher, build_node_model
from service.dispatch.cp.pcp3_greedy import node_capacities, node_loads
from tests.dispatch.cp._util import (
    DETERMINISTIC,
    decide,
    mixed_instance,
    objective,
    prepared_of,
    small_instances,
)
from tests.factories import job, limits_as_durations, nodes, running, snapshot

NO_GUARD = ModelConfig(reserve_above=None, reserve_after=None)


def pcp3(node_symmetry: bool) -> PCP3Dispatcher:
    return PCP3Dispatcher(BestFit(), DETERMINISTIC, NO_GUARD, node_symmetry=node_symmetry)


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


def test_the_canonical_hint_is_a_solution_of_the_model_with_the_symmetry_broken():
    snap, durations, prepared, hosts, plans = mixed_instance()
    caps = node_capacities(snap, prepared)
    groups = interchangeable_nodes(caps, node_loads(snap, durations, prepared), hosts)
    for plan in plans.values():
        hint = canonical(plan, groups)
        assert hint.starts == plan.starts
        built = build_node_model(snap, durations, prepared, hosts, node_groups=groups)
        for j, start, xs in zip(prepared.jobs, built.starts, built.units, strict=True):
            built.model.add(start == hint.starts[j.job.id])
            for n, x in xs:
                built.model.add(x == hint.units[j.job.id].get(n, 0))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        assert solver.solve(built.model) == cp_model.OPTIMAL


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances(max_nodes=4))
def test_breaking_node_symmetry_keeps_the_optimum(snap):
    plain = decide(snap, dispatcher=pcp3(False))  # decide() checks validity
    broken = decide(snap, dispatcher=pcp3(True))
    assert not broken.diagnostics.fallback
    statuses = (plain.diagnostics.solver_status, broken.diagnostics.solver_status)
    event(str(statuses))
    if statuses == ("optimal", "optimal"):
        prepared = prepared_of(snap)
        assert objective(prepared, broken.planned) == objective(prepared, plain.planned)
