"""Invariants of replays on random small clusters and job streams."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpsched.core import Decision, Job, Node, make_dispatcher
from cpsched.core.allocators import make_allocator
from cpsched.core.conservative import backfill_with_depth
from cpsched.core.state import DispatcherState
from cpsched.predictor.walltime import WallTime
from cpsched.replay.simulator import Simulator, SimulatorOptions
from cpsched.replay.swf import TraceJob
from cpsched.replay.system import System

RESOURCES = ("cpu", "mem")


@st.composite
def workloads(draw, exact_estimates=False):
    node_count = draw(st.integers(1, 4))
    caps = [(draw(st.integers(1, 4)), draw(st.sampled_from([4, 8, 16]))) for _ in range(node_count)]
    machine = System("random", RESOURCES, tuple(Node(f"n{i}", c) for i, c in enumerate(caps)))
    max_cpu = max(c[0] for c in caps)
    jobs = []
    submit = 0
    for i in range(draw(st.integers(1, 25))):
        submit += draw(st.integers(0, 30))
        unit_cpu = draw(st.integers(1, max_cpu))
        # A unit must fit some node whole: take the memory of a node with enough cores.
        fitting = [c[1] for c in caps if c[0] >= unit_cpu]
        unit_mem = draw(st.integers(0, max(fitting)))
        # Every job fits the idle machine: at most as many units as the nodes can hold.
        capacity = sum(
            min(cpu // unit_cpu, mem // unit_mem if unit_mem else cpu) for cpu, mem in caps
        )
        units = draw(st.integers(1, capacity))
        limit = draw(st.integers(1, 200))
        run = limit if exact_estimates else draw(st.integers(1, 250))
        jobs.append(
            TraceJob(
                job=Job(str(i), submit, limit, units, (unit_cpu, unit_mem)),
                run_time=run,
                status=1,
            )
        )
    return machine, jobs


class Recording:
    """Wraps a dispatcher and remembers every planned start it announced."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.first_plan: dict[str, int] = {}

    def decide(self, snapshot, durations):
        decision = self.inner.decide(snapshot, durations)
        for job_id, when in (decision.planned or {}).items():
            self.first_plan.setdefault(job_id, when)
        return decision


def run(machine, jobs, dispatcher, allocator="first-fit"):
    recorder = Recording(make_dispatcher(dispatcher, allocator))
    # validate=True checks every snapshot and decision: capacity per node and type is
    # never exceeded, units are whole on one node, nothing starts twice.
    sim = Simulator(machine, jobs, recorder, WallTime(), SimulatorOptions(validate=True))
    return sim.run(), recorder


common = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@common
@given(
    workloads(),
    st.sampled_from(["fcfs", "sjf", "ljf", "easy"]),
    st.sampled_from(["first-fit", "best-fit"]),
)
def test_every_job_runs_once_never_before_its_submission(workload, dispatcher, allocator):
    machine, jobs = workload
    result, _ = run(machine, jobs, dispatcher, allocator)
    submit = result.jobs.submit
    assert (result.jobs.start >= submit).all()  # waits are never negative
    assert (result.jobs.end == result.jobs.start + result.jobs.trace_run).all()
    assert not result.jobs.killed.any()  # original requests never kill


@common
@given(workloads())
def test_fcfs_starts_jobs_in_submission_order(workload):
    machine, jobs = workload
    result, _ = run(machine, jobs, "fcfs")
    starts = result.jobs.start.tolist()
    assert starts == sorted(starts)


@common
@given(workloads(exact_estimates=True), st.sampled_from(["first-fit", "best-fit"]))
def test_easy_never_starts_a_reserved_job_after_its_reservation(workload, allocator):
    machine, jobs = workload
    result, recorder = run(machine, jobs, "easy", allocator)
    index = {tj.job.id: i for i, tj in enumerate(jobs)}
    for job_id, planned in recorder.first_plan.items():
        assert result.jobs.start[index[job_id]] <= planned, job_id


@common
@given(workloads(), st.sampled_from(["first-fit", "best-fit"]))
def test_easy_starts_the_same_jobs_whether_or_not_it_reports_its_plan(workload, allocator):
    machine, jobs = workload
    results = [
        Simulator(machine, jobs, make_dispatcher("easy", allocator, plan=plan), WallTime()).run()
        for plan in (True, False)
    ]
    assert results[0].jobs.start.tolist() == results[1].jobs.start.tolist()


class DepthOne:
    """Conservative backfilling's code at reservation depth 1, which must be EASY."""

    name = "depth-one"

    def __init__(self, allocator):
        self.allocator = make_allocator(allocator)

    def decide(self, snapshot, durations):
        plan = backfill_with_depth(snapshot, durations, list(snapshot.queued), self.allocator, 1)
        return Decision(starts=tuple(plan.starts), planned=plan.planned)


def starts_of(machine, jobs, dispatcher):
    sim = Simulator(machine, jobs, dispatcher, WallTime(), SimulatorOptions(validate=True))
    return sim.run().jobs.start.tolist()


@common
@given(workloads(), st.sampled_from(["first-fit", "best-fit"]))
def test_the_reservation_profile_at_depth_one_starts_every_job_when_easy_does(workload, allocator):
    machine, jobs = workload
    easy = make_dispatcher("easy", allocator, plan=False)
    assert starts_of(machine, jobs, DepthOne(allocator)) == starts_of(machine, jobs, easy)


@common
@given(workloads(), st.integers(2, 30), st.sampled_from(["first-fit", "best-fit"]))
def test_conservative_backfilling_runs_every_job_once_within_capacity(workload, depth, allocator):
    machine, jobs = workload
    dispatcher = make_dispatcher("easy", allocator, backfill_depth=depth)
    starts = starts_of(machine, jobs, dispatcher)  # validated call by call
    assert all(s >= j.job.submit for s, j in zip(starts, jobs, strict=True))


@common
@given(
    workloads(exact_estimates=True),
    st.sampled_from(["fcfs", "easy"]),
    st.sampled_from([None, 1]),
    st.integers(1, 100),
    st.sampled_from([0, 120]),
)
def test_trial_runs_lose_no_job_and_break_no_guarantee(
    workload, dispatcher, bound, seconds, requeue_delay
):
    # Jobs end by their limits (exact estimates): a start guarantee must hold, trials or not,
    # and whether a job put back may start again at once or (Slurm) two minutes later.
    machine, jobs = workload
    state = DispatcherState()
    tried = make_dispatcher(
        dispatcher,
        "first-fit",
        state=state,
        wait_bound=bound,
        wait_bound_depth=1,
        trial_runs=seconds,
    )
    options = SimulatorOptions(validate=True, requeue_delay=requeue_delay)
    result = Simulator(machine, jobs, tried, WallTime(), options).run()
    assert (result.jobs.start >= result.jobs.submit).all()
    assert (result.jobs.end == result.jobs.start + result.jobs.trace_run).all()
    assert not result.jobs.killed.any()
    trials = result.dispatch.trials or {"runs": 0, "ended": 0, "requeued": 0}
    assert trials["runs"] == trials["ended"] + trials["requeued"]
    assert trials["runs"] <= len(jobs)  # a job is tried once at most, delay or not
    assert state.guarantees_broken == 0
