"""``cpsched bench-instances``: re-solve dumped dispatch instances and print figures."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from cpsched.errors import ConfigError

if TYPE_CHECKING:
    from cpsched.core.cp import ModelConfig, SearchConfig
    from cpsched.core.dispatcher import Dispatcher

console = Console(stderr=True)


def bench_instances(
    where: Annotated[
        Path,
        typer.Argument(
            help="Directory of *.instances.jsonl.gz files, or one such file.", exists=True
        ),
    ],
    dispatcher: Annotated[
        str,
        typer.Option(
            help="Dispatcher(s), comma-separated, called side by side per instance. A CP "
            "name may carry variants: pcp20@unit=60 (model time unit, s), "
            "pcp20@presolve=cpsat (CP-SAT's own presolve effort), pcp20@merge=off (a "
            "running rectangle per node)."
        ),
    ] = "pcp20",
    allocator: Annotated[str, typer.Option(help="first-fit or best-fit.")] = "best-fit",
    deadline: Annotated[float, typer.Option(help="CP: seconds per call.")] = 2.0,
    cp_limit: Annotated[float, typer.Option(help="CP: first restart's limit.")] = 1.0,
    deterministic: Annotated[
        bool, typer.Option(help="CP: limit searches by solver work, not wall time.")
    ] = False,
    time_unit: Annotated[
        int, typer.Option(help="CP: seconds per model time unit (coarser: smaller domains).")
    ] = 1,
    every: Annotated[int, typer.Option(help="Take every N-th instance only.")] = 1,
    limit: Annotated[int | None, typer.Option(help="At most N instances per file.")] = None,
    max_queued: Annotated[
        int | None, typer.Option(help="Only instances with at most N queued jobs.")
    ] = None,
    min_queued: Annotated[
        int, typer.Option(help="Only instances with at least N queued jobs.")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
    calls: Annotated[
        Path | None, typer.Option(help="Also write one JSON line per call to this file.")
    ] = None,
) -> None:
    """Re-solve dumped dispatch instances; print latency, model size, statuses, fallbacks
    and the objective against the heuristic's."""
    from cpsched.core.cp import ModelConfig, SearchConfig
    from cpsched.replay.bench_instances import bench, records_as_dicts, summarise
    from cpsched.replay.instances import instance_files

    if every < 1:
        raise ConfigError(f"--every must be >= 1, got {every}")
    names = [d.strip() for d in dispatcher.split(",") if d.strip()]
    search = SearchConfig(
        initial_limit=cp_limit,
        max_limit=16 * cp_limit,
        deadline=deadline,
        deterministic=deterministic,
    )
    dispatchers = {
        label: variant(label, allocator, search, ModelConfig(time_unit=time_unit))
        for label in names
    }
    files = instance_files(where)
    with console.status(f"re-solving instances of {len(files)} file(s) with {', '.join(names)}"):
        records = bench(
            files,
            dispatchers,
            every=every,
            limit=limit,
            max_queued=max_queued,
            min_queued=min_queued,
        )
    summary = summarise(records, names, deadline)
    summary["files"] = [f.name for f in files]
    if calls is not None:
        with calls.open("w") as out:
            for row in records_as_dicts(records):
                out.write(json.dumps(row) + "\n")
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo(to_text(summary))


def variant(label: str, allocator: str, search: SearchConfig, model: ModelConfig) -> Dispatcher:
    """The dispatcher ``label`` names: ``name[@key=value...]``, keys as in VARIANTS."""
    from cpsched.core import make_dispatcher
    from cpsched.core.cp import CP_DISPATCHERS, SearchConfig, make_cp_dispatcher
    from cpsched.core.cp.search import PRESOLVE_EFFORT

    name, *options = label.split("@")
    if name not in CP_DISPATCHERS:
        if options:
            raise ConfigError(f"{label}: only CP dispatchers take @ variants")
        return make_dispatcher(name, allocator)
    merge, node_symmetry = True, False
    for option in options:
        key, _, value = option.partition("=")
        if key == "unit" and value.isdigit() and int(value) >= 1:
            model = replace(model, time_unit=int(value))
        elif key == "presolve" and value in ("cpsat", "bounded"):
            bounded = SearchConfig()
            effort = {f: None if value == "cpsat" else getattr(bounded, f) for f in PRESOLVE_EFFORT}
            search = replace(search, **effort)  # type: ignore[arg-type]
        elif key == "workers" and value.isdigit() and int(value) >= 1:
            search = replace(search, num_workers=int(value))
        elif key == "reuse" and value == "on":
            search = replace(search, reuse=True)
        elif key == "searchcap" and value.isdigit() and int(value) >= 1 and name == "pcp3":
            search = replace(search, search_size_cap=int(value))
        elif key == "merge" and value == "off" and name == "pcp20":
            merge = False
        elif key == "nodesym" and value == "on" and name == "pcp3":
            node_symmetry = True
        else:
            raise ConfigError(f"{label}: unknown variant {option!r}; use {VARIANTS}")
    dispatcher = make_cp_dispatcher(name, allocator, search, model=model)
    if not merge:
        dispatcher.merge_running = False  # type: ignore[attr-defined]
    if node_symmetry:
        dispatcher.node_symmetry = True  # type: ignore[attr-defined]
    return dispatcher


VARIANTS = (
    "unit=<seconds>, presolve=cpsat|bounded, workers=<n>, reuse=on (consecutive instances), "
    "(pcp20) merge=off, (pcp3) nodesym=on|searchcap=<x[i,n] variables>"
)


def to_text(summary: dict[str, Any]) -> str:
    lines = [f"files: {', '.join(summary['files'])}; deadline {summary['deadline_s']} s"]
    for name, s in summary["dispatchers"].items():
        lat, model, obj = s["latency_ms"], s["model"], s["objective_vs_heuristic"]
        lines += [
            f"{name}: {s['calls']} calls (queued p50 {s['queued']['p50']:.0f}, "
            f"max {s['queued']['max']:.0f})",
            f"  latency ms: p50 {lat['p50']}  p99 {lat['p99']}  max {lat['max']}  "
            f"mean {lat['mean']}; past the deadline: {s.get('past_deadline', 'n/a')}",
            f"  cpu ms: p50 {s['cpu_ms']['p50']}  p99 {s['cpu_ms']['p99']}  "
            f"max {s['cpu_ms']['max']}",
            f"  model (mean / max): variables {model['variables']['mean']} / "
            f"{model['variables']['max']}, constraints {model['constraints']['mean']} / "
            f"{model['constraints']['max']}, intervals {model['intervals']['mean']} / "
            f"{model['intervals']['max']} ({model['calls_with_model']} calls with a model)",
            f"  statuses: {s['statuses']}",
            f"  fallbacks: {s['fallbacks']} {s['fallback_reasons'] or ''}",
            f"  objective vs heuristic-seeded plan: {obj['better']} better, {obj['equal']} "
            f"equal, {obj['worse']} worse of {obj['calls']}; mean reduction "
            f"{obj['mean_reduction']}",
        ]
        if s["phases_ms"]:
            lines.append(
                "  phases ms (p50/p99/max): "
                + ", ".join(
                    f"{n} {p['p50']}/{p['p99']}/{p['max']}" for n, p in s["phases_ms"].items()
                )
            )
    for pair, r in summary.get("variables_ratio", {}).items():
        if r["instances"]:
            lines.append(
                f"variables {pair}: median {r['median']}, max {r['max']}, "
                f"< 0.1 on {r['below_0.1']} of {r['instances']} instances"
            )
    return "\n".join(lines)
