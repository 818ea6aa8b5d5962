"""Run workload-manager commands as argv lists (never through a shell)."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cpsched.slurm_bridge.errors import CommandError

log = logging.getLogger("slurm_bridge.commands")


class Runner(Protocol):
    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> str:
        """stdout of ``argv``; CommandError if it fails."""
        ...


@dataclass
class SubprocessRunner:
    """Runs argv with a timeout; records how long each command took (for the bench)."""

    timeout_s: float = 30.0
    timings: list[tuple[str, float]] = field(default_factory=list)
    history: list[list[str]] = field(default_factory=list)  # every argv run, in order

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> str:
        argv = [str(a) for a in argv]
        full_env = {**os.environ, **env} if env else None
        self.history.append(argv)
        started = time.perf_counter()
        try:
            done = subprocess.run(  # argv list, shell=False: names with quotes are data
                argv,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=self.timeout_s,
                env=full_env,
                check=False,
            )
        except FileNotFoundError:
            raise CommandError(argv, "command not found") from None
        except subprocess.TimeoutExpired:
            raise CommandError(argv, f"timed out after {self.timeout_s:g} s") from None
        finally:
            self.timings.append((Path(argv[0]).name, time.perf_counter() - started))
        if done.returncode != 0:
            raise CommandError(argv, f"exit status {done.returncode}", done.stderr)
        log.debug("ran %s", argv)
        return done.stdout
