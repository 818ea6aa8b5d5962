"""``cpsched-bridge``: run the bridge, run one cycle, print a snapshot, compare shadow runs."""

from __future__ import annotations

import json
import logging
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from cpsched import logs
from cpsched.slurm_bridge import shadow
from cpsched.slurm_bridge.config import BridgeSettings, load_settings
from cpsched.slurm_bridge.errors import BridgeError
from cpsched.slurm_bridge.factory import make_backend, make_client
from cpsched.slurm_bridge.loop import Bridge, CycleReport
from cpsched.slurm_bridge.snapshot import dispatch_request
from cpsched.wire.errors import ServiceError

app = typer.Typer(
    name="cpsched-bridge",
    help="Connect a Slurm (or PBS) cluster to the cpsched service.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Bridge TOML file (CPSCHED_BRIDGE_* override it)."),
]
VerboseOpt = Annotated[int, typer.Option("--verbose", "-v", count=True, help="-v info, -vv debug")]


def _settings(config: Path | None) -> BridgeSettings:
    try:
        return load_settings(config)
    except BridgeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def report_json(report: CycleReport) -> dict[str, object]:
    """A cycle's outcome as plain JSON (``once`` prints it; tests and the bench read it)."""
    applied = report.applied
    decision = report.decision
    return {
        "time": report.time,
        "held": report.held,
        "pending": report.pending,
        "running": report.running,
        "decision": None
        if decision is None
        else {
            "starts": {s.job_id: s.allocation for s in decision.starts},
            "extensions": {e.job_id: e.new_time_limit for e in decision.extensions},
            "rejected": {r.job_id: r.reason for r in decision.rejected},
            "dispatcher": decision.diagnostics.dispatcher,
            "dry_run": decision.dry_run,
        },
        "started": applied.started if applied else {},
        "extended": applied.extended if applied else {},
        "refused": applied.refused if applied else {},
        "failed": applied.failed if applied else {},
        "service_error": report.service_error,
        "fallback": report.fallback,
        "rehold": report.rehold,
        "reclaimed": report.reclaimed,
        "finished_posted": report.finished_posted,
        "finished_duplicates": report.finished_duplicates,
        "timings": {k: round(v, 4) for k, v in report.timings.items()},
        "notes": report.notes,
    }


@app.command()
def run(config: ConfigOpt = None, verbose: VerboseOpt = 0) -> None:
    """Run cycles until SIGTERM/SIGINT; errors back off, they never end the loop."""
    logs.configure(_level(verbose), logger="slurm_bridge")
    settings = _settings(config)
    stopping = {"now": False}

    def _stop(signum: int, frame: object) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        bridge = Bridge(settings, make_backend(settings), make_client(settings))
    except BridgeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    def _sleep(seconds: float) -> None:
        # sleep in small steps so a stop signal is honoured quickly
        import time

        end = time.monotonic() + seconds
        while not stopping["now"] and time.monotonic() < end:
            time.sleep(min(0.5, end - time.monotonic()))

    bridge.run(stop=lambda: stopping["now"], sleep=_sleep)


@app.command()
def once(config: ConfigOpt = None, verbose: VerboseOpt = 0) -> None:
    """Run one cycle and print what it did as JSON."""
    logs.configure(_level(verbose), logger="slurm_bridge")
    settings = _settings(config)
    try:
        bridge = Bridge(settings, make_backend(settings), make_client(settings))
        report = bridge.cycle()
    except (BridgeError, ServiceError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    sys.stdout.write(json.dumps(report_json(report), indent=2, ensure_ascii=False) + "\n")


@app.command()
def snapshot(config: ConfigOpt = None) -> None:
    """Read the cluster and print the snapshot the bridge would post (talks to no service)."""
    settings = _settings(config)
    backend = make_backend(settings)
    try:
        state = backend.read_state()
    except BridgeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    request, notes = dispatch_request(
        state,
        shadow=settings.mode == "shadow",
        extensions={},
        splits_tasks=backend.splits_tasks,
        pins_splits=backend.pins_splits,
    )
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    sys.stdout.write(request.model_dump_json(indent=2) + "\n")


@app.command()
def report(
    config: ConfigOpt = None,
    log: Annotated[Path | None, typer.Option(help="Shadow log (default: from config).")] = None,
    tolerance: Annotated[int, typer.Option(help="Seconds counted as 'the same'.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Compare shadow-mode decisions with what Slurm did: earlier / later / same."""
    path = log or _settings(config).shadow_log_path
    if not path.is_file():
        typer.echo(f"error: no shadow log at {path}; run the bridge with mode=shadow", err=True)
        raise typer.Exit(2)
    rows = shadow.compare(path)
    summary = shadow.summary(rows, tolerance_s=tolerance or 0)
    if as_json:
        sys.stdout.write(
            json.dumps(
                {"summary": summary, "jobs": [{**asdict(r), "delta_s": r.delta_s} for r in rows]},
                indent=2,
            )
            + "\n"
        )
        return
    lines = [f"{'job':>10} {'cpsched':>12} {'slurm':>12} {'delta_s':>8}  nodes (cpsched | slurm)"]
    for r in rows:
        verdict = (
            ""
            if r.delta_s is None
            else (
                "earlier"
                if r.delta_s < -tolerance
                else "later"
                if r.delta_s > tolerance
                else "same"
            )
        )
        lines.append(
            f"{r.job_id:>10} {r.cpsched_start or '-':>12} {r.slurm_start or '-':>12} "
            f"{'-' if r.delta_s is None else r.delta_s:>8}  "
            f"{','.join(r.cpsched_nodes) or '-'} | {','.join(r.slurm_nodes) or '-'}  {verdict}"
        )
    lines.append("summary: " + ", ".join(f"{k}={v}" for k, v in summary.items()))
    sys.stdout.write("\n".join(lines) + "\n")


def main() -> None:
    app()


def _level(verbosity: int) -> int:
    if verbosity <= 0:
        return logging.WARNING
    return logging.INFO if verbosity == 1 else logging.DEBUG
