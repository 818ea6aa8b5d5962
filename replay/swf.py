"""Reading Standard Workload Format traces (plain or gzip) into dispatch-core jobs.

An SWF file (the Parallel Workloads Archive's Standard Workload Format) has ``; Key:
value`` header comments, then one job per line: 18 numbers, ``-1`` when unknown. A job
is ``units`` processors, each asking 1 ``cpu`` and, if the system has ``mem`` (MB per
node), ``ceil(KB per processor / 1024)`` MB; other resource types 0. ``run_time`` is
what the log says the job ran. Decimal times (``552.21``) are rounded to whole seconds.

Real logs hold lines that cannot be replayed as they are. Rules apply in the order
below; the first *skip* rule that matches drops the line, so each job line is kept or
counted under exactly one skip rule. *clamp*, *fill* and *count* rules touch kept jobs.

- ``malformed`` (skip): not 18 finite numbers, or a fractional job number. Text, NaN,
  truncated lines and undecodable bytes land here instead of crashing the reader; the
  report keeps the first few with their line numbers and what is wrong with each
  (:func:`bad_lines_note`), and ``strict=True`` stops at the first instead.
- ``duplicate_id`` (skip): job number seen on an earlier line; ids must be unique.
- ``negative_submit`` (skip): submitted before the trace start, off the clock.
- ``cancelled_before_start`` (skip): status 5, run time <= 0: never used the machine.
- ``no_run_time`` (skip): run time unknown (-1) or negative: nothing to replay.
- ``no_processors`` (skip): neither requested (8) nor allocated (5) processors > 0.
- ``exceeds_machine`` (skip): the idle machine cannot hold the job: too many processors,
  or more memory per processor than enough nodes have.
- ``zero_run_time`` (clamp): run time 0 becomes 1 s; every job takes some time.
- ``procs_from_allocated`` (fill): requested processors unknown, allocated ones used.
- ``mem_from_used`` (fill): requested memory unknown, used memory (7) is the request;
  0 when both are unknown. Only for systems with ``mem``.
- ``no_requested_time`` (fill): requested time <= 0; the system's ``max_time_limit``
  becomes the limit (what a user who states no limit gets from a partition), or the run
  time when the system declares no maximum. Filling with the run time everywhere would
  hand the wall-time approach the right answer (MetaCentrum's log has no requests).
- ``run_exceeds_request`` (count): ran longer than asked; kept as logged, because the
  log says it ran and cpsched never kills a job on its original request.
- ``units_from_sidecar`` (fill): the trace's unit-request sidecar (``T.swf.gres.csv``,
  :mod:`replay.swf_sidecar`) gives the job's units, per-unit request (accelerators
  included) and name; the SWF processor and memory fields then only cross-check it.
  ``exceeds_machine`` applies to the sidecar's shape: a job asking for a GPU is skipped
  on a machine without GPUs.
"""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import ceil, isfinite
from pathlib import Path
from typing import IO

from cpsched.core.capacity import units_fitting
from cpsched.core.problem import Job
from cpsched.core.site import can_ever_run
from cpsched.errors import ConfigError, TraceError
from cpsched.replay.swf_sidecar import UnitShape, read_sidecar, sidecar_path, unit_request
from cpsched.replay.system import System

RULES: dict[str, str] = {
    "malformed": "skip: not exactly 18 finite numeric fields, or a fractional job number",
    "duplicate_id": "skip: job number already seen on an earlier line",
    "negative_submit": "skip: submit time < 0",
    "cancelled_before_start": "skip: cancelled (status 5) with run time <= 0",
    "no_run_time": "skip: run time unknown (-1) or negative",
    "no_processors": "skip: neither requested nor allocated processors > 0",
    "exceeds_machine": "skip: more processors or memory per processor than the idle machine has",
    "outside_partitions": (
        "skip: cannot run in its queue's partitions (more than their nodes hold, or a time "
        "limit over their max_time), as a workload manager refuses it at submission"
    ),
    "zero_run_time": "clamp: run time 0 raised to 1 s",
    "procs_from_allocated": "fill: requested processors unknown, allocated processors used",
    "mem_from_used": "fill: requested memory unknown, used memory taken as the request",
    "no_requested_time": (
        "fill: requested time unknown or <= 0, the system's maximum (else the run time) "
        "used as the limit"
    ),
    "run_exceeds_request": "count: ran longer than requested, kept as logged",
    "units_from_sidecar": "fill: units, per-unit request and name from the .gres.csv sidecar",
}
SKIP_RULES: tuple[str, ...] = tuple(k for k, v in RULES.items() if v.startswith("skip"))
MAX_EXAMPLES = 5

_HEADER_LINE = re.compile(r";\s*(\w+)\s*:\s*(.*?)\s*$")


@dataclass(frozen=True, slots=True)
class SwfHeader:
    fields: dict[str, str]
    """Every ``; Key: value`` line of the leading comment block (first occurrence), raw."""
    max_nodes: int | None
    max_procs: int | None
    unix_start_time: int | None


@dataclass(frozen=True, slots=True)
class TraceJob:
    job: Job
    run_time: int
    """Seconds the log says the job ran, >= 1; may exceed ``job.time_limit``."""
    status: int
    wait: int = 0
    """Seconds the job waited on the real machine (0 when the log does not say)."""


@dataclass
class CleaningReport:
    lines: int
    kept: int
    counts: dict[str, int]
    examples: dict[str, list[int]]
    """Rule -> first line numbers (1-based, as in the file) the rule touched."""
    malformed: list[tuple[int, str]] = field(default_factory=list)
    """The first malformed lines: (line number, what is wrong with it)."""

    @property
    def skipped(self) -> int:
        return self.lines - self.kept


@dataclass
class Trace:
    header: SwfHeader
    jobs: list[TraceJob]
    """Sorted by submit time; jobs submitted at the same second keep their file order."""
    report: CleaningReport


def _leading_int(value: str | None) -> int | None:
    match = re.match(r"\s*(-?\d+)", value or "")
    return int(match.group(1)) if match else None


def _parse_header(lines: list[str]) -> SwfHeader:
    fields: dict[str, str] = {}
    for line in lines:
        match = _HEADER_LINE.match(line.strip())
        if match and match.group(1) not in fields:
            fields[match.group(1)] = match.group(2)
    return SwfHeader(
        fields=fields,
        max_nodes=_leading_int(fields.get("MaxNodes")),
        max_procs=_leading_int(fields.get("MaxProcs")),
        unix_start_time=_leading_int(fields.get("UnixStartTime")),
    )


class _Labels(dict[str, str]):
    """User/group/executable/queue numbers as text, "" when unknown (negative)."""

    def __missing__(self, raw: str) -> str:
        # Only called on a miss: hits stay at C speed, each distinct value converts once.
        number = int(float(raw))
        text = self[raw] = str(number) if number >= 0 else ""
        return text


def _open(path: Path) -> IO[str]:
    path = Path(path)
    try:
        with path.open("rb") as raw:
            magic = raw.read(2)
    except OSError as exc:
        raise TraceError(f"cannot open trace {path}: {exc.strerror or exc}") from exc
    # Sniffing beats trusting the suffix: renamed or decompressed copies are common;
    # utf-8-sig drops a byte-order mark that would otherwise spoil the first line.
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace")
    return path.open(encoding="utf-8-sig", errors="replace")


def read_header(path: Path) -> SwfHeader:
    """The header of an SWF file; reads only the leading comment block."""
    lines: list[str] = []
    try:
        with _open(path) as f:
            for line in f:
                stripped = line.strip()
                if stripped and stripped[0] != ";":
                    break
                lines.append(stripped)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from exc
    return _parse_header(lines)


class _Machine:
    """How many units of each memory size the idle system holds, and their requests."""

    def __init__(self, system: System) -> None:
        names = system.resource_names
        if names[:1] != ("cpu",):
            raise TraceError(f"system {system.name!r} must list 'cpu' as its first resource")
        self.mem_index = names.index("mem") if "mem" in names else None
        self._nodes = [(n.capacity[0], n.capacity[self.mem_index or 0]) for n in system.nodes]
        self._plain = tuple(1 if i == 0 else 0 for i in range(len(names)))
        self.fits = {0: sum(c for c, _ in self._nodes)}
        self.requests = {0: self._plain}
        self._capacities = [n.capacity for n in system.nodes]
        self._shape_fits: dict[tuple[int, ...], int] = {}

    def units_fitting(self, unit: tuple[int, ...]) -> int:
        """Units of per-unit request ``unit`` the idle machine holds (sidecar jobs)."""
        fit = self._shape_fits.get(unit)
        if fit is None:
            wanted = tuple((r, a) for r, a in enumerate(unit) if a)
            fit = sum(units_fitting(c, wanted) for c in self._capacities) if wanted else 0
            self._shape_fits[unit] = fit
        return fit

    def know(self, mem: int) -> None:
        """Make ``fits`` and ``requests`` hold ``mem`` MB per processor."""
        if mem not in self.fits:
            self.add(mem)

    def add(self, mem: int) -> None:
        # Few distinct memory sizes occur in a trace, so this runs a handful of times.
        self.fits[mem] = sum(min(c, m // mem) for c, m in self._nodes)
        self.requests[mem] = tuple(
            mem if i == self.mem_index else r for i, r in enumerate(self._plain)
        )


def read_swf(
    path: Path, system: System, *, limit: int | None = None, strict: bool = False
) -> Trace:
    """Read and clean an SWF trace for ``system``; ``limit`` keeps the first N kept jobs.
    ``strict``: a malformed line is a TraceError naming it (``file:line: what is wrong``)
    instead of a line left out and counted."""
    if limit is not None and limit < 0:
        raise ConfigError(f"the number of jobs to replay must be >= 0, got {limit}")
    machine = _Machine(system)
    shapes = read_sidecar(sidecar_path(path))
    max_limit = system.max_time_limit
    has_mem = machine.mem_index is not None
    fits, requests = machine.fits, machine.requests

    counts = dict.fromkeys(RULES, 0)
    examples: dict[str, list[int]] = {rule: [] for rule in RULES}
    malformed: list[tuple[int, str]] = []

    def note(rule: str, lineno: int) -> None:
        counts[rule] += 1
        if len(examples[rule]) < MAX_EXAMPLES:
            examples[rule].append(lineno)

    labels = _Labels()
    stop = -1 if limit is None else limit
    header_lines: list[str] = []
    in_header = True
    seen: set[int] = set()
    jobs: list[TraceJob] = []
    lines = kept = 0
    # The reader makes only acyclic objects, yet the collector would rescan the growing
    # job list again and again: about 25% of the reading time on large traces.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with _open(path) as f:
            for lineno, line in enumerate(f, 1):
                parts = line.split()
                if not parts or parts[0][0] == ";":
                    if in_header:
                        header_lines.append(line)
                    continue
                in_header = False
                if kept == stop:
                    break
                lines += 1
                v = _numbers(parts)
                if v is None:
                    _left_out(path, lineno, parts, strict, malformed)
                    note("malformed", lineno)
                    continue
                number = int(v[0])
                submit = round(v[1])
                run = round(v[3])
                status = round(v[10])
                # Requested processors, else allocated ones (counted when kept).
                from_allocated = round(v[7]) <= 0
                procs = round(v[4] if from_allocated else v[7])
                mem, from_used = _memory_mb(v) if has_mem else (0, False)
                machine.know(mem)
                shape = shapes.get(number)
                unit = _sidecar_unit(shape, number, procs, system, has_mem, path)
                rule = "duplicate_id" if number in seen else _skip_rule(submit, run, status, procs)
                if not rule:
                    fitting = fits[mem] if shape is None else _sidecar_fit(shape, unit, machine)
                    rule = "exceeds_machine" if procs > fitting else ""
                seen.add(number)
                if rule:
                    note(rule, lineno)
                    continue

                labelled = tuple(map(labels.__getitem__, parts[11:15]))
                trace_job, fixes = _kept_job(
                    v, labelled, procs, requests[mem], shape, unit, max_limit, system
                )
                fixes += ["procs_from_allocated"] * from_allocated + ["mem_from_used"] * from_used
                if not _within_partitions(trace_job.job, system):
                    fixes = ["outside_partitions"]
                for fix in fixes:
                    note(fix, lineno)
                if fixes != ["outside_partitions"]:
                    jobs.append(trace_job)
                    kept += 1
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from exc
    finally:
        if gc_was_enabled:
            gc.enable()

    jobs.sort(key=lambda tj: tj.job.submit)
    report = CleaningReport(lines, kept, counts, examples, malformed)
    return Trace(header=_parse_header(header_lines), jobs=jobs, report=report)


def _kept_job(
    v: list[float],
    labels: tuple[str, ...],
    procs: int,
    per_processor: tuple[int, ...],
    shape: UnitShape | None,
    unit: tuple[int, ...] | None,
    max_limit: int | None,
    system: System,
) -> tuple[TraceJob, list[str]]:
    """The trace job of a kept line (``labels``: user, group, name, queue), after the
    clamp and fill rules, and the rules that applied."""
    number, submit, status = int(v[0]), round(v[1]), round(v[10])
    run, requested, fixes = _filled(round(v[3]), round(v[8]), max_limit)
    user, group, name, queue = labels
    # Under a system file's partitions the job's queue is what a workload manager calls
    # it: its partitions (so a replay over HTTP carries the same label as in process).
    constraints = system.rules.constraints_for(queue)
    if constraints is not None:
        queue = ",".join(constraints.partitions)
    units, per_unit = procs, per_processor
    if shape is not None and unit is not None:
        units, per_unit, name = shape.units, unit, shape.name or name
        fixes.append("units_from_sidecar")
    job = Job(
        id=str(number),
        submit=submit,
        time_limit=requested,
        units=units,
        unit_request=per_unit,
        user=user,
        group=group,
        name=name,
        queue=queue,
        constraints=constraints,
        resource_names=system.resource_names,
    )
    return TraceJob(job, run, status, max(0, round(v[2]))), fixes


def _within_partitions(job: Job, system: System) -> bool:
    if job.constraints is None:
        return True  # as can_ever_run says, without listing the nodes for every job
    return can_ever_run(
        job.constraints,
        job.units,
        job.unit_request,
        job.time_limit,
        system.rules.site,
        [node.capacity for node in system.nodes],
    )


def _numbers(parts: list[str]) -> list[float] | None:
    """The 18 numbers of a job line; None when it is malformed (a field missing, not a
    number, infinite, or a fractional job number)."""
    try:
        v = list(map(float, parts))
    except ValueError:
        return None
    if len(v) != 18 or not isfinite(sum(v)) or v[0] != int(v[0]):
        return None
    return v


def _left_out(
    path: Path, lineno: int, parts: list[str], strict: bool, malformed: list[tuple[int, str]]
) -> None:
    """A malformed line: kept in ``malformed`` (the first few), or with ``strict`` an error."""
    problem = _malformed(parts)
    if strict:
        raise TraceError(
            f"{path}:{lineno}: {problem} (without --strict, malformed lines are left out "
            "and counted)"
        )
    if len(malformed) < MAX_EXAMPLES:
        malformed.append((lineno, problem))


def _malformed(parts: list[str]) -> str:
    """What is wrong with a job line :func:`_numbers` refused."""
    for number, text in enumerate(parts, 1):
        try:
            value = float(text)
        except ValueError:
            return f"field {number} ({_quoted(text)}) is not a number"
        if not isfinite(value):
            return f"field {number} ({_quoted(text)}) is not a finite number"
    if len(parts) != 18:
        return f"{len(parts)} fields, an SWF job line has 18"
    if not float(parts[0]).is_integer():
        return f"job number {_quoted(parts[0])} is not a whole number"
    return "numbers too large to add up"


def _quoted(text: str, limit: int = 40) -> str:
    """``text`` for a message: quoted, non-printable characters escaped, at most ``limit``."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[: limit - 4]}...{shown[0]}"


def malformed_lines(report: CleaningReport) -> list[dict[str, object]]:
    """The report's first malformed lines, JSON-ready (a replay's ``summary.json``)."""
    return [{"line": line, "problem": problem} for line, problem in report.malformed]


def bad_lines_note(trace: str, cleaning: Mapping[str, object]) -> str | None:
    """One line on a trace's malformed lines for a person (None when there are none), from
    a replay's ``settings.cleaning``: how many were left out, the first with what is wrong."""
    counts = cleaning.get("counts")
    count = counts.get("malformed", 0) if isinstance(counts, Mapping) else 0
    if not count:
        return None
    shown = cleaning.get("malformed_lines")
    first = shown if isinstance(shown, Sequence) else []
    lines = "; ".join(f"line {row['line']}: {row['problem']}" for row in first)
    more = f"; and {count - len(first)} more" if count > len(first) else ""
    plural = "s" if count != 1 else ""
    return (
        f"{trace}: {count} malformed line{plural} left out ({lines}{more}); "
        "--strict stops at the first instead"
    )


def _filled(run: int, requested: int, max_limit: int | None) -> tuple[int, int, list[str]]:
    """A kept job's run and requested times after the clamp and fill rules, and the
    rules that applied."""
    fixes = []
    if run == 0:
        run = 1
        fixes.append("zero_run_time")
    if requested <= 0:
        requested = max_limit or run
        fixes.append("no_requested_time")
    elif run > requested:
        fixes.append("run_exceeds_request")
    return run, requested, fixes


def _memory_mb(v: list[float]) -> tuple[int, bool]:
    """MB per processor from an SWF line's requested memory (field 10), else its used
    memory (field 7): ``(0, False)`` when neither is known; True when from the used."""
    kb = v[9]
    from_used = False
    if kb <= 0:
        kb = v[6]
        from_used = kb > 0
    return (ceil(kb / 1024), from_used) if kb > 0 else (0, False)


def _skip_rule(submit: int, run: int, status: int, procs: int) -> str:
    """The first skip rule a job line breaks on its own fields ("" for none)."""
    if submit < 0:
        return "negative_submit"
    if run <= 0 and status == 5:
        return "cancelled_before_start"
    if run < 0:
        return "no_run_time"
    if procs <= 0:
        return "no_processors"
    return ""


def _sidecar_fit(shape: UnitShape, unit: tuple[int, ...] | None, machine: _Machine) -> int:
    """Processors a sidecar job may ask for: any, when its units fit the idle machine;
    none when they do not, or they need a type the system lacks (``unit`` None)."""
    if unit and shape.units <= machine.units_fitting(unit):
        return 1 << 62
    return 0


def _sidecar_unit(
    shape: UnitShape | None, number: int, procs: int, system: System, has_mem: bool, trace: Path
) -> tuple[int, ...] | None:
    """The sidecar's per-unit request for ``system`` (None: no sidecar line, or a type the
    system lacks), after checking that it agrees with the SWF line's processor count."""
    if shape is None:
        return None
    if shape.units * shape.per_unit["cpu"] != procs:
        raise TraceError(
            f"{sidecar_path(trace)}:{shape.line}: job {number} has {shape.units} units x "
            f"{shape.per_unit['cpu']} cpu = {shape.units * shape.per_unit['cpu']} processors, "
            f"but its SWF line requests {procs}; make the two agree or delete the sidecar line"
        )
    return unit_request(shape, system.resource_names, has_mem)
