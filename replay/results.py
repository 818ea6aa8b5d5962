"""What a finished replay hands over: per-job records, a time series and dispatch stats.

This is the contract between the simulator and the reporting code (``replay.metrics``,
``replay.outputs``, ``replay.plots``). Everything is columnar numpy so that a replay of
several hundred thousand jobs costs tens of megabytes, not the gigabytes a list of
dicts would. The ``from_columns`` builders accept Python lists (or ``array.array``) and
exist for tests and for simulators that append to growable buffers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from cpsched.errors import InputError

_JOB_INT_COLUMNS = ("submit", "start", "end", "trace_run", "requested", "procs", "predicted")


def _ids(values: ArrayLike) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    # Fixed-width unicode arrays would pad every id to the longest one; objects do not.
    return arr.astype(object, copy=False)


@dataclass(eq=False)
class JobRecords:
    """One entry per replayed job, in submission order; all arrays have equal length."""

    job_id: np.ndarray
    """``str`` (object) or ``int64``; written as the string column ``job_id``."""
    submit: np.ndarray
    start: np.ndarray
    end: np.ndarray
    """``start`` + what the job actually ran; a killed job ends at its limit."""
    trace_run: np.ndarray
    """The run time the trace recorded (>= 1 s)."""
    requested: np.ndarray
    """The original requested time limit."""
    procs: np.ndarray
    """Total cpu: units times per-unit cpu."""
    killed: np.ndarray
    predicted: np.ndarray
    """``d_i`` the dispatcher used at start; equals ``requested`` for the wall-time approach."""
    efficiency: np.ndarray | None = None
    """float64 resource allocation efficiency at start (thesis eq. 2.7, see
    ``replay.simulator``); None when the producer did not measure it."""

    def __post_init__(self) -> None:
        n = len(self.job_id)
        if self.efficiency is not None and len(self.efficiency) != n:
            raise InputError(f"JobRecords.efficiency has {len(self.efficiency)} entries, not {n}")
        for name in (*_JOB_INT_COLUMNS, "killed"):
            if len(getattr(self, name)) != n:
                raise InputError(
                    f"JobRecords.{name} has {len(getattr(self, name))} entries, job_id has {n}"
                )

    def __len__(self) -> int:
        return len(self.job_id)

    @classmethod
    def from_columns(
        cls,
        *,
        job_id: ArrayLike,
        submit: ArrayLike,
        start: ArrayLike,
        end: ArrayLike,
        trace_run: ArrayLike,
        requested: ArrayLike,
        procs: ArrayLike,
        killed: ArrayLike,
        predicted: ArrayLike,
    ) -> JobRecords:
        ints = {
            "submit": submit,
            "start": start,
            "end": end,
            "trace_run": trace_run,
            "requested": requested,
            "procs": procs,
            "predicted": predicted,
        }
        return cls(
            job_id=_ids(job_id),
            killed=np.asarray(killed, dtype=bool),
            **{k: np.asarray(v, dtype=np.int64) for k, v in ints.items()},
        )

    @classmethod
    def empty(cls) -> JobRecords:
        none: list[int] = []
        return cls.from_columns(
            job_id=np.empty(0, dtype=object),
            submit=none,
            start=none,
            end=none,
            trace_run=none,
            requested=none,
            procs=none,
            killed=none,
            predicted=none,
        )


@dataclass(eq=False)
class TimeSeries:
    """One sample per dispatcher call (its event time), in time order.

    Each sample describes the machine *after* the call and holds until the next sample:
    the series is a step function, which is how the metrics integrate it.
    """

    time: np.ndarray
    queue_length: np.ndarray
    """int32: queued jobs after the call."""
    used: np.ndarray
    """2-D int64 ``[samples, resource types]``: capacity in use after the call."""
    resource_names: tuple[str, ...]
    capacity: tuple[int, ...]
    """Machine total per resource type."""

    def __post_init__(self) -> None:
        n, k = len(self.time), len(self.resource_names)
        if len(self.capacity) != k:
            raise InputError(f"TimeSeries: {k} resource names but {len(self.capacity)} capacities")
        if len(self.queue_length) != n or self.used.shape != (n, k):
            raise InputError(
                f"TimeSeries: {n} times, {len(self.queue_length)} queue lengths and used of "
                f"shape {self.used.shape}; expected ({n}, {k})"
            )
        if n > 1 and bool(np.any(np.diff(self.time) < 0)):
            raise InputError("TimeSeries.time must be in non-decreasing order")

    def __len__(self) -> int:
        return len(self.time)

    @classmethod
    def from_columns(
        cls,
        *,
        time: ArrayLike,
        queue_length: ArrayLike,
        used: ArrayLike,
        resource_names: Sequence[str],
        capacity: Sequence[int],
    ) -> TimeSeries:
        names = tuple(resource_names)
        return cls(
            time=np.asarray(time, dtype=np.int64),
            queue_length=np.asarray(queue_length, dtype=np.int32),
            # reshape keeps an empty series two-dimensional, with one column per type.
            used=np.asarray(used, dtype=np.int64).reshape(-1, len(names)),
            resource_names=names,
            capacity=tuple(int(c) for c in capacity),
        )

    @classmethod
    def empty(cls, resource_names: Sequence[str], capacity: Sequence[int]) -> TimeSeries:
        return cls.from_columns(
            time=[], queue_length=[], used=[], resource_names=resource_names, capacity=capacity
        )


@dataclass(eq=False)
class DispatchStats:
    time: np.ndarray
    """int64: simulated time of each dispatcher call."""
    wall_ms: np.ndarray
    """float64: measured wall-clock time of each dispatcher call."""
    fallbacks: int
    solver_status: dict[str, int]
    """Status -> count, e.g. ``{"heuristic": 1234}``."""
    extensions: int = 0
    """Time-limit extension directives applied (walltime correction)."""
    model_size: dict[str, np.ndarray] | None = field(default=None)
    """Optional per-call model sizes (e.g. ``{"intervals": ..., "variables": ...}``) for
    the CP dispatchers; summarised as mean and max when present."""
    fallback_reasons: dict[str, int] = field(default_factory=dict)
    """Reason -> count of the ``fallbacks`` (``Diagnostics.fallback_reason``)."""
    run_s: float | None = None
    """Measured wall-clock seconds of the whole simulation, when measured."""
    trials: dict[str, int] | None = None
    """Trial runs (:mod:`cpsched.core.trial_runs`), when the policy makes them: how many,
    how many jobs ended within theirs, how many went back to the queue and the cpu-seconds
    those trials took (``runs``, ``ended``, ``requeued``, ``requeued_cpu_s``), and the
    delay before a job put back may start again when the replay has one
    (``requeue_delay_s``)."""

    @classmethod
    def from_columns(
        cls,
        *,
        time: ArrayLike,
        wall_ms: ArrayLike,
        fallbacks: int = 0,
        extensions: int = 0,
        solver_status: Mapping[str, int] | None = None,
        model_size: Mapping[str, ArrayLike] | None = None,
        fallback_reasons: Mapping[str, int] | None = None,
    ) -> DispatchStats:
        return cls(
            time=np.asarray(time, dtype=np.int64),
            wall_ms=np.asarray(wall_ms, dtype=np.float64),
            fallbacks=int(fallbacks),
            extensions=int(extensions),
            solver_status=dict(solver_status or {}),
            model_size=(
                None
                if model_size is None
                else {k: np.asarray(v, dtype=np.int64) for k, v in model_size.items()}
            ),
            fallback_reasons=dict(fallback_reasons or {}),
        )


@dataclass(eq=False)
class ReplayResult:
    jobs: JobRecords
    series: TimeSeries
    dispatch: DispatchStats
    settings: dict[str, object]
    """What was replayed: trace, system, dispatcher, allocator, predictor, job count,
    seed, the trace cleaning report, ..."""

    def __post_init__(self) -> None:
        if len(self.dispatch.wall_ms) != len(self.dispatch.time):
            raise InputError(
                f"DispatchStats: {len(self.dispatch.wall_ms)} timings for "
                f"{len(self.dispatch.time)} calls; expected one per call"
            )
