"""``cpsched bench-instances``: re-solve dumped dispatch instances and print figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from cpsched.cli.policy_options import policy_options
from cpsched.errors import ConfigError
from cpsched.runtime.policy import NO_WAIT_BOUND, Policy

console = Console(stderr=True)


@policy_options(exclude=frozenset({"dispatcher"}))
def bench_instances(
    where: Annotated[
        Path,
        typer.Argument(
            help="Directory of *.instances.jsonl.gz files, or one such file.", exists=True
        ),
    ],
    policy: Policy,
    dispatcher: Annotated[
        str,
        typer.Option(
            help="Dispatcher(s), comma-separated, called side by side per instance, each with "
            "the other policy options. A name may change policy settings for itself: "
            "pcp20@cp_time_unit=60@cp_presolve_effort=cpsat (short forms: " + "unit, "
            "presolve, workers, reuse, searchcap, merge, nodesym)."
        ),
    ] = "pcp20",
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
    and the objective against the heuristic's (without the wait bound: the instances are
    of different times, and its guarantees are kept from one call to the next)."""
    from cpsched.replay.bench_instances import bench, records_as_dicts, summarise
    from cpsched.replay.instances import instance_files

    if every < 1:
        raise ConfigError(f"--every must be >= 1, got {every}")
    names = [d.strip() for d in dispatcher.split(",") if d.strip()]
    # Instances of different times are re-solved one by one: no wait bound, whose
    # guarantees are kept from one call of a cluster to its next.
    unbounded = policy.but(**NO_WAIT_BOUND)
    dispatchers = {label: variant(label, unbounded).make_dispatcher() for label in names}
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
    summary = summarise(records, names, policy.deadline)
    summary["files"] = [f.name for f in files]
    if calls is not None:
        with calls.open("w") as out:
            for row in records_as_dicts(records):
                out.write(json.dumps(row) + "\n")
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo(to_text(summary))


SHORT_KEYS = {
    "unit": "cp_time_unit",
    "presolve": "cp_presolve_effort",
    "workers": "cp_workers",
    "reuse": "cp_reuse",
    "searchcap": "cp_search_cap",
    "merge": "cp_merge_running",
    "nodesym": "cp_node_symmetry",
}
"""Short forms of policy fields in dispatcher labels (``pcp20@unit=60``)."""


def variant(label: str, base: Policy) -> Policy:
    """The policy ``label`` names: ``dispatcher[@field=value...]`` over ``base``."""
    name, *options = label.split("@")
    changes: dict[str, str] = {"dispatcher": name}
    for option in options:
        key, equals, value = option.partition("=")
        field = SHORT_KEYS.get(key, key)
        if not equals or field not in Policy.model_fields:
            raise ConfigError(
                f"{label}: {option!r} is not field=value of a policy field; fields: "
                f"{', '.join(Policy.model_fields)}; short forms: {', '.join(SHORT_KEYS)}"
            )
        changes[field] = value
    return Policy.parse({**base.model_dump(), **changes}, where=label)


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
