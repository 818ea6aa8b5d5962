"""The values a grid entry stands for: one value, a list, a numeric range; job ranges.

Ranges include both ends when the steps land on them: ``{from = 1, to = 9, step = 4}`` is
1, 5, 9 and ``{from = 0.01, to = 0.04, factor = 2}`` is 0.01, 0.02, 0.04. Values are
computed as ``from + i * step`` (``from * factor ** i``) and rounded to 12 significant
digits, so ``0.1`` steps give 0.3, not 0.30000000000000004.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from cpsched.errors import GridError

MAX_VALUES = 1000
"""The most values one range may give: a typo in ``step`` should not plan a million cells."""
RANGE_KEYS = ("from", "to", "step", "factor")
_JOB_RANGE = re.compile(r"\s*(\d*)\s*:\s*(\d*)\s*")
_TOLERANCE = 1e-9


def expand(raw: Any, where: str) -> list[Any]:
    """The values of a grid entry: a list's items, a range's values, else the value."""
    if isinstance(raw, list):
        if not raw:
            raise GridError(f"{where}: an empty list gives no value; give at least one")
        return raw
    if isinstance(raw, Mapping):
        return number_range(raw, where)
    return [raw]


def number_range(spec: Mapping[str, Any], where: str) -> list[int | float]:
    """The values of ``{from = A, to = B, step = S}`` or ``{from = A, to = B, factor = F}``."""
    unknown = [k for k in spec if k not in RANGE_KEYS]
    if unknown:
        raise GridError(
            f"{where}: unknown range key(s) {', '.join(map(repr, unknown))}; a range is "
            "{from = A, to = B, step = S} or {from = A, to = B, factor = F}"
        )
    values = {k: spec.get(k) for k in RANGE_KEYS}
    for key, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise GridError(f"{where}: range {key} must be a number, got {value!r}")
    start, stop, step, factor = values["from"], values["to"], values["step"], values["factor"]
    if start is None or stop is None:
        raise GridError(f"{where}: a range needs both from and to")
    if (step is None) == (factor is None):
        raise GridError(
            f"{where}: a range needs exactly one of step (adds) and factor (multiplies)"
        )
    if start > stop:
        raise GridError(f"{where}: range from {start} is above to {stop}; swap them")
    if step is not None:
        if step <= 0:
            raise GridError(f"{where}: range step must be > 0, got {step}")
        count = math.floor((stop - start) / step + _TOLERANCE) + 1
        out = _check_count([start + i * step for i in range(min(count, MAX_VALUES + 1))], where)
    else:
        assert factor is not None
        if factor <= 1 or start <= 0:
            raise GridError(
                f"{where}: a factor range needs from > 0 and factor > 1, got from {start}, "
                f"factor {factor}"
            )
        count = math.floor(math.log(stop / start) / math.log(factor) + _TOLERANCE) + 1
        out = _check_count([start * factor**i for i in range(min(count, MAX_VALUES + 1))], where)
    if all(isinstance(v, int) for v in (start, stop, step or factor)):
        return [int(v) for v in out]
    return [float(f"{v:.12g}") for v in out]


def _check_count(values: list[Any], where: str) -> list[Any]:
    if len(values) > MAX_VALUES:
        raise GridError(
            f"{where}: the range gives more than {MAX_VALUES} values; use a larger step or factor"
        )
    return values


def parse_jobs(raw: Any, where: str) -> list[tuple[int, int | None]]:
    """The trace slices a ``jobs`` entry asks for, as (jobs skipped, jobs replayed or None
    for the rest): ``3000`` is the first 3000, ``"3000:6000"`` jobs 3001 to 6000,
    ``"3000:"`` all from 3001, a list one slice per item; absent is the whole trace."""
    if raw is None:
        return [(0, None)]
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise GridError(f"{where}: jobs is an empty list; give at least one range or leave it out")
    return [_job_range(item, where) for item in items]


def _job_range(raw: Any, where: str) -> tuple[int, int | None]:
    usage = 'a number of jobs (3000), a range "A:B" (jobs A+1 to B) or a list of these'
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise GridError(f"{where}: jobs = {raw} replays nothing; give {usage}")
        return 0, raw
    match = _JOB_RANGE.fullmatch(raw) if isinstance(raw, str) else None
    if match is None:
        raise GridError(f"{where}: jobs = {raw!r} is not {usage}")
    first, last = int(match.group(1) or 0), match.group(2)
    if last is not None and last != "" and int(last) <= first:
        raise GridError(
            f'{where}: jobs = "{raw}" is empty: the end must be above the start ("0:3000" '
            "is the first 3000 jobs)"
        )
    return first, None if not last else int(last) - first
