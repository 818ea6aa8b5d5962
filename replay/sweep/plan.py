"""What a sweep runs: trace slices, labelled policies, and the cells that pair them.

A cell is one replay, named by an id that changes whenever anything that could change its
summary changes (the trace's bytes, the machine, the slice, every policy field, the
warm-up): a rerun trusts a finished cell's files only under the same id.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

from cpsched.replay.metrics import jsonable
from cpsched.replay.runner import ReplaySettings
from cpsched.replay.system import System
from cpsched.runtime.policy import Policy

PLAN_VERSION = 1
"""Part of every cell id: bump it when a cell's replay changes meaning, so that reruns
do not reuse summaries made under the old meaning."""


@dataclass(frozen=True, slots=True)
class TraceSlice:
    """One trace (or a range of its jobs) on one machine."""

    label: str
    path: Path
    digest: str
    """SHA-256 of the trace's files (the SWF and its sidecar, ``shipping.TraceBundle``)."""
    system: System
    """Loaded where the grid is read: workers need not have the system file."""
    system_file: Path | None = None
    skip_jobs: int = 0
    jobs: int | None = None


@dataclass(frozen=True, slots=True)
class GridPolicy:
    """A policy of the grid, by its label and the named policy it starts from."""

    label: str
    base: str
    policy: Policy


@dataclass(frozen=True)
class Cell:
    """One replay: a trace slice under a policy, with the sweep's replay settings."""

    trace: TraceSlice
    policy: GridPolicy
    warmup: float = 0.01
    validate: bool = False

    @cached_property
    def id(self) -> str:
        """``<trace>.<policy>.<digest>``: readable, and new whenever the replay changes."""
        key = {
            "version": PLAN_VERSION,
            "trace": self.trace.digest,
            # Not repr(): sets of strings (node features) print in a per-process order.
            "system": jsonable(asdict(self.trace.system)),
            "skip_jobs": self.trace.skip_jobs,
            "jobs": self.trace.jobs,
            "policy": self.policy.policy.model_dump(mode="json"),
            "warmup": self.warmup,
            "validate": self.validate,
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        return f"{slug(self.trace.label)}.{slug(self.policy.label)}.{digest[:12]}"

    def replay_settings(self, trace: Path, out: Path) -> ReplaySettings:
        """The settings ``cpsched replay`` would use for this cell, reading ``trace`` (the
        worker's copy). Summaries only: no plots, wall-clock figures kept apart."""
        return ReplaySettings(
            trace=trace,
            out=out,
            policy=self.policy.policy,
            system=self.trace.system_file,
            jobs=self.trace.jobs,
            skip_jobs=self.trace.skip_jobs,
            warmup_fraction=self.warmup,
            validate=self.validate,
            plots=False,
            timings=False,
        )

    def replay_command(self, out: Path) -> str:
        """The ``cpsched replay`` command that writes this cell's ``summary.json`` into
        ``out``, byte for byte: the named policy, then every field that differs from it.

        (A field set to None where the named policy has a value cannot be written as an
        option; no named policy sets the optional fields, so it does not arise.)"""
        args = ["cpsched", "replay", str(self.trace.path), "--out", str(out)]
        args += ["--policy", self.policy.base]
        named = Policy.named(self.policy.base)
        for name, value in self.policy.policy.model_dump().items():
            if value == getattr(named, name) or value is None:
                continue
            flag = name.replace("_", "-")
            if isinstance(value, bool):
                args.append(f"--{flag}" if value else f"--no-{flag}")
            else:
                args += [f"--{flag}", str(value)]
        if self.trace.system_file is not None:
            args += ["--system", str(self.trace.system_file)]
        if self.trace.skip_jobs:
            args += ["--skip-jobs", str(self.trace.skip_jobs)]
        if self.trace.jobs is not None:
            args += ["--jobs", str(self.trace.jobs)]
        args += ["--warmup", repr(self.warmup)]
        if self.validate:
            args.append("--validate")
        args += ["--no-timings", "--no-plots"]
        return shlex.join(args)


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """A grid read and checked: every trace slice under every policy."""

    source: Path
    traces: tuple[TraceSlice, ...]
    policies: tuple[GridPolicy, ...]
    warmup: float = 0.01
    validate: bool = False

    def cells(self) -> list[Cell]:
        """Every cell, trace slice by trace slice, in the grid's order."""
        return [
            Cell(trace, policy, self.warmup, self.validate)
            for trace in self.traces
            for policy in self.policies
        ]


def slug(label: str) -> str:
    """``label`` fit for a file name: runs of other characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9+.-]+", "_", label).strip("_.") or "_"
