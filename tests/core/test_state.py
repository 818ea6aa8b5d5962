"""What a dispatcher learns between calls lives in the state its caller passes in."""

from __future__ import annotations

from cpsched.core import make_dispatcher
from cpsched.core.state import DispatcherState
from tests.core.cp._util import DETERMINISTIC
from tests.factories import job, limits_as_durations, nodes, running, snapshot


def _busy_queue():
    r = job("r", units=2, limit=100)
    queue = [job(f"q{i}", submit=i, units=1 + i % 2, limit=20 + 30 * i) for i in range(4)]
    return snapshot(10, nodes(4), [running(r, 0, [(0, 2)])], queue)


def test_a_cp_dispatcher_learns_into_the_state_it_was_given():
    state = DispatcherState()
    hcp3 = make_dispatcher("hcp3", "best-fit", search=DETERMINISTIC, state=state)
    snap = _busy_queue()
    hcp3.decide(snap, limits_as_durations(snap))
    assert state.timings.after_solve_s > 0  # the work after its search, for the next call
    # Another dispatcher with a fresh state has learnt nothing.
    other = make_dispatcher("hcp3", "best-fit", search=DETERMINISTIC)
    assert other.state is not state and other.state.timings.after_solve_s == 0  # type: ignore[attr-defined]


def test_priority_weighted_keeps_its_counters_in_the_state():
    state = DispatcherState()
    easy = make_dispatcher("easy", "priority-weighted:gpu", state=state)
    machine = nodes((4, 1), (4, 0))
    never = job("g", unit=(1, 2))  # two GPUs per unit: never fits
    snap = snapshot(0, machine, queue=[never], resources=("cpu", "gpu"))
    easy.decide(snap, limits_as_durations(snap))
    assert state.priority_counters.get("gpu") == 2


def test_heuristics_learn_nothing():
    state = DispatcherState()
    easy = make_dispatcher("easy", "best-fit", state=state)
    snap = _busy_queue()
    easy.decide(snap, limits_as_durations(snap))
    assert state == DispatcherState()
