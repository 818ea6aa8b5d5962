"""The simulator on hand-made traces whose results are worked out by hand."""

import itertools

import pytest

from cpsched.core import Decision, Node, make_dispatcher
from cpsched.predictor.walltime import WallTime
from cpsched.replay.metrics import summarise
from cpsched.replay.simulator import ReplayStalledError, Simulator, SimulatorOptions
from cpsched.replay.swf import TraceJob
from cpsched.replay.system import System
from tests.factories import job


def system(*cpus: int) -> System:
    return System(
        name="test",
        resource_names=("cpu",),
        nodes=tuple(Node(f"n{i}", (c,)) for i, c in enumerate(cpus)),
    )


def trace_job(id, submit, procs, limit, run):
    return TraceJob(job=job(id, submit=submit, limit=limit, units=procs), run_time=run, status=1)


# Worked by hand, 4 cores: a holds 3 cores 0–100; b (2 cores) cannot start before 100.
# FCFS: c and d wait behind b until 100.  EASY: b is reserved at 100; c (ends by 52) is
# backfilled at 2; d (limit 200) is backfilled at 42 on the 1 core that stays spare at 100
# (4 free then, b takes 2), and ends at 52.
HAND_TRACE = [
    trace_job("a", 0, 3, 100, 100),
    trace_job("b", 1, 2, 50, 50),
    trace_job("c", 2, 1, 50, 40),
    trace_job("d", 3, 1, 200, 10),
]
# More demand than 4 or 8 cores hold at once: not every call is one where the heuristic
# already starts every job (the CP dispatchers answer those without a model).
CROWDED_TRACE = [trace_job(f"j{i}", i // 4, 1 + i % 3, 100, 20 + 7 * i) for i in range(10)]
EXPECTED = {
    "fcfs": {"start": [0, 100, 100, 100], "end": [100, 150, 140, 110]},
    "sjf": {"start": [0, 100, 100, 100], "end": [100, 150, 140, 110]},
    "easy": {"start": [0, 100, 2, 42], "end": [100, 150, 42, 52]},
}


def replay(trace, dispatcher="easy", machine=None, **options):
    sim = Simulator(
        machine or system(4),
        trace,
        make_dispatcher(dispatcher, "first-fit"),
        WallTime(),
        SimulatorOptions(validate=True, **options),
    )
    return sim.run()


@pytest.mark.parametrize("dispatcher", sorted(EXPECTED))
def test_hand_made_trace(dispatcher):
    result = replay(HAND_TRACE, dispatcher)
    assert result.jobs.start.tolist() == EXPECTED[dispatcher]["start"]
    assert result.jobs.end.tolist() == EXPECTED[dispatcher]["end"]
    assert not result.jobs.killed.any()


def test_series_records_queue_and_usage_after_each_call():
    result = replay(HAND_TRACE, "easy")
    # Calls at 0 (a starts), 1 (b waits), 2 (c backfilled), 3 (d waits), 42 (d starts),
    # 52 (b still waits), 100 (b starts); none at 150, when nobody waits.
    assert result.dispatch.time.tolist() == [0, 1, 2, 3, 42, 52, 100]
    assert len(result.dispatch.wall_ms) == 7
    # The series samples every event, 150 (b ends, nobody waits) included.
    assert result.series.time.tolist() == [0, 1, 2, 3, 42, 52, 100, 150]
    assert result.series.queue_length.tolist() == [0, 1, 1, 2, 1, 1, 0, 0]
    assert result.series.used[:, 0].tolist() == [3, 3, 4, 4, 4, 3, 2, 0]


def test_utilisation_agrees_with_the_work_the_jobs_did():
    from cpsched.replay.metrics import summarise

    summary = summarise(replay(HAND_TRACE, "easy"), warmup_fraction=0)
    # Σ procs · run = 3·100 + 2·50 + 1·40 + 1·10 = 450 core-s over 4 cores × 150 s.
    assert summary["utilisation"] == {"cpu": round(450 / 600, 6)}


def test_decision_time_can_be_charged_to_the_simulated_clock():
    ticks = itertools.count(0.0, 1.0)  # every decision takes exactly one second
    sim = Simulator(
        system(4),
        [trace_job("a", 0, 4, 10, 10), trace_job("b", 0, 4, 10, 10)],
        make_dispatcher("fcfs", "first-fit"),
        WallTime(),
        SimulatorOptions(charge_decision_time=True),
        clock=lambda: next(ticks),
    )
    result = sim.run()
    # a starts once the first decision is ready (1), ends at 11; b likewise at 12.
    assert result.jobs.start.tolist() == [1, 12]


def test_the_waits_of_the_jobs_started_are_recorded_in_the_dispatchers_state():
    from cpsched.core.state import DispatcherState, RecentWaits

    state = DispatcherState(recent_waits=RecentWaits())  # as a bound with overdue jobs asks
    Simulator(
        system(4),
        HAND_TRACE,
        make_dispatcher("easy", "first-fit", state=state),
        WallTime(),
        state=state,
    ).run()
    # EASY's starts (EXPECTED): a at 0, c at 2, d at 42, b at 100; in start order.
    assert list(state.recent_waits.waits) == [0, 0, 42 - 3, 100 - 1]


def test_the_ends_of_the_jobs_are_recorded_in_todays_schedule():
    """The real cluster runs FCFS; today's EASY, run beside, learns each real end as the
    simulator applies it (``Cluster.finished``), never earlier."""
    from cpsched.core.state import DispatcherState

    # a's real end (60, before its limit) reaches the schedule at 60: b starts there at 60.
    # c (backfilled at 2) and d have not run for real yet: the schedule runs c to its
    # limit (52), when d is backfilled.
    trace = [
        trace_job("a", 0, 3, 100, 60),
        trace_job("b", 1, 2, 50, 50),
        trace_job("c", 2, 1, 50, 40),
        trace_job("d", 3, 1, 200, 10),
    ]
    state = DispatcherState()
    real = make_dispatcher("fcfs", "first-fit", state=state, wait_bound_today=10**6)
    today_starts: dict[str, int] = {}

    class Watching:
        name = real.name

        def decide(self, snapshot, durations):
            decision = real.decide(snapshot, durations)
            assert state.today_schedule is not None
            today_starts.update((i, rj.start) for i, rj in state.today_schedule.running.items())
            return decision

    result = Simulator(system(4), trace, Watching(), WallTime(), state=state).run()
    assert result.jobs.start.tolist() == [0, 60, 60, 60]  # FCFS, unchanged by the schedule
    assert today_starts == {"a": 0, "c": 2, "d": 52, "b": 60}


class NeverStarts:
    name = "never"

    def decide(self, snapshot, durations):
        return Decision(starts=())


def test_a_dispatcher_that_leaves_an_idle_machine_idle_is_reported():
    sim = Simulator(system(4), HAND_TRACE, NeverStarts(), WallTime())
    with pytest.raises(ReplayStalledError, match="4 jobs wait"):
        sim.run()


class FixedPredictor:
    """Predicts the same duration for every job (clamped to its limit)."""

    name = "fixed"

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        self.observed: list[str] = []

    def observe(self, finished):
        self.observed.append(finished.job.id)

    def predict(self, job, t):
        return min(self.seconds, job.time_limit)


def replay_with_limits(trace, predictor, correction="off", lead=60, step=3600):
    from cpsched.core.correction import CorrectionPolicy

    policy = CorrectionPolicy(correction, step=step, lead=lead, cap=10_000)
    sim = Simulator(
        system(4),
        trace,
        make_dispatcher("easy", "first-fit", correction=policy),
        predictor,
        SimulatorOptions(
            validate=True,
            limits="predicted",
            extension_lead=None if correction == "off" else lead,
        ),
    )
    return sim.run()


def test_predicted_limits_without_correction_kill_underestimated_jobs():
    # Predicted 100 s; "long" runs 500 s of its 1000 s request: killed at 100.
    trace = [trace_job("long", 0, 1, 1000, 500), trace_job("short", 0, 1, 1000, 80)]
    predictor = FixedPredictor(100)
    result = replay_with_limits(trace, predictor)
    assert result.jobs.killed.tolist() == [True, False]
    assert result.jobs.end.tolist() == [100, 80]
    assert predictor.observed == ["short"]  # a killed job's run time is censored


def test_simple_correction_extends_in_steps_and_kills_nobody():
    trace = [trace_job("long", 0, 1, 1000, 500)]
    result = replay_with_limits(trace, FixedPredictor(100), "simple", lead=10, step=150)
    # Limits 100 → 250 → 400 → 550: three extensions, each 10 s before the limit.
    assert not result.jobs.killed.any()
    assert result.jobs.end.tolist() == [500]
    assert result.dispatch.extensions == 3
    assert result.dispatch.time.tolist() == [0, 90, 240, 390]


def test_correction_stops_at_the_cap_and_the_job_is_killed_there():
    # Cap 10 000 s; power steps 900 · 2^k from a 100 s prediction never reach 20 000 s.
    trace = [trace_job("huge", 0, 1, 30_000, 20_000)]
    result = replay_with_limits(trace, FixedPredictor(100), "power")
    assert result.jobs.killed.tolist() == [True]
    assert result.jobs.end.tolist() == [10_000]


def test_requested_limits_never_kill_even_when_runs_exceed_them():
    # The trace says this job ran 150 s on a 100 s request: it did, so it is not killed.
    result = replay([trace_job("over", 0, 1, 100, 150)])
    assert result.jobs.killed.tolist() == [False]
    assert result.jobs.end.tolist() == [150]


def test_fallbacks_are_counted_with_their_reasons():
    # A CP deadline too short for anything: every modelled call falls back to EASY.
    from cpsched.core.cp import SearchConfig, make_cp_dispatcher

    hcp3 = make_cp_dispatcher("hcp3", "best-fit", search=SearchConfig(deadline=1e-9, margin=0))
    result = Simulator(system(4), CROWDED_TRACE, hcp3, WallTime(), SimulatorOptions()).run()
    reasons = result.dispatch.fallback_reasons
    assert result.dispatch.fallbacks > 0
    assert sum(reasons.values()) == result.dispatch.fallbacks
    assert set(reasons) == {"no time left for prepare"}


def test_progress_is_told_as_time_passes_not_every_few_thousand_jobs():
    trace = [trace_job(f"j{i}", i, 1, 10, 5) for i in range(100)]
    ticks = itertools.count()
    told: list[int] = []
    sim = Simulator(
        system(4),
        trace,
        make_dispatcher("easy", "first-fit"),
        WallTime(),
        progress=told.append,
        clock=lambda: float(next(ticks)),  # a second per reading: always time to tell
    )
    sim.run()
    assert told[-1] == 100 and told == sorted(told)
    assert len(told) >= 100 // 16  # every 16 finished jobs, as the clock allows
    quiet: list[int] = []
    Simulator(
        system(4), trace, make_dispatcher("easy", "first-fit"), WallTime(), progress=quiet.append
    ).run()
    assert quiet[-1] == 100


def replay_with_trials(trace: list, requeue_delay: int = 0):
    """``trace`` on 4 cores, FCFS with 60 s trials, every decision validated."""
    dispatcher = make_dispatcher("fcfs", "first-fit", trial_runs=60)
    options = SimulatorOptions(validate=True, requeue_delay=requeue_delay)
    return Simulator(system(4), trace, dispatcher, WallTime(), options).run()


def test_a_trial_ends_the_short_job_and_puts_the_long_one_back_in_its_place():
    # 4 cores, FCFS: `b` waits for all 4 until `a` ends at 1,000, and `c`, `d` behind it.
    # `c` (30 s) is tried at 2 on the idle core and has run by 32; `d` (200 s) is tried at
    # 40, goes back to the queue at 100 (not tried again) and starts after `b`, at 1,100.
    trace = [
        trace_job("a", 0, 3, 1000, 1000),
        trace_job("b", 1, 4, 100, 100),
        trace_job("c", 2, 1, 500, 30),
        trace_job("d", 40, 1, 500, 200),
    ]
    result = replay_with_trials(trace)
    assert result.jobs.start.tolist() == [0, 1000, 2, 1100]
    assert result.jobs.end.tolist() == [1000, 1100, 32, 1300]
    assert result.jobs.predicted[2] == 500  # its prediction at its start: its limit
    assert not result.jobs.killed.any()
    trials = {"runs": 2, "ended": 1, "requeued": 1, "requeued_cpu_s": 60}
    assert result.dispatch.trials == trials
    assert summarise(result)["trial_runs"] == trials


@pytest.mark.parametrize(("delay", "d_starts"), [(0, 150), (120, 220)])
def test_a_job_put_back_waits_the_requeue_delay_before_it_starts_again(delay, d_starts):
    # 4 cores, FCFS: `a` holds 3 until 150, `b` (2 cores) waits for it; `d` (1 core, 200 s)
    # is tried at 40 on the idle core and goes back at 100. At 150 `b` starts, and `d`
    # with it, unless the workload manager holds it back until 100 + delay.
    trace = [
        trace_job("a", 0, 3, 150, 150),
        trace_job("b", 1, 2, 100, 100),
        trace_job("d", 40, 1, 500, 200),
    ]
    result = replay_with_trials(trace, delay)
    assert result.jobs.start.tolist() == [0, 150, d_starts]
    assert result.jobs.end.tolist() == [150, 250, d_starts + 200]
    counts = {"runs": 1, "ended": 0, "requeued": 1, "requeued_cpu_s": 60}
    assert result.dispatch.trials == ({**counts, "requeue_delay_s": delay} if delay else counts)


def test_a_job_put_back_is_not_tried_again_once_its_delay_has_passed():
    # `a` holds 3 of 4 cores until 1,000 and `b` waits for all 4: the fourth stays idle.
    # `d` is tried at 40, put back at 100, waits again from 220, and is not tried again.
    trace = [
        trace_job("a", 0, 3, 1000, 1000),
        trace_job("b", 1, 4, 100, 100),
        trace_job("d", 40, 1, 500, 200),
    ]
    result = replay_with_trials(trace, 120)
    assert result.jobs.start.tolist() == [0, 1000, 1100]
    assert result.dispatch.trials is not None and result.dispatch.trials["runs"] == 1


def test_a_replay_without_trials_says_nothing_of_them():
    result = replay(HAND_TRACE)
    assert result.dispatch.trials is None
    assert "trial_runs" not in summarise(result)
