"""A replay's CP searches are limited by solver work alone: no call reads the wall clock
to decide, so the same replay gives the same summary on an idle or a busy machine. A
clock that jumps a second at every reading stands in for the busiest machine."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from cpsched.core.cp.flow import CPDispatcher
from cpsched.core.dispatcher import Dispatcher
from cpsched.replay.metrics import summarise
from cpsched.replay.simulator import Simulator, SimulatorOptions
from cpsched.replay.swf import read_swf
from cpsched.replay.system import load_system
from cpsched.runtime.policy import Policy
from tests.conftest import REPO


def jumping_clock() -> Callable[[], float]:
    """Every reading a second after the previous one: each call is far past a 0.2 s
    deadline after its first phase."""
    now = 0.0

    def clock() -> float:
        nonlocal now
        now += 1.0
        return now

    return clock


def cp_inside(dispatcher: Dispatcher) -> CPDispatcher:
    """The CP dispatcher under the policy's wrappers."""
    inner: Any = dispatcher
    while not isinstance(inner, CPDispatcher):
        inner = vars(inner)["inner"]
    return inner


def replayed(traces_dir, dispatcher: Dispatcher) -> str:
    system = load_system(REPO / "systems" / "kth.toml")
    trace = read_swf(traces_dir / "KTH-SP2-1996-2.1-cln.swf.gz", system, limit=400)
    policy = Policy()
    predictor = policy.make_predictor()
    simulator = Simulator(
        system, trace.jobs, dispatcher, predictor, SimulatorOptions(), overrun=policy.overrun
    )
    result = simulator.run()
    return json.dumps(summarise(result, include_timings=False), sort_keys=True)


@pytest.mark.parametrize("dispatcher", ["hcp3", "pcp20"])
def test_a_replay_decides_the_same_whatever_the_clock_says(traces_dir, dispatcher):
    policy = Policy(dispatcher=dispatcher)
    calm = policy.make_dispatcher(plan=False, replay=True)
    busy = policy.make_dispatcher(plan=False, replay=True)
    cp_inside(busy).clock = jumping_clock()
    summary = replayed(traces_dir, calm)
    assert summary == replayed(traces_dir, busy)
    assert json.loads(summary)["fallbacks"] == 0


def test_the_service_search_does_read_the_clock(traces_dir):
    # The same test can fail: a search within the wall-clock deadline, on that clock,
    # falls back in every modelled call.
    walled = Policy().make_dispatcher(plan=False)
    cp_inside(walled).clock = jumping_clock()
    assert json.loads(replayed(traces_dir, walled))["fallbacks"] > 0
