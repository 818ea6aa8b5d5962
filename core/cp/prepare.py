"""Prepare step of the CP dispatchers: everything computed before a model is built.

Plain functions from a snapshot to small frozen dataclasses (the papers' definitions): priorities,
the reductions, the m-job window, time units, the horizon and the objective weights.
Model times are in *units* of ``ModelConfig.time_unit`` seconds counted from the
dispatching time ``t``, so a start variable's value 0 means "start now" and numbers stay
small whatever the epoch of ``t``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cpsched.core.capacity import FreeCapacity, distinct_rows, placeable_units, units_fitting
from cpsched.core.durations import Durations, remaining
from cpsched.core.problem import Amounts, Job, Snapshot
from cpsched.errors import ConfigError


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """What goes into a CP model. Defaults follow the papers unless noted.

    * ``window`` — m, the number of queued jobs (by priority) in the model (the papers': 100).
    * ``time_unit`` — seconds per model time unit. Durations and remaining times are
      rounded *up* to whole units (a job never looks shorter than it is), so plans stay
      feasible in seconds; decisions are unchanged for jobs whose durations are exact
      multiples of the unit. A running job past its expected end holds at least one unit
      (the underestimation fix). 1 s by default: CP-SAT bounds domains by intervals, so a
      fine unit costs little; coarser units help the node-level models.
    * ``weight_scale`` — the objective weight of the shortest job in the window; a job
      ``k`` times longer weighs ``round(weight_scale / k)`` (at least 1). With 1000, the
      weights of jobs within 100x of the shortest are exact to 5%, and longer jobs, whose
      weights round coarsely, contribute under 1/1000 of the shortest job's per unit of
      delay. Objective values stay below ``window * weight_scale * horizon``.
    * ``reserve_above`` — anti-starvation guard (beyond the papers): the highest-priority
      job whose priority (its slowdown if started now) is at least this value gets a
      reservation like EASY's head job: it is modelled even if it cannot start now, its
      start is bounded by the earliest time its units can be placed, and jobs started now
      must leave that reservation intact (it takes the window's last place if it is not
      among the first ``window`` jobs). ``None`` turns this trigger off, and with
      ``reserve_after`` also None the guard is off; then a big job
      that never fits in what is free at ``t`` is never modelled and can starve behind a
      stream of small ones (see ``tests/core/cp/test_starvation.py``).
    * ``reserve_after`` — the guard's second trigger, in seconds of waiting: the
      longest-waiting job that has waited at least this long gets the reservation first.
      A slowdown threshold alone reaches long jobs late (a 5-hour job passes slowdown 10
      only after 45 h in the queue): on the whole KTH trace HCP3's maximum wait was 1.27
      million s against EASY's 0.46. Off (None) by default because it costs mean
      slowdown: HCP3 on whole KTH, mean bounded slowdown 119.5 off, 150.2 at 6 h, 161.4
      at 24 h (EASY 204.9); maximum wait 1.27, 0.57 and 0.59 million s; long jobs' mean
      wait +49%, +17%, +51% against EASY (docs/results/cp-dispatchers.md).
    """

    window: int = 100
    time_unit: int = 1
    weight_scale: int = 1000
    reserve_above: float | None = 10.0
    reserve_after: int | None = None
    site_order: bool = False
    """Take the window in the site's priority order (``Job.priority``), slowdown
    priority breaking ties; the objective stays total weighted slowdown. False: slowdown
    priority alone, as the papers."""

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ConfigError(f"model window must be >= 1 job, got {self.window}")
        if self.time_unit < 1:
            raise ConfigError(f"model time unit must be >= 1 s, got {self.time_unit}")
        if self.weight_scale < 1:
            raise ConfigError(f"objective weight scale must be >= 1, got {self.weight_scale}")
        if self.reserve_above is not None and self.reserve_above < 1.0:
            raise ConfigError(
                f"reserve_above is a slowdown and must be >= 1 (or None), got {self.reserve_above}"
            )
        if self.reserve_after is not None and self.reserve_after < 1:
            raise ConfigError(
                f"reserve_after is a wait in seconds and must be >= 1 (or None), "
                f"got {self.reserve_after}"
            )


def duration(durations: Durations, job_id: str) -> int:
    """``d_i``, at least 1 s: predictors promise that, but a zero would divide by zero."""
    d = durations[job_id]
    return d if d > 1 else 1


def priorities(queued: Sequence[Job], durations: Durations, now: int) -> dict[str, float]:
    """``prio_i = (t − q_i + d_i) / d_i``, the slowdown if the job started now."""
    prios: dict[str, float] = {}
    for job in queued:
        d = duration(durations, job.id)
        prios[job.id] = (now - job.submit + d) / d
    return prios


def priority_order(
    queued: Sequence[Job], prios: Mapping[str, float], durations: Durations
) -> list[Job]:
    """Highest priority first; ties: smaller ``d_i · Σ_r req[i,r]`` (the papers' rule),
    then queue order."""
    position = {job.id: i for i, job in enumerate(queued)}
    return sorted(
        queued,
        key=lambda j: (-prios[j.id], duration(durations, j.id) * sum(j.request), position[j.id]),
    )


def startable_now(order: Sequence[Job], free: FreeCapacity) -> tuple[list[Job], list[Job]]:
    """Split jobs into those whose units fit on the nodes' free capacity at ``t`` and the rest.

    The papers' reduction drops a job whose request the resources free at ``t`` cannot meet.
    This checks it node by node (after the cheap per-type totals), not only on the
    pooled totals: a job that fits the pool but no set of real nodes would be planned at
    ``t`` by the pooled model and then postponed by the allocator, pushing back the jobs
    that could really start.
    """
    fit: list[Job] = []
    dropped: list[Job] = []
    # Units that fit depend on the unit's request only, and most jobs share a few: count
    # once per request (Curie: 5,544 nodes, up to hundreds of queued jobs).
    placeable: dict[tuple[tuple[int, int], ...], int] = {}
    rows: list[tuple[Amounts, int]] | None = None
    for job in order:
        ok = free.fits_total(job.request)
        if ok:
            units = placeable.get(job.wanted)
            if units is None:
                rows = distinct_rows(free) if rows is None else rows
                units = placeable[job.wanted] = placeable_units(rows, job)
            ok = units >= job.units
        (fit if ok else dropped).append(job)
    return fit, dropped


def fits_idle_machine(job: Job, snapshot: Snapshot) -> bool:
    """Whether the job's units could be placed at all, on the machine with nothing running."""
    wanted = job.wanted
    return sum(units_fitting(n.capacity, wanted) for n in snapshot.nodes) >= job.units


def modelled_types(jobs: Sequence[Job]) -> tuple[int, ...]:
    """Resource types some modelled job requests; no constraint is posted for the others."""
    return tuple(sorted({r for job in jobs for r, _ in job.wanted}))


def to_units(seconds: int, unit: int) -> int:
    """Seconds → model units, rounded up (a duration never shrinks)."""
    return -(-seconds // unit)


def objective_weights(seconds: Sequence[int], scale: int) -> list[int]:
    """Integer weights ∝ ``1/d_i``: the shortest job gets ``scale`` (see ``ModelConfig``)."""
    if not seconds:
        return []
    shortest = min(seconds)
    return [max(1, round(scale * shortest / d)) for d in seconds]


@dataclass(frozen=True, slots=True)
class Load:
    """Running jobs releasing together: ``demand`` (per modelled type) is held for
    ``length`` units from ``t``. Merging jobs by release time keeps one fixed interval per
    distinct end instead of one per running job, with the same resource profile."""

    length: int
    demand: Amounts


@dataclass(frozen=True, slots=True)
class ModelJob:
    job: Job
    duration: int
    """``d_i`` in seconds."""
    length: int
    """``d_i`` in model units (rounded up)."""
    demand: Amounts
    """``req[i,r]`` for each modelled type, aligned with ``Prepared.types``."""
    priority: float
    weight: int
    latest: int | None = None
    """Upper bound on the start (units from ``t``) for the guarded job, else None."""


@dataclass(frozen=True, slots=True)
class Prepared:
    time: int
    time_unit: int
    types: tuple[int, ...]
    """Modelled resource types, as indices into ``Snapshot.resource_names``."""
    capacity: Amounts
    """Machine total of each modelled type (the pooled cumulative's capacity)."""
    jobs: tuple[ModelJob, ...]
    """The window, in priority order."""
    running: tuple[Load, ...]
    horizon: int
    """``eoh − t`` in units: the latest start any modelled job may get."""
    dropped: tuple[str, ...]
    """Queued jobs that cannot start at ``t`` (they stay queued, unmodelled)."""
    beyond_window: tuple[str, ...]
    """Startable jobs left out because the window was full (they stay queued)."""


def running_loads(
    snapshot: Snapshot, durations: Durations, types: Sequence[int], unit: int
) -> tuple[tuple[Load, ...], int]:
    """The running jobs' usage of ``types``, merged by release; and ``Σ rem_i`` in units."""
    by_end: dict[int, list[int]] = {}
    total = 0
    now = snapshot.time
    for rj in snapshot.running:
        demand = [rj.job.request[r] for r in types]
        length = to_units(remaining(rj, durations[rj.job.id], now), unit)
        total += length
        if not any(demand):
            continue
        acc = by_end.setdefault(length, [0] * len(types))
        for k, amount in enumerate(demand):
            acc[k] += amount
    loads = tuple(Load(length, tuple(by_end[length])) for length in sorted(by_end))
    return loads, total


def prepare(
    snapshot: Snapshot,
    durations: Durations,
    config: ModelConfig,
    order: Sequence[Job],
    prios: Mapping[str, float],
    guard: tuple[Job, int] | None = None,
) -> Prepared:
    """Reduce, window and scale the instance. ``order`` is ``priority_order`` of the queue;
    ``guard`` is the protected job and the absolute time by which it can start.

    The window is taken after the reduction, so it holds the ``m`` highest-priority jobs
    that can start now, not fewer because jobs that cannot were among the first ``m``.
    """
    now, unit = snapshot.time, config.time_unit
    fit, dropped = startable_now(order, FreeCapacity.of(snapshot))
    latest: dict[str, int] = {}
    if guard is not None:
        job, start_by = guard
        latest[job.id] = to_units(start_by - now, unit)
        if job not in fit:
            rank = {j.id: i for i, j in enumerate(order)}
            fit = sorted([job, *fit], key=lambda j: rank[j.id])
            dropped = [j for j in dropped if j.id != job.id]
    window, beyond = fit[: config.window], fit[config.window :]
    if guard is not None and guard[0] in beyond:
        # The wait trigger can protect a low-priority job: it takes the window's last
        # place, since outside the model its reservation would hold nowhere (PCP3 and
        # PCP'20 keep it only through the model's bound).
        protected = guard[0]
        beyond = [window[-1], *(j for j in beyond if j is not protected)]
        window = [*window[:-1], protected]
    types = modelled_types(window)
    seconds = [duration(durations, j.id) for j in window]
    weights = objective_weights(seconds, config.weight_scale)
    jobs = tuple(
        ModelJob(
            job=j,
            duration=d,
            length=to_units(d, unit),
            demand=tuple(j.request[r] for r in types),
            priority=prios[j.id],
            weight=w,
            latest=latest.get(j.id),
        )
        for j, d, w in zip(window, seconds, weights, strict=True)
    )
    loads, running_total = running_loads(snapshot, durations, types, unit)
    return Prepared(
        time=now,
        time_unit=unit,
        types=types,
        capacity=tuple(snapshot.capacity_total[r] for r in types),
        jobs=jobs,
        running=loads,
        # End of horizon: eoh = t + Σ_running rem_i + Σ_queued d_i (modelled jobs only).
        horizon=running_total + sum(j.length for j in jobs),
        dropped=tuple(j.id for j in dropped),
        beyond_window=tuple(j.id for j in beyond),
    )
