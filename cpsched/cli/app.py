"""The ``cpsched`` command: replay, compare, evaluate predictors, benchmark and serve."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cpsched import __version__, logs
from cpsched.cli import bench, serve, sweep
from cpsched.cli.compare_view import print_comparison
from cpsched.cli.generate import generate
from cpsched.cli.policy_options import policy_options
from cpsched.errors import CpschedError
from cpsched.replay.compare import BASELINE, DEFAULT_RUNS, compare_policies
from cpsched.replay.runner import ReplaySettings, run_replay
from cpsched.replay.swf import bad_lines_note
from cpsched.runtime.policy import NAMED_POLICIES, Policy

app = typer.Typer(
    name="cpsched",
    help="External constraint-programming scheduler for HPC clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Click's plain help: it wraps in 80 columns where rich's tables cut option names.
    rich_markup_mode=None,
)
console = Console(stderr=True)
stdout = Console()

TraceArg = Annotated[
    Path, typer.Argument(help="SWF trace (.swf or .swf.gz).", exists=True, dir_okay=False)
]
SystemOpt = Annotated[
    Path | None,
    typer.Option(help="TOML system description; default: derived from the SWF header."),
]
JobsOpt = Annotated[int | None, typer.Option("--jobs", help="Replay only the first N jobs.")]
SkipOpt = Annotated[
    int,
    typer.Option(
        "--skip-jobs",
        min=0,
        help="Leave out the first N jobs (after cleaning); with --jobs M, replay jobs N+1 "
        "to N+M: a slice of the trace, started on an empty machine.",
    ),
]
WarmupOpt = Annotated[
    float, typer.Option(help="Share of the first jobs left out of the statistics.")
]
ValidateOpt = Annotated[
    bool, typer.Option(help="Check every snapshot and decision independently (slow).")
]
ChargeOpt = Annotated[
    bool, typer.Option(help="Charge the measured decision time to the simulated clock.")
]
PlotsOpt = Annotated[bool, typer.Option(help="Write PNG plots.")]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Stop at the trace's first malformed line (exit code 2, naming FILE:LINE and "
        "what is wrong) instead of leaving malformed lines out and reporting them.",
    ),
]
TimingsOpt = Annotated[
    bool,
    typer.Option(
        help="Keep the measured dispatch times in summary.json; --no-timings moves them to "
        "timings.json so that the same replay always gives a byte-identical summary.json."
    ),
]


@app.callback()
def main_options(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False,
) -> None:
    logs.configure(logging.INFO if verbose else logging.WARNING)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


REPLAY_EXAMPLES = """Examples:

\b
  cpsched replay KTH-SP2-1996-2.1-cln.swf.gz --out out/kth
  cpsched replay TRACE --out out/today --policy today --jobs 5000
  cpsched replay TRACE --out out/pcp20 --dispatcher pcp20 --jobs 2000
"""

COMPARE_EXAMPLES = """Examples:

\b
  cpsched compare KTH-SP2-1996-2.1-cln.swf.gz --out out/compare
  cpsched compare TRACE --out out/cmp --policies today,default --jobs 5000
"""


@app.command(epilog=REPLAY_EXAMPLES)
@policy_options
def replay(
    trace: TraceArg,
    out: Annotated[Path, typer.Option(help="Directory for summary.json, jobs, plots.")],
    policy: Policy,
    system: SystemOpt = None,
    jobs: JobsOpt = None,
    skip_jobs: SkipOpt = 0,
    warmup: WarmupOpt = 0.01,
    validate: ValidateOpt = False,
    charge_decision_time: ChargeOpt = False,
    plots: PlotsOpt = True,
    timings: TimingsOpt = True,
    strict: StrictOpt = False,
    requeue_delay: Annotated[
        int,
        typer.Option(
            min=0,
            help="With --trial-run: seconds a job put back waits before it may start again, "
            "as the workload manager holds it back (Slurm about 120, PBS 0).",
        ),
    ] = 0,
    dump_instances: Annotated[
        Path | None,
        typer.Option(help="Write every dispatch instance to DIR (for bench-instances)."),
    ] = None,
    service: Annotated[
        str | None,
        typer.Option(
            help="Replay over HTTP against the service at this URL: it predicts and "
            "dispatches with its own configured policy; --limits, --correction and "
            "--correction-lead still describe the simulated cluster (give them as the "
            "service has them)."
        ),
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="Bearer token for --service.", envvar="CPSCHED_TOKEN")
    ] = None,
    cluster: Annotated[
        str,
        typer.Option(
            help="Cluster name at the service: it must be new (the service would predict "
            "from its history); retired at the end unless --keep-cluster."
        ),
    ] = "replay",
    keep_cluster: Annotated[
        bool,
        typer.Option(help="Keep --cluster at the service after the replay (its audit trail)."),
    ] = False,
) -> None:
    """Replay a trace through one policy and write its metrics to OUT."""
    settings = ReplaySettings(
        trace=trace,
        out=out,
        policy=policy,
        system=system,
        jobs=jobs,
        skip_jobs=skip_jobs,
        warmup_fraction=warmup,
        requeue_delay=requeue_delay,
        validate=validate,
        charge_decision_time=charge_decision_time,
        plots=plots,
        timings=timings,
        dump_instances=dump_instances,
        service=service,
        token=token,
        cluster=cluster,
        keep_cluster=keep_cluster,
        strict=strict,
    )
    with Progress(
        TextColumn("[bold]replay[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{trace.name} · {policy.dispatcher}", total=None)
        summary = run_replay(
            settings,
            on_loaded=lambda n: bar.update(task, total=n),
            progress=lambda done: bar.update(task, completed=done),
        )
    _report_bad_lines(trace, summary)
    console.print(
        f"{summary['jobs']} jobs · mean wait {summary['mean_wait_s']} s · "
        f"mean bounded slowdown {summary['mean_bounded_slowdown']} · "
        f"killed {summary['killed_jobs']} → {out / 'summary.json'}"
    )


@app.command(epilog=COMPARE_EXAMPLES)
@policy_options(raw=True)
def compare(
    trace: TraceArg,
    out: Annotated[
        Path, typer.Option(help="Directory for one sub-directory per run, tables and charts.")
    ],
    policy: dict[str, Any],
    policies: Annotated[
        str,
        typer.Option(
            help="Comma-separated runs: named policies (today, easy++, default, oracle) or "
            "dispatchers (each on --policy); the policy options given apply to every run. "
            "today is always run: the table's ratios are to it."
        ),
    ] = ",".join(DEFAULT_RUNS),
    system: SystemOpt = None,
    jobs: JobsOpt = None,
    warmup: WarmupOpt = 0.01,
    workers: Annotated[int, typer.Option(help="Parallel replay processes.")] = 2,
    plots: PlotsOpt = True,
    strict: StrictOpt = False,
) -> None:
    """Replay a trace through several policies, tabulate each metric's ratio to today's
    (EASY backfilling on the users' requested times) and chart them side by side."""
    overrides = {k: v for k, v in policy.items() if k != "policy"}
    runs: dict[str, Policy] = {}
    for label in (p.strip() for p in policies.split(",") if p.strip()):
        if label in NAMED_POLICIES:
            runs[label] = Policy.named(label, **overrides)
        else:
            values = {**policy, "dispatcher": label}
            runs[label] = Policy.parse(values, where=f"run {label}")
    base = ReplaySettings(
        trace=trace,
        out=out,
        policy=runs.get("today", Policy.named("today")),
        system=system,
        jobs=jobs,
        warmup_fraction=warmup,
        plots=plots,
        strict=strict,
    )
    with console.status(f"replaying {trace.name} with {', '.join(runs)}"):
        comparison = compare_policies(base, runs, workers=workers)
    print_comparison(comparison, BASELINE, stdout)
    _report_bad_lines(trace, json.loads((out / BASELINE / "summary.json").read_text()))
    charts = f" (with its charts, {out}/compare_*.png)" if plots else ""
    console.print(
        f"tables → {out / 'comparison.md'}{charts}, {out / 'comparison.csv'}, "
        f"{out / 'job_by_job.json'}"
    )


def _report_bad_lines(trace: Path, summary: dict[str, Any]) -> None:
    """The trace's malformed lines, which the replay left out, on stderr."""
    note = bad_lines_note(trace.name, summary["settings"]["cleaning"])
    if note is not None:
        console.print(f"[yellow]warning:[/] {escape(note)}", soft_wrap=True)


app.command("bench-instances")(bench.bench_instances)
app.command("generate")(generate)
app.command("sweep")(sweep.sweep)
serve.register(app)


@app.command("predict-eval")
@policy_options
def predict_eval(
    trace: TraceArg,
    out: Annotated[Path, typer.Option(help="Directory for accuracy.json and the ratio plot.")],
    policy: Policy,
    system: SystemOpt = None,
    jobs: JobsOpt = None,
) -> None:
    """Measure the policy's predictor on a trace's completions, in time order, without
    scheduling (the other policy options do not matter here)."""
    from cpsched.predictor.accuracy import evaluate, write_accuracy
    from cpsched.replay.outputs import output_directory
    from cpsched.replay.runner import resolve_system
    from cpsched.replay.swf import read_swf

    output_directory(out)
    loaded = read_swf(trace, resolve_system(trace, system), limit=jobs)
    oracle = policy.predictor == "oracle"
    run_times = {tj.job.id: tj.run_time for tj in loaded.jobs} if oracle else None
    name = policy.predictor
    with console.status(f"predicting {len(loaded.jobs)} jobs of {trace.name} with {name}"):
        result = evaluate(loaded.jobs, policy.make_predictor(run_times=run_times))
    write_accuracy(result, out)
    console.print(
        f"{result['jobs']} predictions · MAE {result['mae_s']} s · "
        f"under {result['under_rate']} · over {result['over_rate']} · "
        f"pinball(0.9) {result['pinball_loss_s']} s → {out / 'accuracy.json'}"
    )


def main() -> None:
    try:
        app()
    except (CpschedError, OSError) as error:
        # OSError: a file the command had to read or write (the checks up front catch most).
        # Escaped: messages name TOML tables and extras in brackets ([[nodes]], [sweep]).
        console.print(f"[red]error:[/] {escape(str(error))}", soft_wrap=True)
        raise SystemExit(2) from None
