"""The metric names the code exports: the service's registry, and the bridge's textfile
names as its source writes them (``metrics.inc("name")`` / ``metrics.set("name")``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from cpsched.service.metrics import ServiceMetrics

REPO = Path(__file__).resolve().parents[2]
SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum"),
}
METRIC = re.compile(r"\bcpsched_[a-z0-9_]+")


def service_metric_names() -> set[str]:
    names: set[str] = set()
    for family in ServiceMetrics().registry.collect():
        names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def _written_name(call: ast.Call) -> str | None:
    """The metric a ``metrics.inc(...)``/``metrics.set(...)`` call writes, without labels."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in {"inc", "set"} and call.args):
        return None
    owner = func.value
    owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
    if owner_name != "metrics":
        return None
    first = call.args[0]
    if isinstance(first, ast.JoinedStr):  # f'cycle_phase_seconds{{phase="{phase}"}}'
        first = first.values[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value.split("{", 1)[0]
    return None


def bridge_metric_names() -> set[str]:
    names = {"cpsched_bridge_build_info"}
    for path in (REPO / "slurm_bridge").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and (name := _written_name(node)):
                names.add(f"cpsched_bridge_{name}")
    return names


def used_metrics(expr: str) -> set[str]:
    return set(METRIC.findall(expr))
