"""Bridge metrics in the Prometheus text format, written by hand to a textfile.

prometheus-client is not a base dependency; node_exporter's textfile collector reads
the file. No label carries a job or user id (unbounded cardinality).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cpsched.slurm_bridge import __name__ as _package

VERSION = "0.1.0"


@dataclass
class BridgeMetrics:
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)

    def inc(self, name: str, amount: float = 1.0) -> None:
        self.counters[name] = self.counters.get(name, 0.0) + amount

    def set(self, name: str, value: float) -> None:
        self.gauges[name] = value

    def render(self, *, cluster: str, mode: str) -> str:
        lines = [
            "# TYPE cpsched_bridge_build_info gauge",
            f'cpsched_bridge_build_info{{version="{VERSION}",package="{_package}",'
            f'mode="{mode}",cluster="{_escape(cluster)}"}} 1',
        ]
        for name in sorted(self.counters):
            lines += [
                f"# TYPE cpsched_bridge_{name.split('{', 1)[0]} counter",
                f"cpsched_bridge_{name} {self.counters[name]:g}",
            ]
        for name in sorted(self.gauges):
            base = name.split("{", 1)[0]
            lines += [
                f"# TYPE cpsched_bridge_{base} gauge",
                f"cpsched_bridge_{name} {self.gauges[name]:g}",
            ]
        return "\n".join(_dedupe_type_lines(lines)) + "\n"

    def write(self, path: Path, *, cluster: str, mode: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(self.render(cluster=cluster, mode=mode))
        Path(tmp).chmod(0o644)  # node_exporter reads it as another user
        Path(tmp).replace(path)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _dedupe_type_lines(lines: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        if line.startswith("# TYPE"):
            if line in seen:
                continue
            seen.add(line)
        out.append(line)
    return out
