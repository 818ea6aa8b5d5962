"""Synthetic workloads for heterogeneous machines: an SWF trace plus its unit sidecar.

No public trace records accelerator requests, so ``cpsched generate`` makes one from
:class:`~replay.generate_params.WorkloadParams` (default: Eurora-like):

* **Bursts.** Bursts start as a Poisson process whose rate follows the time of day
  (``day_night_ratio``); a burst is one user submitting a geometric number of jobs of
  one *family* a few seconds apart (parameter sweeps, resubmissions).
* **Users and families.** Users are drawn with Zipf weights; each user has a few
  families per job class. A family has a name stem, a unit shape and unit count, a
  typical run time (log-normal per class: most jobs short, a heavy tail up to the class
  maximum) and a requested time (the typical run time times a log-normal overestimate,
  rounded up to a value users type: 10 min, 1 h, ... 24 h). Its jobs are named
  ``stem_1``, ``stem_2``, ... and run the typical time with some jitter; now and then the
  typical time shifts. This is the temporal locality the profile predictor learns.
* **Mix.** Each burst's class is drawn by the classes' shares (76% GPU, 23% CPU-only,
  1% MIC for Eurora), so the job mix holds per job in expectation.

A job that would run past its request is recorded as killed at its limit (status 0).
Randomness comes only from ``random.Random(seed).random()`` with explicit transforms,
so the same seed and parameters give the same bytes on every platform.
"""

from __future__ import annotations

import gzip
import io
import math
import random
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cpsched.core.capacity import units_fitting
from cpsched.errors import ConfigError
from cpsched.replay.generate_params import JobClass, Shape, WorkloadParams
from cpsched.replay.swf_sidecar import sidecar_path, write_sidecar
from cpsched.replay.system import System

DAY = 86400


@dataclass(frozen=True, slots=True)
class GeneratedJob:
    number: int
    submit: int
    run: int
    request: int
    units: int
    per_unit: dict[str, int]
    user: int
    group: int
    family: int
    """Global family number, written as SWF's executable number (field 14)."""
    queue: int
    name: str
    killed: bool
    job_class: str


@dataclass
class _Family:
    number: int
    stem: str
    job_class: JobClass
    shape: Shape
    units: int
    typical: float
    request: int
    count: int = 0


class _Draws:
    """The transforms of uniform draws the generator uses (stable across platforms)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def uniform(self) -> float:
        return self._rng.random()

    def normal(self) -> float:
        # Box-Muller on two uniforms; 1 - u keeps the logarithm's argument in (0, 1].
        u1, u2 = 1.0 - self._rng.random(), self._rng.random()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)

    def exponential(self, mean: float) -> float:
        return -mean * math.log(1.0 - self._rng.random())

    def geometric(self, mean: float) -> int:
        """1, 2, ... with the given mean (>= 1)."""
        if mean <= 1.0:
            return 1
        p = 1.0 / mean
        return 1 + int(math.log(1.0 - self._rng.random()) / math.log(1.0 - p))

    def pick(self, weights: Sequence[float]) -> int:
        total = sum(weights)
        x = self._rng.random() * total
        for i, w in enumerate(weights):
            x -= w
            if x < 0:
                return i
        return len(weights) - 1


def _check_fits(params: WorkloadParams, system: System) -> None:
    """Every shape must fit on some node of ``system``, or its jobs could never run."""
    names = system.resource_names
    for job_class in params.classes:
        for shape in job_class.shapes:
            lacking = [r for r, a in shape.per_unit.items() if a and r not in names]
            lacking = [r for r in lacking if not (r == "mem" and "mem" not in names)]
            if lacking:
                raise ConfigError(
                    f"workload {params.name!r}, class {job_class.name!r}: a shape asks for "
                    f"{', '.join(lacking)}, which system {system.name!r} does not have; "
                    "pass a system that has it or drop the shape"
                )
            unit = tuple(shape.per_unit.get(r, 0) for r in names)
            wanted = tuple((r, a) for r, a in enumerate(unit) if a)
            biggest = max(job_class.units)
            room = sum(units_fitting(n.capacity, wanted) for n in system.nodes)
            if room < biggest:
                raise ConfigError(
                    f"workload {params.name!r}, class {job_class.name!r}: {biggest} units of "
                    f"{shape.per_unit} do not fit on the idle system {system.name!r} "
                    f"(room for {room}); lower the units or the shape"
                )


def _round_request(seconds: float, menu: Sequence[int], cap: int) -> int:
    i = bisect_left(menu, math.ceil(seconds))
    value = menu[i] if i < len(menu) else menu[-1]
    return min(value, cap)


def _queue(request: int, queues: Sequence[tuple[int, str]]) -> int:
    for position, (largest, _) in enumerate(queues, 1):
        if request <= largest:
            return position
    return len(queues)


class _Generator:
    def __init__(self, params: WorkloadParams, seed: int) -> None:
        self.p = params
        self.draw = _Draws(seed)
        users = params.users
        self.user_weights = [1.0 / (k**users.zipf) for k in range(1, users.count + 1)]
        self.family_weights = [
            1.0 / (k**users.family_zipf) for k in range(1, users.families_per_class + 1)
        ]
        self.class_shares = [c.share for c in params.classes]
        self.families: dict[tuple[int, int, int], _Family] = {}

    def typical_run(self, job_class: JobClass) -> float:
        run = job_class.median_run_s * math.exp(job_class.run_sigma * self.draw.normal())
        return min(max(run, 1.0), float(job_class.max_run_s))

    def request_for(self, typical: float, job_class: JobClass) -> int:
        users = self.p.users
        factor = users.overestimate_median * math.exp(users.overestimate_sigma * self.draw.normal())
        return _round_request(typical * max(factor, 1.2), self.p.time_menu_s, job_class.max_run_s)

    def family(self, user: int, class_index: int, k: int) -> _Family:
        key = (user, class_index, k)
        family = self.families.get(key)
        if family is None:
            job_class = self.p.classes[class_index]
            shape = job_class.shapes[self.draw.pick([s.weight for s in job_class.shapes])]
            units = job_class.units[self.draw.pick(job_class.units_weights)]
            typical = self.typical_run(job_class)
            family = _Family(
                number=len(self.families) + 1,
                stem=f"{job_class.name}{k + 1}_u{user}",
                job_class=job_class,
                shape=shape,
                units=units,
                typical=typical,
                request=self.request_for(typical, job_class),
            )
            self.families[key] = family
        return family

    def jobs(self, count: int) -> list[GeneratedJob]:
        draw = self.draw
        arrivals, users = self.p.arrivals, self.p.users
        ratio = max(arrivals.day_night_ratio, 1.0)
        amplitude = (ratio - 1.0) / (ratio + 1.0)
        # Candidate starts at the peak rate, kept with probability rate(t) / peak.
        peak_gap = arrivals.mean_interarrival_s * max(arrivals.burst_mean_jobs, 1.0)
        peak_gap /= 1.0 + amplitude
        out: list[tuple[float, int, _Family]] = []
        t = 0.0
        while len(out) < count:
            t += draw.exponential(peak_gap)
            hour = (t % DAY) / 3600.0
            rate = 1.0 + amplitude * math.cos(2.0 * math.pi * (hour - 14.0) / 24.0)
            if draw.uniform() * (1.0 + amplitude) > rate:
                continue
            user = 1 + draw.pick(self.user_weights)
            class_index = draw.pick(self.class_shares)
            family = self.family(user, class_index, draw.pick(self.family_weights))
            size = draw.geometric(arrivals.burst_mean_jobs)
            at = t
            for _ in range(min(size, count - len(out))):
                out.append((at, user, family))
                at += draw.exponential(arrivals.burst_gap_s)
        out.sort(key=lambda item: item[0])  # stable: a burst keeps its order
        jobs: list[GeneratedJob] = []
        for number, (at, user, family) in enumerate(out, 1):
            if draw.uniform() < users.shift_probability:
                family.typical = self.typical_run(family.job_class)
                if family.typical > family.request:
                    family.request = self.request_for(family.typical, family.job_class)
            run = family.typical * math.exp(users.run_jitter_sigma * draw.normal())
            run_s = max(1, round(run))
            killed = run_s > family.request
            family.count += 1
            jobs.append(
                GeneratedJob(
                    number=number,
                    submit=int(at),
                    run=family.request if killed else run_s,
                    request=family.request,
                    units=family.units,
                    per_unit=family.shape.per_unit,
                    user=user,
                    group=1 + (user - 1) // 5,
                    family=family.number,
                    queue=_queue(family.request, self.p.queues),
                    name=f"{family.stem}_{family.count}",
                    killed=killed,
                    job_class=family.job_class.name,
                )
            )
        return jobs


def generate_jobs(
    params: WorkloadParams, system: System, count: int, seed: int
) -> list[GeneratedJob]:
    """``count`` jobs for ``system``, in submission order, numbered from 1."""
    if count < 1:
        raise ConfigError(f"the number of jobs to generate must be >= 1, got {count}")
    _check_fits(params, system)
    return _Generator(params, seed).jobs(count)


def swf_text(
    jobs: Sequence[GeneratedJob], params: WorkloadParams, system: System, seed: int, sidecar: str
) -> str:
    """The SWF file: header comments, then the 18 fields per job (Standard Workload Format)."""
    procs = sum(n.capacity[0] for n in system.nodes)
    queues = ", ".join(
        f"{i} {name} (<= {largest} s)" for i, (largest, name) in enumerate(params.queues, 1)
    )
    lines = [
        "; Version: 2.2",
        f"; Computer: {system.name} (synthetic)",
        f"; Note: generated by cpsched generate, workload {params.name!r}, seed {seed}",
        f"; Note: per-unit requests (gpu, mic, ...) and job names are in {sidecar}",
        f"; UnixStartTime: {params.start_time}",
        f"; MaxJobs: {len(jobs)}",
        f"; MaxRecords: {len(jobs)}",
        f"; MaxNodes: {len(system.nodes)}",
        f"; MaxProcs: {procs}",
        f"; MaxRuntime: {max(c.max_run_s for c in params.classes)}",
        f"; Queues: {queues}",
        ";",
    ]
    for j in jobs:
        cpu = j.per_unit["cpu"]
        processors = j.units * cpu
        mem_kb = j.per_unit.get("mem", 0) * 1024 // cpu
        fields = (
            j.number, j.submit, -1, j.run, processors, -1, -1, processors, j.request,
            mem_kb if mem_kb else -1, 0 if j.killed else 1, j.user, j.group, j.family,
            j.queue, 1, -1, -1,
        )  # fmt: skip
        lines.append(" ".join(map(str, fields)))
    return "\n".join(lines) + "\n"


def write_trace(
    out: Path, jobs: Sequence[GeneratedJob], params: WorkloadParams, system: System, seed: int
) -> Path:
    """Write ``out`` (gzip when it ends in .gz, with a fixed timestamp) and its sidecar;
    return the sidecar's path."""
    out = Path(out)
    sidecar = sidecar_path(out)
    text = swf_text(jobs, params, system, seed, sidecar.name)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.name.endswith(".gz"):
            buffer = io.BytesIO()
            with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as gz:
                gz.write(text.encode("utf-8"))
            out.write_bytes(buffer.getvalue())
        else:
            out.write_text(text, encoding="utf-8")
        names = system.resource_names
        if "mem" not in names and any("mem" in j.per_unit for j in jobs):
            names = (*names, "mem")
        write_sidecar(
            sidecar,
            names,
            [(j.number, j.units, [j.per_unit.get(r, 0) for r in names], j.name) for j in jobs],
        )
    except OSError as exc:
        raise ConfigError(f"cannot write {out} or {sidecar}: {exc}") from exc
    return sidecar
