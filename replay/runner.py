"""One replay from settings to files: load, simulate, summarise, write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from cpsched.core import make_dispatcher
from cpsched.core.correction import correction_policy
from cpsched.core.registry import CP_DISPATCHERS
from cpsched.errors import ConfigError, TraceError, UnknownPolicyError
from cpsched.predictor.registry import PREDICTORS, make_predictor
from cpsched.replay.instances import InstanceWriter, RecordingDispatcher, dump_path
from cpsched.replay.outputs import write_outputs
from cpsched.replay.remote import RemoteScheduler
from cpsched.replay.results import ReplayResult
from cpsched.replay.simulator import Progress, Simulator, SimulatorOptions
from cpsched.replay.swf import read_header, read_swf
from cpsched.replay.system import System, load_system, system_from_header

if TYPE_CHECKING:
    from cpsched.core.cp import ModelConfig, SearchConfig

LimitPolicy = Literal["requested", "predicted"]
LIMITS: tuple[str, ...] = get_args(LimitPolicy)


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    trace: Path
    out: Path
    system: Path | None = None
    dispatcher: str = "easy"
    allocator: str = "first-fit"
    predictor: str = "wall-time"
    limits: LimitPolicy = "requested"
    correction: str = "off"
    correction_step: int = 3600
    correction_lead: int = 60
    cp_deadline: float = 2.0
    """Seconds a CP dispatcher may take per call before its fallback answers."""
    cp_limit: float = 1.0
    """First time limit of the CP search's restarts (doubling up to 16 times it)."""
    cp_patience: int = 2
    """Runs without improvement after which the CP search stops (the papers' k)."""
    cp_deterministic: bool = False
    """Limit CP searches by solver work instead of wall time: reproducible replays."""
    cp_reserve_after: int = 0
    """Seconds of waiting after which a CP dispatcher reserves for a job (0: never)."""
    cp_reuse: bool = False
    """Offer the previous call's plan order as a CP hint (``SearchConfig.reuse``)."""
    cp_search_cap: int | None = None
    """PCP3: answer with the greedy plan, unsearched, above this many x[i,n]
    (``SearchConfig.search_size_cap``)."""
    jobs: int | None = None
    warmup_fraction: float = 0.01
    validate: bool = False
    charge_decision_time: bool = False
    plots: bool = True
    timings: bool = True
    """False moves wall-clock figures to timings.json: summary.json is then reproducible."""
    dump_instances: Path | None = None
    """Directory to write every dispatch instance to (``replay/instances.py``), or None."""
    service: str | None = None
    """Base URL of a running service: it predicts and dispatches, over HTTP (the
    dispatcher, allocator, predictor and correction settings are then the service's)."""
    token: str | None = None
    cluster: str = "replay"
    """The service's cluster name for this replay (use a fresh one per replay: the
    service remembers every finished job it was sent)."""


def resolve_system(trace: Path, system: Path | None) -> System:
    """The system file if given, else the machine the SWF header describes."""
    if system is not None:
        return load_system(system)
    return system_from_header(read_header(trace), trace.name)


def cp_search(settings: ReplaySettings) -> SearchConfig | None:
    """The CP search settings, for CP dispatchers only (OR-Tools is not loaded otherwise)."""
    if settings.dispatcher not in CP_DISPATCHERS:
        return None
    if settings.cp_search_cap is not None and settings.dispatcher != "pcp3":
        raise ConfigError(
            f"--cp-search-cap applies to pcp3 only (it caps PCP3's model size), not "
            f"{settings.dispatcher}: drop it or use --dispatcher pcp3"
        )
    from cpsched.core.cp import SearchConfig

    return SearchConfig(
        initial_limit=settings.cp_limit,
        max_limit=16 * settings.cp_limit,
        patience=settings.cp_patience,
        deadline=settings.cp_deadline,
        deterministic=settings.cp_deterministic,
        reuse=settings.cp_reuse,
        search_size_cap=settings.cp_search_cap,
    )


def cp_model(settings: ReplaySettings) -> ModelConfig | None:
    """What goes into the CP models, for CP dispatchers only."""
    if settings.dispatcher not in CP_DISPATCHERS:
        return None
    from cpsched.core.cp import ModelConfig

    return ModelConfig(reserve_after=settings.cp_reserve_after or None)


def simulate(
    settings: ReplaySettings,
    *,
    on_loaded: Progress | None = None,
    progress: Progress | None = None,
) -> ReplayResult:
    """Replay ``settings.trace`` in memory; ``on_loaded`` is told how many jobs will be
    replayed, then ``progress`` how many have finished."""
    # Check the policy names first: a misspelt one should fail before a long trace read.
    if settings.predictor not in PREDICTORS:
        raise UnknownPolicyError("predictor", settings.predictor, PREDICTORS)
    if settings.limits not in LIMITS:
        raise UnknownPolicyError("limit policy", settings.limits, LIMITS)
    system = resolve_system(settings.trace, settings.system)
    # The partition's maximum caps extensions; without one, a week.
    correction = correction_policy(
        settings.correction,
        step=settings.correction_step,
        lead=settings.correction_lead,
        cap=system.max_time_limit or 7 * 86400,
    )
    dispatcher = make_dispatcher(
        settings.dispatcher,
        settings.allocator,
        plan=False,
        correction=correction,
        search=cp_search(settings),
        model=cp_model(settings),
    )
    trace = read_swf(settings.trace, system, limit=settings.jobs)
    if not trace.jobs:
        raise TraceError(
            f"no job of {settings.trace} can be replayed: {trace.report.lines} job lines, "
            f"skipped by rule: {trace.report.counts}"
        )
    if settings.predictor == "oracle":
        predictor = make_predictor(
            "oracle", run_times={tj.job.id: tj.run_time for tj in trace.jobs}
        )
    else:
        predictor = make_predictor(settings.predictor)
    if on_loaded is not None:
        on_loaded(len(trace.jobs))
    simulator_options = SimulatorOptions(
        validate=settings.validate,
        charge_decision_time=settings.charge_decision_time,
        limits=settings.limits,
        extension_lead=None if correction.kind == "off" else correction.lead,
    )
    writer = None
    if settings.dump_instances is not None:
        path = dump_path(settings.dump_instances, settings.trace.name, settings.dispatcher)
        meta = {"trace": settings.trace.name, "dispatcher": settings.dispatcher}
        writer = InstanceWriter(path, system.resource_names, system.nodes, meta)
        dispatcher = RecordingDispatcher(dispatcher, writer)
    remote = None
    if settings.service is not None:
        remote = RemoteScheduler(settings.service, settings.cluster, token=settings.token)
        dispatcher = predictor = remote
    simulator = Simulator(
        system, trace.jobs, dispatcher, predictor, simulator_options, progress=progress
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
            "dispatcher": settings.dispatcher,
            "allocator": settings.allocator,
            "predictor": settings.predictor,
            "limits": settings.limits,
            "correction": {
                "policy": correction.kind,
                "step_s": correction.step,
                "lead_s": correction.lead,
                "cap_s": correction.cap,
            },
            "cp": _cp_settings(settings),
            "jobs_limit": settings.jobs,
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
            },
        }
    )
    return result


def _cp_settings(settings: ReplaySettings) -> dict[str, object] | None:
    """The CP options of the replay, for its summary (None for the heuristics)."""
    if settings.dispatcher not in CP_DISPATCHERS:
        return None
    return {
        "deadline_s": settings.cp_deadline,
        "limit_s": settings.cp_limit,
        "patience": settings.cp_patience,
        "deterministic": settings.cp_deterministic,
        "reserve_after_s": settings.cp_reserve_after or None,
        "reuse": settings.cp_reuse,
        "search_cap": settings.cp_search_cap,
    }


def run_replay(
    settings: ReplaySettings,
    *,
    on_loaded: Progress | None = None,
    progress: Progress | None = None,
) -> dict[str, object]:
    """Replay ``settings.trace``, write every output under ``settings.out``, return the
    summary."""
    # The trace's job objects are gone once simulate() returns: the outputs (Arrow
    # tables, plots) are built in the memory they held.
    result = simulate(settings, on_loaded=on_loaded, progress=progress)
    return write_outputs(
        result,
        settings.out,
        warmup_fraction=settings.warmup_fraction,
        timings=settings.timings,
        plots=settings.plots,
    )
