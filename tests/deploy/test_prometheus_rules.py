"""The alert rules in deploy/prometheus: valid for Prometheus, each one firing when it
should and not otherwise (promtool's unit tests), and on metrics the code exports."""

from __future__ import annotations

import subprocess

import yaml

from tests.deploy.metric_names import (
    REPO,
    bridge_metric_names,
    service_metric_names,
    used_metrics,
)

RULES = REPO / "deploy" / "prometheus" / "cpsched-alerts.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "cpsched-alerts.test.yml"


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_promtool_checks_the_rules(promtool):
    done = run(promtool, "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in done.stdout


def test_every_alert_fires_in_promtools_unit_tests(promtool):
    done = run(promtool, "test", "rules", str(RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    tested = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert tested == alert_names()


def alert_names() -> set[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"] for group in groups for rule in group["rules"]}


def test_the_rules_cover_what_operators_asked_for():
    assert {
        "CpschedFallbackRateHigh",
        "CpschedLatencyNearDeadline",
        "CpschedBridgeInFallback",
        "CpschedServiceDown",
    } <= alert_names()


def test_the_rules_use_only_metrics_the_code_exports():
    known = service_metric_names() | bridge_metric_names()
    groups = yaml.safe_load(RULES.read_text())["groups"]
    for rule in (rule for group in groups for rule in group["rules"]):
        assert used_metrics(rule["expr"]) <= known, rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]
