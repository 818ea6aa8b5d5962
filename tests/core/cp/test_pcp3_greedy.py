from hypothesis import HealthCheck, given, settings

from cpsched.core.cp.pcp3_greedy import (
    _best_fit,
    _Machine,
    hostable,
    node_capacities,
    node_loads,
    unit_demand,
)
from tests.core.cp._util import prepared_of, small_instances
from tests.factories import limits_as_durations


def full_scan(machine: _Machine, mj, ureq, hosts):
    """``_Machine.earliest`` without its shortcuts: every end time, every host node."""
    wanted = [(k, a) for k, a in enumerate(ureq) if a]
    for start in machine.ends:
        fits = []
        for node, _ in hosts:
            units, left = machine.fit(node, start, mj.length, wanted)
            if units:
                fits.append((left, node, units))
        if sum(units for *_, units in fits) >= mj.job.units:
            return start, _best_fit(fits, mj.job.units)
    raise AssertionError("the idle machine holds every hostable job")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_instances(max_nodes=6, max_running=5, max_units=4))
def test_earliest_places_each_job_as_a_scan_of_every_node_would(snap):
    # The scan stops once best-fit's tightest nodes hold the job; that must not change
    # where a job goes, on nodes of several sizes and types, however loaded.
    durations = limits_as_durations(snap)
    prepared, hosts = hostable(snap, prepared_of(snap, durations))
    machine = _Machine(node_capacities(snap, prepared), node_loads(snap, durations, prepared))
    for mj, job_hosts in zip(prepared.jobs, hosts, strict=True):
        ureq = unit_demand(mj, prepared)
        start, allocation = machine.earliest(mj, ureq, job_hosts)
        assert (start, allocation) == full_scan(machine, mj, ureq, job_hosts)
        machine.add(start, mj.length, [(n, [u * a for a in ureq]) for n, u in allocation])
