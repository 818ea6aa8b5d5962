"""One replay from settings to files: load, simulate, summarise, write."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from cpsched.core.state import DispatcherState
from cpsched.errors import ConfigError, TraceError
from cpsched.predictor.base import Predictor
from cpsched.replay.instances import InstanceWriter, RecordingDispatcher, dump_path
from cpsched.replay.outputs import output_directory, write_outputs
from cpsched.replay.results import ReplayResult
from cpsched.replay.simulator import Progress, Simulator, SimulatorOptions
from cpsched.replay.swf import Trace, malformed_lines, read_header, read_swf
from cpsched.replay.system import System, load_system, system_from_header
from cpsched.runtime.policy import Policy

PredictorFactory = Callable[[Mapping[str, int]], Predictor]
"""Builds a replay's predictor from the replayed jobs' real run times (job id → s)."""


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """One replay: the policy under test and what to replay it on."""

    trace: Path
    out: Path
    policy: Policy = field(default_factory=Policy)
    system: Path | None = None
    jobs: int | None = None
    """Replay this many jobs (after cleaning; after ``skip_jobs``), or all of them."""
    skip_jobs: int = 0
    """Leave out the first N jobs (after cleaning): a slice of the trace, which starts
    with an empty machine and predictors that have learnt nothing."""
    warmup_fraction: float = 0.01
    requeue_delay: int = 0
    """Seconds a job a trial run put back waits before it may start again (the workload
    manager's: Slurm holds a requeued job back about 120 s, PBS not at all)."""
    validate: bool = False
    charge_decision_time: bool = False
    plots: bool = True
    timings: bool = True
    """False moves wall-clock figures to timings.json: summary.json is then reproducible."""
    dump_instances: Path | None = None
    """Directory to write every dispatch instance to (``replay/instances.py``), or None."""
    service: str | None = None
    """Base URL of a running service: it predicts and dispatches, over HTTP (the policy's
    dispatcher, allocator, predictor and correction are then the service's)."""
    token: str | None = None
    cluster: str = "replay"
    """The service's cluster name for this replay: a new one (the service would predict
    from a cluster's history); it is retired at the end unless ``keep_cluster``."""
    keep_cluster: bool = False
    strict: bool = False
    """Stop at the trace's first malformed line (a TraceError naming it) instead of leaving
    such lines out."""


def resolve_system(trace: Path, system: Path | None) -> System:
    """The system file if given, else the machine the SWF header describes."""
    if system is not None:
        return load_system(system)
    return system_from_header(read_header(trace), trace.name)


def simulate(
    settings: ReplaySettings,
    *,
    machine: System | None = None,
    on_loaded: Progress | None = None,
    progress: Progress | None = None,
    make_predictor: PredictorFactory | None = None,
) -> ReplayResult:
    """Replay ``settings.trace`` in memory; ``on_loaded`` is told how many jobs will be
    replayed, then ``progress`` how many have finished. ``machine`` is the system already
    loaded from ``settings.system`` (a sweep loads it once where the grid is read, and
    its workers need not have the file); by default it is loaded here.
    ``make_predictor`` builds the predictor from the replayed jobs' real run times, in
    place of the policy's (benchmarks that study what predictions are worth,
    ``bench/prediction_gap.py``); the summary then names it."""
    policy = settings.policy
    system = machine or resolve_system(settings.trace, settings.system)
    correction = policy.correction_policy(system.max_time_limit)
    state = DispatcherState()
    dispatcher = policy.make_dispatcher(
        plan=False, system_cap=system.max_time_limit, state=state, replay=True
    )
    trace = _read_slice(settings, system)
    if make_predictor is None:
        oracle = policy.predictor == "oracle"
        run_times = {tj.job.id: tj.run_time for tj in trace.jobs} if oracle else None
        predictor = policy.make_predictor(run_times=run_times)
    else:
        predictor = make_predictor({tj.job.id: tj.run_time for tj in trace.jobs})
    predictor_name = policy.predictor if make_predictor is None else predictor.name
    if on_loaded is not None:
        on_loaded(len(trace.jobs))
    simulator_options = SimulatorOptions(
        validate=settings.validate,
        charge_decision_time=settings.charge_decision_time,
        limits=policy.limits,
        extension_lead=None if correction.kind == "off" else correction.lead,
        site_priority=policy.priority == "site",
        requeue_delay=settings.requeue_delay,
    )
    writer = None
    if settings.dump_instances is not None:
        path = dump_path(settings.dump_instances, settings.trace.name, policy.dispatcher)
        meta = {"trace": settings.trace.name, "dispatcher": policy.dispatcher}
        writer = InstanceWriter(path, system.resource_names, system.nodes, meta)
        dispatcher = RecordingDispatcher(dispatcher, writer)
    remote = None
    if settings.service is not None:
        # Only a replay through a service needs the HTTP client (18 MB of a replay's
        # peak RSS, and its start-up).
        from cpsched.replay.remote import RemoteScheduler

        remote = RemoteScheduler(
            settings.service,
            settings.cluster,
            token=settings.token,
            retire=not settings.keep_cluster,
        )
        dispatcher = predictor = remote
    simulator = Simulator(
        system,
        trace.jobs,
        dispatcher,
        predictor,
        simulator_options,
        progress=progress,
        overrun=policy.overrun,
        state=state,
    )
    try:
        result = simulator.run()
    finally:
        if writer is not None:
            writer.close()
        if remote is not None:
            remote.close()
    result.settings.update(
        {
            "trace": settings.trace.name,
            "system": system.source,
            "nodes": len(system.nodes),
            "resources": dict(zip(system.resource_names, result.series.capacity, strict=True)),
            "dispatcher": policy.dispatcher,
            "allocator": policy.allocator,
            "predictor": predictor_name,
            "limits": policy.limits,
            "correction": {
                "policy": correction.kind,
                "step_s": correction.step,
                "lead_s": correction.lead,
                "cap_s": correction.cap,
            },
            "cp": _cp_settings(policy),
            # The whole policy, every field by its one name: enough to replay it again.
            "policy": policy.model_dump(),
            "jobs_limit": settings.jobs,
            "jobs_skipped": settings.skip_jobs,
            "charge_decision_time": settings.charge_decision_time,
            "service": (
                None
                if settings.service is None
                else {"url": settings.service, "cluster": settings.cluster}
            ),
            "cleaning": {
                "lines": trace.report.lines,
                "kept": trace.report.kept,
                "counts": trace.report.counts,
                "malformed_lines": malformed_lines(trace.report),
            },
        }
    )
    return result


def _read_slice(settings: ReplaySettings, system: System) -> Trace:
    """The jobs ``settings`` asks for: ``jobs`` of them after the first ``skip_jobs``."""
    if settings.skip_jobs < 0:
        raise ConfigError(f"the jobs to skip must be >= 0, got {settings.skip_jobs}")
    limit = None if settings.jobs is None else settings.skip_jobs + settings.jobs
    trace = read_swf(settings.trace, system, limit=limit, strict=settings.strict)
    if settings.skip_jobs:
        trace = replace(trace, jobs=trace.jobs[settings.skip_jobs :])
    if not trace.jobs:
        skipped = f", all within the {settings.skip_jobs} skipped" if settings.skip_jobs else ""
        raise TraceError(
            f"no job of {settings.trace} can be replayed: {trace.report.lines} job lines, "
            f"{trace.report.kept} kept{skipped}; left out by rule: {trace.report.counts}"
        )
    return trace


def _cp_settings(policy: Policy) -> dict[str, object] | None:
    """The CP options of the replay, for its summary (None for the heuristics)."""
    search = policy.search_config(replay=True)
    if search is None:
        return None
    return {
        "deadline_s": policy.deadline if search.wall_clock else None,
        "limited_by": "work" if search.deterministic else "wall time",
        "first_limit": search.initial_limit,
        "patience": policy.cp_patience,
        "reserve_after_s": policy.cp_reserve_after or None,
        "reuse": policy.cp_reuse,
        "search_cap": policy.cp_search_cap,
    }


def run_replay(
    settings: ReplaySettings,
    *,
    on_loaded: Progress | None = None,
    progress: Progress | None = None,
    make_predictor: PredictorFactory | None = None,
) -> dict[str, object]:
    """Replay ``settings.trace``, write every output under ``settings.out``, return the
    summary (``make_predictor``: as :func:`simulate`)."""
    output_directory(settings.out)  # before the replay, not after it
    # The trace's job objects are gone once simulate() returns: the outputs (Arrow
    # tables, plots) are built in the memory they held.
    result = simulate(
        settings, on_loaded=on_loaded, progress=progress, make_predictor=make_predictor
    )
    return write_replay(result, settings)


def write_replay(result: ReplayResult, settings: ReplaySettings) -> dict[str, object]:
    """Write ``result``'s outputs as ``settings`` asks; return the summary."""
    return write_outputs(
        result,
        settings.out,
        warmup_fraction=settings.warmup_fraction,
        timings=settings.timings,
        plots=settings.plots,
    )
