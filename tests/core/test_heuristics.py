"""Hand-checked decisions of FCFS, SJF, LJF and EASY on small clusters."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpsched.core import check_decision, make_dispatcher
from cpsched.errors import UnknownPolicyError
from tests.factories import job, limits_as_durations, nodes, running, snapshot


def decide(name, snap, durations=None, allocator="first-fit"):
    decision = make_dispatcher(name, allocator).decide(snap, durations or limits_as_durations(snap))
    check_decision(snap, decision)
    return decision


def started(decision):
    return [s.job_id for s in decision.starts]


def test_fcfs_stops_at_the_first_job_that_does_not_fit():
    snap = snapshot(0, nodes(4), queue=[job("a", units=3), job("b", units=2), job("c", units=1)])
    assert started(decide("fcfs", snap)) == ["a"]


def test_sjf_and_ljf_order_by_the_durations_the_model_uses():
    queue = [job("long", limit=300), job("short", limit=10), job("mid", limit=50)]
    snap = snapshot(0, nodes(2), queue=queue)
    assert started(decide("sjf", snap)) == ["short", "mid"]
    assert started(decide("ljf", snap)) == ["long", "mid"]
    # The order follows the given durations, not the limits.
    durations = {"long": 1, "short": 500, "mid": 50}
    assert started(decide("sjf", snap, durations)) == ["long", "mid"]


def test_easy_backfills_a_job_that_ends_before_the_reservation():
    # 4 cores; r uses 3 until t=100. Head h needs 4 → reserved at 100.
    r = job("r", units=3, limit=100)
    snap = snapshot(
        0,
        nodes(4),
        [running(r, 0, [(0, 3)])],
        [job("h", units=4), job("short", limit=100), job("long", limit=101)],
    )
    decision = decide("easy", snap)
    assert started(decision) == ["short"]
    assert decision.planned == {"h": 100}


def test_easy_backfills_a_long_job_only_on_resources_the_reservation_leaves():
    # Two nodes of 4. r holds 3 cores of node 0 until 100; 5 cores are free now. Head h
    # needs 6: at 100 it takes node 0 (4) + 2 cores of node 1, leaving 2 spare on node 1.
    r = job("r", units=3, limit=100)
    queue = [job("h", units=6), job("big", units=4, limit=1000), job("fits", units=2, limit=1000)]
    snap = snapshot(0, nodes(4, 4), [running(r, 0, [(0, 3)])], queue)
    decision = decide("easy", snap)
    # "big" fits now but would keep 4 cores past 100 and delay h; "fits" uses only the
    # 2 spare cores.
    assert started(decision) == ["fits"]
    assert dict(decision.starts[0].allocation) == {1: 2}
    assert decision.planned == {"h": 100}


@pytest.mark.parametrize("allocator", ["first-fit", "best-fit"])
def test_easy_reserves_the_head_on_capacity_freed_by_then_before_capacity_free_now(allocator):
    # Five 1-cpu nodes. r holds nodes 3 and 4 until 100, s node 2 until 200; nodes 0 and 1
    # are free now. Head h (3) is reserved at 100 on nodes 3, 4 (freed by then) and one
    # node free now, so one node free now is still spare then: standard EASY's
    # spare-capacity rule lets a long 1-cpu job start there (it did not when h was put on
    # nodes 0, 1, 3 in node order).
    r, s = job("r", units=2, limit=100), job("s", limit=200)
    queue = [job("h", units=3), job("long", limit=1000)]
    snap = snapshot(
        0, nodes(1, 1, 1, 1, 1), [running(r, 0, [(3, 1), (4, 1)]), running(s, 0, [(2, 1)])], queue
    )
    decision = decide("easy", snap, allocator=allocator)
    assert started(decision) == ["long"]
    assert decision.planned == {"h": 100}


def test_easy_plus_plus_backfills_the_shortest_predicted_job_first():
    # 4 cores; r holds 3 until 100, head h (4) is reserved at 100; one core is free now and
    # both a (90 s) and b (10 s) would end before 100: the queue order starts a, EASY++ b.
    r = job("r", units=3, limit=100)
    queue = [job("h", units=4), job("a", limit=90), job("b", limit=10)]
    snap = snapshot(0, nodes(4), [running(r, 0, [(0, 3)])], queue)
    durations = limits_as_durations(snap)
    assert started(decide("easy", snap)) == ["a"]
    shortest = make_dispatcher("easy", "first-fit", backfill_order="shortest")
    decision = shortest.decide(snap, durations)
    check_decision(snap, decision)
    assert started(decision) == ["b"]
    assert decision.planned == {"h": 100}


def test_easy_uses_running_jobs_estimates_with_the_underestimation_fix():
    # r's estimate says it ended at 50 but at t=80 it still runs: assume it needs 1 s more.
    r = job("r", units=4, limit=50)
    snap = snapshot(80, nodes(4), [running(r, 0, [(0, 4)])], [job("h", units=4)])
    decision = decide("easy", snap)
    assert decision.planned == {"h": 81}


def test_easy_reservation_counts_jobs_started_in_the_same_call():
    # a starts now on 2 of 4 cores for 30 s; head h needs 4 → reserved at 30, not now.
    queue = [job("a", units=2, limit=30), job("h", units=4), job("c", units=2, limit=40)]
    decision = decide("easy", snapshot(0, nodes(4), queue=queue))
    assert started(decision) == ["a"]
    assert decision.planned == {"h": 30}


def test_jobs_larger_than_the_machine_are_skipped_and_reported():
    queue = [job("huge", units=9), job("a")]
    decision = decide("fcfs", snapshot(0, nodes(4), queue=queue))
    assert started(decision) == ["a"]
    assert any("huge" in note for note in decision.diagnostics.notes)


def test_best_fit_changes_where_not_whether():
    r = job("r", units=1, limit=100)
    snap = snapshot(0, nodes(2, 2), [running(r, 0, [(1, 1)])], [job("a")])
    assert decide("easy", snap, allocator="best-fit").starts[0].allocation == ((1, 1),)
    assert decide("easy", snap).starts[0].allocation == ((0, 1),)


def test_unknown_dispatcher_lists_the_valid_ones():
    with pytest.raises(UnknownPolicyError, match="easy, fcfs, hcp3, ljf, pcp20, pcp3, sjf"):
        make_dispatcher("lottery", "first-fit")


def test_a_queue_depth_bounds_the_jobs_easy_considers():
    # As Slurm's bf_max_job_test: only the first jobs (in queue order) are tried.
    r = job("r", units=3, limit=100)
    queue = [job("h", units=4, submit=0), job("x", units=2, submit=1)]
    queue += [job(f"small{i}", limit=50, submit=2 + i) for i in range(5)]
    snap = snapshot(0, nodes(4), [running(r, 0, [(0, 3)])], queue)
    durations = limits_as_durations(snap)
    unbounded = make_dispatcher("easy", "first-fit").decide(snap, durations)
    bounded = make_dispatcher("easy", "first-fit", queue_depth=3).decide(snap, durations)
    assert started(unbounded) == ["small0"]
    assert started(bounded) == ["small0"]  # the third job is still within the depth
    shallow = make_dispatcher("easy", "first-fit", queue_depth=2).decide(snap, durations)
    assert started(shallow) == []  # small0 is beyond it: it waits for a later call
    assert shallow.planned == {"h": 100}


class PassesAfter:
    """A deadline that has passed from the ``asks + 1``-th time it is asked (as a clock
    would, one job after another)."""

    def __init__(self, asks: int) -> None:
        self.asks = asks
        self.asked = 0

    def left(self) -> float:
        self.asked += 1
        return 1.0 if self.asked <= self.asks else -1.0


@pytest.mark.parametrize("name", ["fcfs", "easy"])
def test_a_heuristic_returns_what_it_has_when_its_deadline_comes(name):
    from cpsched.core.state import DispatcherState

    queue = [job(f"j{i}") for i in range(6)]
    snap = snapshot(0, nodes(4, 4), queue=queue)
    state = DispatcherState()
    dispatcher = make_dispatcher(name, "first-fit", state=state)
    state.deadline = PassesAfter(3)
    decision = dispatcher.decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)
    assert started(decision) == ["j0", "j1", "j2"]  # the jobs looked at before it came
    assert decision.diagnostics.partial
    assert "stopped at the deadline after 3 of 6 queued jobs" in decision.diagnostics.notes
    state.deadline = None  # no deadline: the whole queue
    whole = dispatcher.decide(snap, limits_as_durations(snap))
    assert len(whole.starts) == 6 and not whole.diagnostics.partial


def test_easy_stopped_during_its_backfill_keeps_the_starts_made_so_far():
    from cpsched.core.state import DispatcherState

    # 4 cores; r holds 2 until 100; the head needs 4: the backfill looks at a, b, c (after
    # a, b and c still fit: a job that no longer fits is dropped, not looked at).
    r = job("r", units=2, limit=100)
    queue = [job("h", units=4), job("a", limit=50), job("b", limit=50), job("c", limit=50)]
    snap = snapshot(0, nodes(4), [running(r, 0, [(0, 2)])], queue)
    state = DispatcherState()
    dispatcher = make_dispatcher("easy", "first-fit", state=state)
    # Asked before h (1), before the reservation (2), before a (3), before b: it stops.
    state.deadline = PassesAfter(3)
    decision = dispatcher.decide(snap, limits_as_durations(snap))
    check_decision(snap, decision)
    assert started(decision) == ["a"] and decision.diagnostics.partial


@settings(max_examples=150, deadline=None)
@given(
    busy=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 100)), max_size=6),
    queue=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 200)), min_size=2, max_size=40),
    shortest=st.booleans(),
)
def test_easy_checks_candidates_a_few_at_a_time_with_the_same_decisions(busy, queue, shortest):
    """EASY's backfill drops the candidates that no longer fit a few at a time
    (``REFILTER_AHEAD``) instead of the whole rest after each start: the same starts."""
    from cpsched.core import heuristics

    machine = nodes(4, 4, 4, 4)
    run, node = [], 0
    for k, (cores, left) in enumerate(busy):
        if node < len(machine):
            run.append(running(job(f"r{k}", units=cores, limit=left), 0, [(node, cores)]))
            node += 1
    jobs = [
        job(f"q{k}", submit=k, units=cores, limit=limit) for k, (cores, limit) in enumerate(queue)
    ]
    snap = snapshot(1, machine, run, jobs)
    order = "shortest" if shortest else "queue"
    decisions = []
    for ahead in (1, 3, 10**6):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(heuristics, "REFILTER_AHEAD", ahead)
            easy = make_dispatcher("easy", "first-fit", backfill_order=order)
            decisions.append(easy.decide(snap, limits_as_durations(snap)))
    assert decisions[0].starts == decisions[1].starts == decisions[2].starts
