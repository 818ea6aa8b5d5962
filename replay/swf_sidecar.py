"""The unit-request sidecar: per-unit accelerator (and other) requests SWF cannot carry.

SWF knows processors and memory per processor only. A trace ``T.swf`` (or
``T.swf.gz``) may come with ``T.swf.gres.csv`` (or ``T.swf.gz.gres.csv``), a CSV file
keyed by SWF job number, that says how each job's units look::

    # lines starting with '#' are comments
    job_id,units,cpu,mem,gpu,mic,name
    17,2,8,8000,2,0,md_sweep_17

* ``job_id`` (field 1 of the SWF line) and ``units`` (>= 1) are required, then one
  column per resource type with the amount *per unit* (``mem`` in MB), ``cpu``
  required; ``name`` (the job name, e.g. for the profile predictor) is optional.
* ``units × cpu`` must equal the SWF line's requested processors (field 8): the SWF
  line stays valid on its own, and a tool that ignores the sidecar replays the job as
  that many one-processor units.
* A job without a sidecar line replays from its SWF fields alone (CPU only). Lines for
  jobs the SWF file does not hold (or that a job limit leaves out) are ignored.
* On a system without some type, a job asking for it cannot run: it is skipped as
  ``exceeds_machine``. ``mem`` on a system that does not describe memory is ignored,
  as SWF's memory fields are.

A broken line (wrong number of fields, non-integer or negative amounts, units < 1, a
duplicated job id, a missing required column) is a :class:`TraceError` naming the file
and line, never a silent guess: the sidecar decides where a job may run.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cpsched.errors import TraceError

SUFFIX = ".gres.csv"
_REQUIRED = ("job_id", "units", "cpu")


@dataclass(frozen=True, slots=True)
class UnitShape:
    """One sidecar line: ``units`` units of ``per_unit`` (by resource name) each."""

    units: int
    per_unit: dict[str, int]
    name: str
    line: int
    """Line number in the sidecar, for error messages."""


def sidecar_path(trace: Path) -> Path:
    """Where the sidecar of ``trace`` lives: the trace's file name plus ``.gres.csv``."""
    trace = Path(trace)
    return trace.with_name(trace.name + SUFFIX)


def _whole(value: str, what: str, where: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise TraceError(f"{where}: {what} must be a whole number, got {value!r}") from None
    if number < 0:
        raise TraceError(f"{where}: {what} must be >= 0, got {number}")
    return number


def read_sidecar(path: Path) -> dict[int, UnitShape]:
    """The sidecar at ``path`` by SWF job number; empty when there is no such file."""
    path = Path(path)
    if not path.exists():
        return {}
    fix = "fix or delete the line (the job then replays from its SWF fields, CPU only)"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read the unit-request sidecar {path}: {exc}") from exc
    rows = [
        (lineno, line)
        for lineno, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not rows:
        return {}
    header_line, header_text = rows[0]
    header = [h.strip() for h in next(csv.reader([header_text]))]
    missing = [c for c in _REQUIRED if c not in header]
    if missing or len(set(header)) != len(header):
        raise TraceError(
            f"{path}:{header_line}: the header must name job_id, units, cpu and each "
            f"resource type once (got {', '.join(header)}); missing: {', '.join(missing)}"
        )
    resources = [h for h in header if h not in ("job_id", "units", "name")]
    shapes: dict[int, UnitShape] = {}
    for lineno, line in rows[1:]:
        where = f"{path}:{lineno}"
        fields = [f.strip() for f in next(csv.reader([line]))]
        if len(fields) != len(header):
            raise TraceError(f"{where}: {len(fields)} fields, the header has {len(header)}; {fix}")
        row = dict(zip(header, fields, strict=True))
        try:
            job_id = _whole(row["job_id"], "job_id", where)
            units = _whole(row["units"], "units", where)
            per_unit = {r: _whole(row[r], r, where) for r in resources}
        except TraceError as exc:
            raise TraceError(f"{exc}; {fix}") from None
        if units < 1 or per_unit["cpu"] < 1:
            raise TraceError(f"{where}: units and cpu must be >= 1; {fix}")
        if job_id in shapes:
            raise TraceError(
                f"{where}: job {job_id} already described on line {shapes[job_id].line}; "
                "keep one line per job"
            )
        shapes[job_id] = UnitShape(units, per_unit, row.get("name", ""), lineno)
    return shapes


def unit_request(
    shape: UnitShape, resource_names: Sequence[str], has_mem: bool
) -> tuple[int, ...] | None:
    """``shape``'s per-unit request aligned with ``resource_names``; None when it asks for
    a type the system does not have (memory excepted when the system has none)."""
    for name, amount in shape.per_unit.items():
        if amount and name not in resource_names and not (name == "mem" and not has_mem):
            return None
    return tuple(shape.per_unit.get(name, 0) for name in resource_names)


def write_sidecar(path: Path, resource_names: Sequence[str], rows: Sequence[UnitShapeRow]) -> None:
    """Write a sidecar: one line per ``(job_id, units, per-unit amounts, name)``."""
    lines = [
        "# cpsched unit-request sidecar: per-unit requests by SWF job number "
        "(docs/heterogeneous.md)",
        ",".join(("job_id", "units", *resource_names, "name")),
    ]
    for job_id, units, amounts, name in rows:
        lines.append(",".join((str(job_id), str(units), *map(str, amounts), name)))
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


UnitShapeRow = tuple[int, int, Sequence[int], str]
"""A sidecar line to write: job number, units, per-unit amounts, job name."""
