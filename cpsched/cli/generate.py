"""``cpsched generate``: a synthetic workload for a (heterogeneous) system."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True)


def generate(
    system: Annotated[
        Path, typer.Option(help="TOML system description the jobs must fit (e.g. eurora).")
    ],
    out: Annotated[
        Path, typer.Option(help="SWF file to write (.swf, or .swf.gz); the sidecar goes beside.")
    ],
    jobs: Annotated[int, typer.Option(help="Number of jobs.")] = 40000,
    seed: Annotated[int, typer.Option(help="Random seed: the same seed gives the same bytes.")] = 1,
    params: Annotated[
        Path | None,
        typer.Option(
            help="Workload TOML (systems/workloads/eurora.toml documents every key); "
            "default: the built-in Eurora-like profile."
        ),
    ] = None,
) -> None:
    """Generate a workload: an SWF trace plus OUT.gres.csv with per-unit accelerator
    requests and job names (docs/heterogeneous.md)."""
    from cpsched.replay.generate import generate_jobs, write_trace
    from cpsched.replay.generate_params import WorkloadParams, load_params
    from cpsched.replay.system import load_system

    machine = load_system(system)
    workload = load_params(params) if params is not None else WorkloadParams()
    made = generate_jobs(workload, machine, jobs, seed)
    sidecar = write_trace(out, made, workload, machine, seed)
    days = (made[-1].submit - made[0].submit) / 86400
    shares = {
        c.name: sum(j.job_class == c.name for j in made) / len(made) for c in workload.classes
    }
    mix = ", ".join(f"{name} {share:.1%}" for name, share in shares.items())
    console.print(f"{len(made)} jobs over {days:.1f} days ({mix}) → {out}, {sidecar}")
