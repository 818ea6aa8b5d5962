"""Real traces through every heuristic, each snapshot and decision checked independently."""

from __future__ import annotations

import pytest

from cpsched.core import make_dispatcher
from cpsched.predictor.walltime import WallTime
from cpsched.replay.simulator import Simulator, SimulatorOptions
from cpsched.replay.swf import read_swf
from cpsched.replay.system import load_system
from tests.conftest import REPO


@pytest.mark.parametrize("dispatcher", ["fcfs", "sjf", "ljf", "easy"])
@pytest.mark.parametrize("allocator", ["first-fit", "best-fit"])
def test_kth_excerpt_replays_validly(traces_dir, dispatcher, allocator):
    system = load_system(REPO / "systems" / "kth.toml")
    trace = read_swf(traces_dir / "KTH-SP2-1996-2.1-cln.swf.gz", system, limit=1500)
    sim = Simulator(
        system,
        trace.jobs,
        make_dispatcher(dispatcher, allocator),
        WallTime(),
        SimulatorOptions(validate=True),
    )
    result = sim.run()
    assert (result.jobs.start >= result.jobs.submit).all()
    assert (result.series.used[:, 0] <= 100).all()


def test_curie_excerpt_on_its_heterogeneous_machine(traces_dir):
    """5,544 nodes of three kinds: EASY's node-level reservation on a large machine."""
    system = load_system(REPO / "systems" / "curie.toml")
    trace = read_swf(traces_dir / "CEA-Curie-2011-2.1-cln.swf.gz", system, limit=600)
    sim = Simulator(
        system,
        trace.jobs,
        make_dispatcher("easy", "first-fit"),
        WallTime(),
        SimulatorOptions(validate=True),
    )
    result = sim.run()
    assert (result.jobs.end > result.jobs.start).all()


def test_hcp3_replays_a_kth_excerpt_validly(traces_dir):
    from cpsched.core.cp import SearchConfig
    from cpsched.predictor.lasttwo import LastTwo

    system = load_system(REPO / "systems" / "kth.toml")
    trace = read_swf(traces_dir / "KTH-SP2-1996-2.1-cln.swf.gz", system, limit=150)
    search = SearchConfig(initial_limit=0.02, max_limit=0.32, deterministic=True)
    dispatcher = make_dispatcher("hcp3", "best-fit", search=search)
    result = Simulator(
        system, trace.jobs, dispatcher, LastTwo(), SimulatorOptions(validate=True)
    ).run()
    assert (result.jobs.start >= result.jobs.submit).all()
    assert sum(result.dispatch.solver_status.values()) == len(result.dispatch.wall_ms)
