"""Resource allocation efficiency (Netti 2017, eq. 2.7) as the replay measures it."""

import pytest

from cpsched.core import Job, Node, make_dispatcher
from cpsched.predictor.walltime import WallTime
from cpsched.replay.metrics import summarise
from cpsched.replay.simulator import Simulator
from cpsched.replay.swf import TraceJob
from cpsched.replay.system import System


def replay(nodes, resources, jobs, allocator="first-fit"):
    machine = System("hand", resources, tuple(Node(f"n{i}", c) for i, c in enumerate(nodes)))
    trace = [TraceJob(job, run, 1) for job, run in jobs]
    return Simulator(machine, trace, make_dispatcher("fcfs", allocator), WallTime()).run()


def test_efficiency_is_what_a_job_takes_over_what_its_nodes_had_free():
    a = Job("a", 0, 100, 1, (2,))
    b = Job("b", 10, 100, 1, (2,))
    result = replay([(4,), (4,)], ("cpu",), [(a, 100), (b, 100)])
    # a takes 2 of node 0's 4 free cores; b then fills node 0's last 2.
    assert result.jobs.efficiency.tolist() == [0.5, 1.0]
    assert summarise(result, warmup_fraction=0.0)["mean_allocation_efficiency"] == 0.75


def test_idle_accelerators_on_a_job_s_nodes_lower_its_efficiency():
    cpu_job = Job("c", 0, 100, 1, (4, 0))
    gpu_job = Job("g", 0, 100, 1, (4, 1))
    result = replay([(4, 1)], ("cpu", "gpu"), [(cpu_job, 50), (gpu_job, 50)])
    # Each type counts in units of the largest node's capacity: the CPU job leaves the
    # node's GPU idle (1 of 2), the GPU job uses all of it.
    assert result.jobs.efficiency.tolist() == pytest.approx([0.5, 1.0])


def test_units_spread_over_nodes_count_every_node_they_touch():
    job = Job("w", 0, 100, 3, (2,))
    result = replay([(4,), (4,)], ("cpu",), [(job, 10)])
    assert result.jobs.efficiency.tolist() == [6 / 8]
