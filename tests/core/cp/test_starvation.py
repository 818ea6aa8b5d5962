"""A big job behind a steady stream of small ones: the guard makes it start.

One node of 4 cores. "big" needs all 4 for 100 s. Every 5 s a 1-core, 20 s job arrives
and one core frees up, so the machine never drains on its own: "big" never fits in what
is free at a dispatching time, and the reduction keeps it out of the model. Its priority
(slowdown if started now) grows by 0.05 per second; once it passes the guard's threshold
it gets a reservation and the small jobs stop taking the cores it needs.
"""

import pytest

from cpsched.core.cp import ModelConfig, make_cp_dispatcher
from cpsched.core.cp.guard import starving_job
from cpsched.core.cp.prepare import priorities
from tests.core.cp._util import DETERMINISTIC, decide, hcp3
from tests.factories import job, nodes, running, snapshot

STEP = 5
SMALL = 20


def simulate(model: ModelConfig, until: int) -> tuple[int | None, list[tuple[int, int]]]:
    """Dispatch every STEP seconds until ``until``; return when "big" started (or None)
    and, for each call that modelled "big", the call's time and big's planned start."""
    machine = nodes(4)
    big = job("big", submit=0, units=4, limit=100)
    # Four small jobs running, ending at 5, 10, 15 and 20.
    run = [running(job(f"s-{k}", limit=SMALL), 5 * k - 15, [(0, 1)]) for k in range(4)]
    queue = [big]
    dispatcher = hcp3(model)
    planned_big: list[tuple[int, int]] = []
    for t in range(0, until + 1, STEP):
        run = [rj for rj in run if rj.start + rj.time_limit > t]
        queue.append(job(f"s{t}", submit=t, limit=SMALL))
        snap = snapshot(t, machine, run, queue)
        decision = decide(snap, dispatcher=dispatcher)
        if "big" in (decision.planned or {}):
            planned_big.append((t, decision.planned["big"]))
        chosen = {s.job_id: s.allocation for s in decision.starts}
        for j in queue:
            if j.id in chosen:
                run.append(running(j, t, chosen[j.id]))
        queue = [j for j in queue if j.id not in chosen]
        if "big" in chosen:
            assert decision.planned["big"] == t  # the model planned it now
            return t, planned_big
    return None, planned_big


def test_without_the_guard_the_big_job_starves():
    started_at, planned = simulate(ModelConfig(reserve_above=None, reserve_after=None), until=2000)
    assert started_at is None
    assert planned == []  # never even modelled: it never fits in what is free


def test_with_the_guard_the_big_job_starts_once_its_priority_is_high_enough():
    threshold = 10.0
    started_at, planned = simulate(ModelConfig(reserve_above=threshold), until=2000)
    assert started_at is not None
    # Its priority reaches 10 at t = 900; the reservation is then at most one small
    # job's length (20 s) away, and it holds: the start is at the reserved time.
    assert 900 <= started_at <= 900 + SMALL
    assert planned[-1] == (started_at, started_at)
    big = job("big", submit=0, units=4, limit=100)
    assert priorities([big], {"big": 100}, started_at)["big"] >= threshold


def test_the_guarded_reservation_is_not_delayed_by_small_jobs():
    # From the first call that protects "big", its planned start never moves later, and
    # the small jobs started meanwhile all end by then.
    started_at, planned = simulate(ModelConfig(reserve_above=10.0), until=2000)
    assert planned[0][0] == 900
    starts = [p for _, p in planned]
    assert starts == sorted(starts, reverse=True)
    assert starts[-1] == started_at


def test_the_wait_trigger_protects_the_big_job_once_it_has_waited_long_enough():
    # Slowdown trigger off: only the wait (300 s here) reaches "big", long before its
    # slowdown (4 at t = 300) would.
    started_at, planned = simulate(ModelConfig(reserve_above=None, reserve_after=300), until=2000)
    assert started_at is not None
    assert 300 <= started_at <= 300 + SMALL
    assert planned[0][0] == 300


def test_the_longest_waiting_job_is_protected_before_the_highest_priority_one():
    # "short" has the higher slowdown (waited 500 s for a 10 s run: 51), "old" has
    # waited longer (900 s for 1000 s: 1.9); past the wait trigger, "old" comes first.
    old = job("old", submit=0, units=1, limit=1000)
    short = job("short", submit=400, units=1, limit=10)
    snap = snapshot(900, nodes(1), [], [old, short])
    durations = {"old": 1000, "short": 10}
    prios = priorities([old, short], durations, 900)
    order = [short, old]
    assert starving_job(order, prios, snap, above=10.0, after=600) is old
    assert starving_job(order, prios, snap, above=10.0, after=None) is short
    assert starving_job(order, prios, snap, above=None, after=1000) is None


def test_without_a_long_wait_the_slowdown_trigger_still_chooses():
    old = job("old", submit=0, units=1, limit=1000)
    short = job("short", submit=400, units=1, limit=10)
    snap = snapshot(900, nodes(1), [], [old, short])
    prios = priorities([old, short], {"old": 1000, "short": 10}, 900)
    assert starving_job([short, old], prios, snap, above=10.0, after=1000) is short


@pytest.mark.parametrize("kind", ["hcp3", "pcp3", "pcp20"])
def test_a_job_protected_by_its_wait_keeps_its_reservation_beyond_the_window(kind):
    # One 4-core node, 2 cores busy until 1000. "old" needs all 4 cores and has the
    # lowest priority (waited 500 s for a 100,000 s run), so it is last in priority
    # order; the window holds 2 jobs. Protected by its wait, it must still be modelled,
    # and the small jobs must not run past its reservation at 1000.
    busy = running(job("r", units=2, limit=1000), 0, [(0, 2)])
    old = job("old", submit=0, units=4, limit=100_000)
    small = [job(f"s{k}", submit=400, limit=10_000) for k in range(3)]
    snap = snapshot(500, nodes(4), [busy], [old, *small])
    model = ModelConfig(window=2, reserve_above=None, reserve_after=100)
    dispatcher = make_cp_dispatcher(kind, "best-fit", DETERMINISTIC, model=model)
    decision = decide(snap, dispatcher=dispatcher)
    assert not decision.diagnostics.fallback
    assert decision.planned["old"] == 1000
    # A small job started now would hold a core until 10,500, past old's start.
    assert decision.starts == ()
