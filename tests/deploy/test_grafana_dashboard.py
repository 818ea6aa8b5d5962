"""The Grafana dashboard in deploy/grafana: importable, every query valid PromQL (checked
by promtool) and on metrics the service or the bridge exports, and covering what an
operator watches."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import yaml

from tests.deploy.metric_names import (
    REPO,
    bridge_metric_names,
    service_metric_names,
    used_metrics,
)

DASHBOARD = REPO / "deploy" / "grafana" / "cpsched-dashboard.json"
# Grafana's variables, as a query would see them once substituted.
VARIABLES = {"$__rate_interval": "5m", "$cluster": ".*", "$bridge": ".*"}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    for panel in panels(board):
        for target in panel.get("targets", []):
            yield f"{panel['title']} / {target['refId']}", target["expr"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            inner = variable["definition"].removeprefix("label_values(").rsplit(",", 1)[0]
            yield f"variable {variable['name']}", inner


def test_every_metric_the_dashboard_uses_exists_in_the_code():
    known = service_metric_names() | bridge_metric_names()
    used: set[str] = set()
    for where, expr in queries(dashboard()):
        names = used_metrics(expr)
        assert names or expr.startswith("min(up{"), f"{where}: no cpsched metric in {expr}"
        assert names <= known, f"{where}: unknown {names - known}"
        used |= names
    # What the operator watches: latency, fallbacks by reason, queue, starts, extensions,
    # prediction error, starvation and utilisation, start guarantees, the bridge's cycle
    # time and fallback state.
    assert {
        "cpsched_dispatch_seconds_bucket",
        "cpsched_dispatch_deadline_seconds",
        "cpsched_dispatch_fallbacks_total",
        "cpsched_queued_jobs",
        "cpsched_longest_wait_seconds",
        "cpsched_utilisation_ratio",
        "cpsched_guaranteed_jobs",
        "cpsched_guarantees_broken_total",
        "cpsched_jobs_started_total",
        "cpsched_extensions_total",
        "cpsched_prediction_abs_error_seconds_bucket",
        "cpsched_bridge_cycle_phase_seconds",
        "cpsched_bridge_fallback_active",
    } <= used


def test_every_query_is_valid_promql(promtool, tmp_path):
    rules = []
    for i, (_where, expr) in enumerate(queries(dashboard())):
        for variable, value in VARIABLES.items():
            expr = expr.replace(variable, value)
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_imports_cleanly():
    board = dashboard()
    assert board["uid"] == "cpsched-overview"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in panels(board)]
    assert len(ids) == len(set(ids))
    for panel in panels(board):
        box = panel["gridPos"]
        assert box["x"] + box["w"] <= 24, panel["title"]
        assert panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["description"], panel["title"]
