"""Parameters of the synthetic workload generator, and their TOML file.

The defaults are the built-in Eurora-like profile (Netti 2017, chapter 3: 76% GPU jobs,
23% CPU-only, 1% MIC; short, heavy-tailed run times; a 24 h limit).
``systems/workloads/eurora.toml`` spells the same values out with comments, as the
template a site copies to fit its own mix; a test keeps the two equal. Every problem
in a file is a ConfigError naming the key and what to write instead.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cpsched.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Shape:
    """One per-unit request a job class uses, with its relative weight."""

    weight: float
    per_unit: dict[str, int]
    """Amount per unit by resource name (``mem`` in MB); ``cpu`` >= 1."""


@dataclass(frozen=True, slots=True)
class JobClass:
    name: str
    share: float
    """Fraction of all jobs (the shares are normalised, so they need not sum to 1)."""
    median_run_s: float
    run_sigma: float
    """Log-normal run times: median and sigma of the log (heavy tail for sigma >~ 1.5)."""
    max_run_s: int
    """Longest run (and request) of the class, e.g. its queue's limit."""
    units: tuple[int, ...]
    units_weights: tuple[float, ...]
    shapes: tuple[Shape, ...]


@dataclass(frozen=True, slots=True)
class Arrivals:
    mean_interarrival_s: float = 65.0
    """Long-run mean seconds between two submissions (30 days ≈ 40,000 jobs at 65 s)."""
    burst_mean_jobs: float = 6.0
    """Mean jobs per burst (geometric): one user submitting one job family in a row."""
    burst_gap_s: float = 4.0
    """Mean seconds between two jobs of a burst (exponential)."""
    day_night_ratio: float = 3.0
    """How many times more often bursts start at 14:00 than at 02:00."""


@dataclass(frozen=True, slots=True)
class Users:
    count: int = 80
    zipf: float = 1.1
    """User k (1-based) submits in proportion to 1 / k^zipf: a few users dominate."""
    families_per_class: int = 3
    """Job-name families (a name stem, a shape, a typical run time) per user and class."""
    family_zipf: float = 1.0
    shift_probability: float = 0.03
    """Per job: the family's typical run time is redrawn (a profile shifts)."""
    run_jitter_sigma: float = 0.3
    """A family's run times: its typical run time times log-normal(0, sigma)."""
    overestimate_median: float = 3.0
    overestimate_sigma: float = 0.8
    """Requests: typical run time times log-normal(ln median, sigma) (at least 1.2x),
    rounded up to the next value of ``time_menu_s``."""


def _eurora_classes() -> tuple[JobClass, ...]:
    gpu = (
        Shape(0.35, {"cpu": 1, "mem": 1000, "gpu": 1}),
        Shape(0.25, {"cpu": 2, "mem": 2000, "gpu": 2}),
        Shape(0.20, {"cpu": 8, "mem": 8000, "gpu": 2}),
        Shape(0.20, {"cpu": 16, "mem": 14000, "gpu": 2}),
    )
    cpu = (
        Shape(0.30, {"cpu": 1, "mem": 1000}),
        Shape(0.30, {"cpu": 4, "mem": 4000}),
        Shape(0.40, {"cpu": 16, "mem": 14000}),
    )
    mic = (
        Shape(0.6, {"cpu": 1, "mem": 1000, "mic": 1}),
        Shape(0.4, {"cpu": 8, "mem": 8000, "mic": 2}),
    )
    return (
        JobClass(
            "gpu", 0.76, 90.0, 1.9, 86400, (1, 2, 4, 8, 16), (0.6, 0.2, 0.12, 0.06, 0.02), gpu
        ),
        JobClass(
            "cpu", 0.23, 700.0, 1.7, 64800, (1, 2, 4, 8, 16), (0.5, 0.2, 0.15, 0.1, 0.05), cpu
        ),
        JobClass("mic", 0.01, 1200.0, 1.3, 28800, (1, 2, 4), (0.7, 0.2, 0.1), mic),
    )


@dataclass(frozen=True, slots=True)
class WorkloadParams:
    name: str = "Eurora-like"
    start_time: int = 1398902400
    """Written as the SWF header's UnixStartTime (2014-05-01 00:00 UTC)."""
    time_menu_s: tuple[int, ...] = (600, 1800, 3600, 7200, 14400, 21600, 43200, 86400)
    """The round values users request; a request is never above the class maximum."""
    queues: tuple[tuple[int, str], ...] = ((1800, "debug"), (21600, "parallel"), (86400, "longpar"))
    """(largest request, queue name): a job goes to the first queue its request fits;
    SWF field 15 is the queue's 1-based position."""
    arrivals: Arrivals = field(default_factory=Arrivals)
    users: Users = field(default_factory=Users)
    classes: tuple[JobClass, ...] = field(default_factory=_eurora_classes)


def _table(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table")
    return raw


def _number(raw: dict[str, Any], key: str, where: str, default: Any, *, whole: bool) -> Any:
    value = raw.get(key, default)
    ok = isinstance(value, int) if whole else isinstance(value, int | float)
    if not ok or isinstance(value, bool) or value < 0:
        kind = "whole number" if whole else "number"
        raise ConfigError(f"{where}: {key} must be a non-negative {kind}, got {value!r}")
    return value


def _section(cls: type[Any], raw: Any, where: str) -> Any:
    table = _table(raw, where)
    known = {f.name: f for f in fields(cls)}
    unknown = [k for k in table if k not in known]
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(known)}"
        )
    defaults = cls()
    values = {
        name: _number(
            table,
            name,
            where,
            getattr(defaults, name),
            whole=isinstance(getattr(defaults, name), int),
        )
        for name in known
    }
    return cls(**values)


def _parse_class(raw: Any, index: int, where: str) -> JobClass:
    table = _table(raw, f"{where}: [[classes]] entry {index + 1}")
    name = table.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f'{where}: [[classes]] entry {index + 1} needs name = "..."')
    label = f"{where}, class {name!r}"
    units = table.get("units")
    weights = table.get("units_weights")
    if (
        not isinstance(units, list)
        or not isinstance(weights, list)
        or len(units) != len(weights)
        or not units
        or not all(isinstance(u, int) and u >= 1 for u in units)
    ):
        raise ConfigError(
            f"{label}: units (whole numbers >= 1) and units_weights must be lists of equal "
            "length, e.g. units = [1, 2, 4] and units_weights = [0.6, 0.3, 0.1]"
        )
    shapes: list[Shape] = []
    for i, s in enumerate(table.get("shapes", [])):
        st = _table(s, f"{label}: [[classes.shapes]] entry {i + 1}")
        weight = _number(st, "weight", label, 1.0, whole=False)
        per_unit = {k: v for k, v in st.items() if k != "weight"}
        if not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in per_unit.values()
        ):
            raise ConfigError(f"{label}: shape {i + 1}: amounts must be whole numbers >= 0")
        if per_unit.get("cpu", 0) < 1:
            raise ConfigError(f"{label}: shape {i + 1} needs cpu >= 1")
        shapes.append(Shape(float(weight), per_unit))
    if not shapes:
        raise ConfigError(f"{label}: add at least one [[classes.shapes]] table (cpu = ...)")
    known = {
        "name",
        "share",
        "median_run_s",
        "run_sigma",
        "max_run_s",
        "units",
        "units_weights",
        "shapes",
    }
    unknown = [k for k in table if k not in known]
    if unknown:
        raise ConfigError(
            f"{label}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}"
        )
    max_run = _number(table, "max_run_s", label, 86400, whole=True)
    if max_run < 1:
        raise ConfigError(f"{label}: max_run_s must be >= 1")
    return JobClass(
        name=name,
        share=float(_number(table, "share", label, None, whole=False)),
        median_run_s=float(_number(table, "median_run_s", label, None, whole=False)),
        run_sigma=float(_number(table, "run_sigma", label, None, whole=False)),
        max_run_s=max_run,
        units=tuple(units),
        units_weights=tuple(float(w) for w in weights),
        shapes=tuple(shapes),
    )


def load_params(path: Path) -> WorkloadParams:
    """Read a workload TOML file; missing sections keep the Eurora-like defaults."""
    where = f"workload file {path}"
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist; see systems/workloads/eurora.toml") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{where} cannot be read as TOML: {exc}") from exc
    top = ("name", "start_time", "time_menu_s", "queues", "arrivals", "users", "classes")
    unknown = [k for k in data if k not in top]
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(top)}"
        )
    defaults = WorkloadParams()
    menu = data.get("time_menu_s", list(defaults.time_menu_s))
    if (
        not isinstance(menu, list)
        or not menu
        or not all(isinstance(v, int) and v >= 1 for v in menu)
    ):
        raise ConfigError(f"{where}: time_menu_s must be a list of whole seconds >= 1")
    queues = data.get("queues", [[limit, name] for limit, name in defaults.queues])
    if not isinstance(queues, list) or not all(
        isinstance(q, list) and len(q) == 2 and isinstance(q[0], int) and isinstance(q[1], str)
        for q in queues
    ):
        raise ConfigError(f'{where}: queues must be a list of [largest request, "name"] pairs')
    classes = data.get("classes")
    parsed = (
        defaults.classes
        if classes is None
        else tuple(_parse_class(c, i, where) for i, c in enumerate(classes))
    )
    if not parsed or sum(c.share for c in parsed) <= 0:
        raise ConfigError(f"{where}: at least one class with share > 0 is needed")
    return WorkloadParams(
        name=str(data.get("name", defaults.name)),
        start_time=_number(data, "start_time", where, defaults.start_time, whole=True),
        time_menu_s=tuple(sorted(menu)),
        queues=tuple((int(q[0]), str(q[1])) for q in sorted(queues)),
        arrivals=_section(Arrivals, data.get("arrivals", {}), f"{where}, [arrivals]"),
        users=_section(Users, data.get("users", {}), f"{where}, [users]"),
        classes=parsed,
    )
