"""PCP3: node-level CP decisions, against hand optima, HCP3's pooled relaxation and EASY."""

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from cpsched.core import make_dispatcher
from cpsched.core.allocators import BestFit
from cpsched.core.cp import ModelConfig, SearchConfig
from cpsched.core.cp.greedy import plan_objective
from cpsched.core.cp.pcp3 import PCP3Dispatcher, build_node_model
from tests.core.cp._util import (
    DETERMINISTIC,
    NOW,
    decide,
    hcp3,
    mixed_instance,
    objective,
    pooled_violations,
    prepared_of,
    small_instances,
    started,
    without_timings,
)
from tests.factories import job, limits_as_durations, nodes, running, snapshot

NO_GUARD = ModelConfig(reserve_above=None, reserve_after=None)


def pcp3(model=NO_GUARD, search=DETERMINISTIC, **kwargs):
    return PCP3Dispatcher(BestFit(), search, model, **kwargs)


def fragmented():
    """Two 4-core nodes, one core busy on each until t+10: 6 cores free, but only one
    2-core unit fits per node. Three 2-core, 10 s jobs, older first."""
    r0, r1 = job("r0", limit=15), job("r1", limit=15)
    run = [running(r0, 95, [(0, 1)]), running(r1, 95, [(1, 1)])]
    queue = [job(n, submit=s, unit=2, limit=10) for n, s in (("a", 0), ("b", 10), ("c", 20))]
    return snapshot(100, nodes(4, 4), run, queue)


def test_known_node_level_optimum_where_the_pool_is_optimistic():
    snap = fragmented()
    prepared = prepared_of(snap)
    decision = decide(snap, dispatcher=pcp3())
    assert decision.diagnostics.dispatcher == "pcp3"
    assert decision.diagnostics.solver_status == "optimal"
    # The youngest waits for a running job to end (symmetry: older identical jobs first).
    assert decision.planned == {"a": 100, "b": 100, "c": 110}
    assert objective(prepared, decision.planned) == 1000 * 10
    assert dict((s.job_id, s.allocation) for s in decision.starts) in (
        {"a": ((0, 1),), "b": ((1, 1),)},
        {"a": ((1, 1),), "b": ((0, 1),)},
    )
    pooled = decide(snap, dispatcher=hcp3(NO_GUARD))
    assert objective(prepared, pooled.planned) == 0  # all three "start" in the pool
    assert sorted(started(pooled)) == ["a", "b"]  # ... and one is postponed


def test_optional_interval_variant_and_no_pooled_cut_agree():
    snap = fragmented()
    expected = decide(snap, dispatcher=pcp3()).planned
    for kwargs in ({"optional": True}, {"pooled": False}):
        decision = decide(snap, dispatcher=pcp3(**kwargs))
        assert decision.diagnostics.solver_status == "optimal"
        assert decision.planned == expected


def test_multi_unit_job_is_spread_over_nodes():
    # 3 units of 2 cores on two 4-core nodes: must use both nodes, 2 + 1.
    snap = snapshot(0, nodes(4, 4), queue=[job("w", units=3, unit=2, limit=10)])
    decision = decide(snap, dispatcher=pcp3())
    assert decision.starts[0].allocation in (((0, 2), (1, 1)), ((0, 1), (1, 2)))


def test_the_greedy_node_plans_are_solutions_of_the_model():
    snap, durations, prepared, hosts, plans = mixed_instance()
    assert len(plans) == 3
    for plan in plans.values():
        built = build_node_model(snap, durations, prepared, hosts)
        for xs, indices in zip(built.units, built.unit_indices, strict=True):
            assert [x.index for _, x in xs] == list(indices)  # the search reads by index
        for j, start, xs in zip(prepared.jobs, built.starts, built.units, strict=True):
            built.model.add(start == plan.starts[j.job.id])
            for n, x in xs:
                built.model.add(x == plan.units[j.job.id].get(n, 0))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        assert solver.solve(built.model) == cp_model.OPTIMAL


def test_above_the_search_size_cap_the_best_greedy_plan_answers_unsearched(monkeypatch):
    snap, durations, prepared, hosts, plans = mixed_instance()
    counts = sum(len(h) for h in hosts)
    searched = pcp3(NO_GUARD).decide(snap, durations)
    costs = {name: plan_objective(prepared, p.starts) for name, p in plans.items()}
    best = plans[min(costs, key=costs.__getitem__)]
    # The search improves on every greedy plan here, so the two paths differ.
    assert objective(prepared, searched.planned) < min(costs.values())

    def must_not_run(*args, **kwargs):
        raise AssertionError("a skipped call builds and searches nothing")

    with monkeypatch.context() as patched:
        patched.setattr("cpsched.core.cp.pcp3.build_node_model", must_not_run)
        patched.setattr("cpsched.core.cp.flow.solve_with_restarts", must_not_run)
        for cap in (1, counts - 1):
            search = replace(DETERMINISTIC, search_size_cap=cap)
            capped = decide(snap, durations, pcp3(NO_GUARD, search))
            d = capped.diagnostics
            assert d.solver_status == "skipped" and not d.fallback and d.model_variables == 0
            assert f"{counts} x[i,n] variables, above search_size_cap {cap}" in " ".join(d.notes)
            # The answer is the cheapest greedy node plan: its starts, on its nodes.
            assert objective(prepared, capped.planned) == min(costs.values())
            now = {
                job_id: tuple(sorted(units.items()))
                for job_id, units in best.units.items()
                if best.starts[job_id] == 0
            }
            assert {s.job_id: s.allocation for s in capped.starts} == now
    at_cap = pcp3(NO_GUARD, replace(DETERMINISTIC, search_size_cap=counts))
    assert without_timings(at_cap.decide(snap, durations)) == without_timings(searched)


def test_empty_queue_and_nothing_startable_give_an_empty_decision():
    r = job("r", units=4, limit=100)
    for queue in ([], [job("a")]):
        snap = snapshot(0, nodes(4), [running(r, 0, [(0, 4)])], queue)
        decision = decide(snap, dispatcher=pcp3())
        assert decision.starts == () and decision.planned == {}
        assert decision.diagnostics.solver_status == "empty"
        assert not decision.diagnostics.fallback


def test_past_the_deadline_the_fallback_decision_is_returned_and_marked():
    snap = fragmented()
    ticks = iter([0.0])  # the first read starts the call; every later read is 100 s on
    dispatcher = pcp3(search=SearchConfig(deadline=2.0), clock=lambda: next(ticks, 100.0))
    decision = decide(snap, dispatcher=dispatcher)
    easy = make_dispatcher("easy", "best-fit").decide(snap, limits_as_durations(snap))
    assert decision.starts == easy.starts and decision.planned == easy.planned
    d = decision.diagnostics
    assert d.fallback and d.dispatcher == "pcp3" and d.solver_status == "deadline"
    # Every read after the first is past the deadline: no phase after the fallback runs.
    assert d.model_variables == 0
    assert "fallback: no time left for prepare; decision of easy" in d.notes


def instances(max_nodes=4):
    return small_instances(max_nodes=max_nodes)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), st.booleans())
def test_decisions_are_valid_and_never_beat_the_pooled_relaxation(snap, guarded):
    model = ModelConfig(reserve_above=1.0 if guarded else None)
    decision = decide(snap, dispatcher=pcp3(model))  # decide() checks validity
    assert not decision.diagnostics.fallback
    if guarded or decision.diagnostics.solver_status != "optimal":
        return
    prepared = prepared_of(snap)
    units = {k: (v - NOW) // prepared.time_unit for k, v in decision.planned.items()}
    assert pooled_violations(prepared, units) == []  # a node plan is a pooled plan
    pooled = decide(snap, dispatcher=hcp3(NO_GUARD))
    if pooled.diagnostics.solver_status == "optimal":
        ours, relaxed = objective(prepared, decision.planned), objective(prepared, pooled.planned)
        assert ours >= relaxed
        if len(snap.nodes) == 1:
            assert ours == relaxed


def test_presolve_defaults_per_dispatcher_and_an_explicit_choice_wins():
    from cpsched.core.cp import SearchConfig, make_cp_dispatcher

    assert make_cp_dispatcher("pcp3", "best-fit").search.presolve is False
    assert make_cp_dispatcher("hcp3", "best-fit").search.presolve is True
    chosen = make_cp_dispatcher("pcp3", "best-fit", search=SearchConfig(presolve=True))
    assert chosen.search.presolve is True
