"""Reading a sweep grid: a TOML file naming trace slices and policies (docs/sweeps.md).

::

    [replay]                        # optional; applies to every cell
    warmup = 0.01                   # share of the first jobs left out of the statistics
    validate = false

    [[traces]]
    path = "traces/KTH-SP2-1996-2.1-cln.swf.gz"   # relative to the grid file; $VARS expand
    name = "kth"                    # optional; default: the file name without .swf(.gz)
    system = "systems/kth.toml"     # optional; default: the machine of the SWF header
    jobs = 3000                     # optional: the first 3000 jobs; "3000:6000" jobs 3001 to
                                    # 6000; a list of these, one trace slice each

    [[policies]]
    policy = "today"                # a named policy: today, conservative, easy++, default, oracle

    [[policies]]
    name = "hcp3"                   # optional label; default: the named policy's name
    policy = "default"              # optional; default: "default"
    cp_window = [50, 100]           # a list: one policy per value
    cp_limit = { from = 0.01, to = 0.04, factor = 2 }   # 0.01, 0.02, 0.04
    backfill_depth = { from = 1, to = 9, step = 4 }     # 1, 5, 9

Every other key of a policy table is a field of :class:`~cpsched.runtime.Policy`, by its
name; lists and ranges in one table give every combination. A CP policy's searches are
limited by solver work, as in every replay (``cp_replay_search``), so a cell gives the
same result on any worker. ``today`` is added when no policy has that label: the report's
ratios are to it. Every mistake is a :class:`GridError` naming the file and the table.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cpsched.errors import ConfigError, GridError, TraceError
from cpsched.replay.compare import BASELINE, with_baseline
from cpsched.replay.runner import resolve_system
from cpsched.replay.sweep.plan import GridPolicy, SweepPlan, TraceSlice
from cpsched.replay.sweep.ranges import expand, parse_jobs
from cpsched.replay.sweep.shipping import TraceBundle
from cpsched.replay.system import read_toml
from cpsched.runtime.policy import NAMED_POLICIES, Policy

TOP_KEYS = ("replay", "traces", "policies")
REPLAY_KEYS = ("warmup", "validate")
TRACE_KEYS = ("path", "name", "system", "jobs")
LABEL_KEYS = ("name", "policy")


def load_grid(path: Path) -> SweepPlan:
    """The plan of the grid at ``path``: every trace found and its machine loaded, every
    policy validated. Raises :class:`GridError` on the first mistake."""
    data = read_toml(path, f"grid file {path}", missing="check the path", error=GridError)
    where = f"grid {path}"
    _known(data, TOP_KEYS, where)
    replay = _table(data.get("replay", {}), f"{where}, [replay]")
    _known(replay, REPLAY_KEYS, f"{where}, [replay]")
    warmup = replay.get("warmup", 0.01)
    if isinstance(warmup, bool) or not isinstance(warmup, int | float) or not 0 <= warmup < 1:
        raise GridError(f"{where}, [replay]: warmup must be a share in [0, 1), got {warmup!r}")
    validate = replay.get("validate", False)
    if not isinstance(validate, bool):
        raise GridError(f"{where}, [replay]: validate must be true or false, got {validate!r}")
    traces = [
        piece
        for i, raw in enumerate(_tables(data, "traces", where))
        for piece in _trace(raw, path.parent, f"{where}, traces[{i + 1}]")
    ]
    policies = [
        policy
        for i, raw in enumerate(_tables(data, "policies", where))
        for policy in _policies(raw, f"{where}, policies[{i + 1}]")
    ]
    for kind, labels in (
        ("trace", [t.label for t in traces]),
        ("policy", [p.label for p in policies]),
    ):
        if len(set(labels)) < len(labels):
            twice = sorted({x for x in labels if labels.count(x) > 1})
            raise GridError(
                f"{where}: more than one {kind} is labelled {', '.join(map(repr, twice))}; "
                "give each its own name"
            )
    added = with_baseline({p.label: p.policy for p in policies})
    if BASELINE not in {p.label for p in policies}:
        policies.append(GridPolicy(BASELINE, BASELINE, added[BASELINE]))
    return SweepPlan(path, tuple(traces), tuple(policies), float(warmup), validate)


def _trace(raw: Any, root: Path, where: str) -> list[TraceSlice]:
    """The slices of one ``[[traces]]`` table."""
    table = _table(raw, where)
    _known(table, TRACE_KEYS, where)
    if "path" not in table:
        raise GridError(f'{where}: path is missing; add path = "TRACE.swf.gz"')
    path = _file(table["path"], root, f"{where}: trace file")
    system_file = (
        None if "system" not in table else _file(table["system"], root, f"{where}: system file")
    )
    label = table.get("name", path.name.removesuffix(".gz").removesuffix(".swf"))
    if not isinstance(label, str) or not label.strip():
        raise GridError(f"{where}: name must be a non-empty string, got {label!r}")
    try:
        system = resolve_system(path, system_file)
    except ConfigError as exc:  # the system file's errors say what to fix
        raise GridError(f"{where}: {exc}") from None
    except TraceError as exc:  # the header cannot describe the machine
        raise GridError(f'{where}: {exc} (here: system = "FILE" in this table)') from None
    digest = TraceBundle.read(path).digest
    slices = parse_jobs(table.get("jobs"), where)
    return [
        TraceSlice(
            label=label if jobs is None and not skip else f"{label}[{skip}:{_end(skip, jobs)}]",
            path=path,
            digest=digest,
            system=system,
            system_file=system_file,
            skip_jobs=skip,
            jobs=jobs,
        )
        for skip, jobs in slices
    ]


def _end(skip: int, jobs: int | None) -> str:
    return "" if jobs is None else str(skip + jobs)


def _policies(raw: Any, where: str) -> list[GridPolicy]:
    """Every policy one ``[[policies]]`` table gives: one per combination of its lists."""
    table = dict(_table(raw, where))
    unknown = [k for k in table if k not in LABEL_KEYS and k not in Policy.model_fields]
    for key in unknown:
        close = difflib.get_close_matches(key, list(Policy.model_fields), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise GridError(
            f"{where}: unknown policy field {key!r}{hint}; the fields are the policy's: "
            + ", ".join(Policy.model_fields)
        )
    base = table.pop("policy", "default")
    if not isinstance(base, str) or base not in NAMED_POLICIES:
        raise GridError(
            f"{where}: policy = {base!r} is not a named policy; choose one of "
            f"{', '.join(NAMED_POLICIES)}, and vary fields in their own keys"
        )
    name = table.pop("name", None)
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise GridError(f"{where}: name must be a non-empty string, got {name!r}")
    varying = {key: expand(value, f"{where}, {key}") for key, value in table.items()}
    out = []
    for combination in _combinations(varying):
        changed = [k for k, values in varying.items() if len(values) > 1]
        label = " ".join([name or base, *(f"{k}={combination[k]}" for k in changed)])
        try:
            policy = Policy.parse({"policy": base, **combination}, where=f"{where} ({label})")
        except ConfigError as exc:
            raise GridError(str(exc)) from None
        out.append(GridPolicy(label, base, policy))
    return out


def _combinations(varying: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """Every choice of one value per key, the last key varying fastest."""
    combos: list[dict[str, Any]] = [{}]
    for key, values in varying.items():
        combos = [{**c, key: v} for c in combos for v in values]
    return combos


def _file(raw: Any, root: Path, what: str) -> Path:
    """An existing file named by ``raw`` ($VARS and ~ expanded, relative to ``root``)."""
    if not isinstance(raw, str) or not raw.strip():
        raise GridError(f"{what} must be a path string, got {raw!r}")
    path = Path(os.path.expandvars(raw)).expanduser()
    path = (root / path).resolve() if not path.is_absolute() else path
    if not path.is_file():
        raise GridError(f"{what} {raw!r} does not exist (looked for {path})")
    return path


def _known(table: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    unknown = [k for k in table if k not in keys]
    if unknown:
        raise GridError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(keys)}"
        )


def _table(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise GridError(f"{where} must be a table, got {raw!r}")
    return raw


def _tables(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    tables = data.get(key)
    if not isinstance(tables, list) or not tables:
        raise GridError(f"{where}: no [[{key}]]; add at least one [[{key}]] table")
    return tables
