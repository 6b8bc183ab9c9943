"""The alert rules (``deploy/prometheus/alerts.yml``): valid for Prometheus, each alert
fired by its series and silent on the one that must not fire (promtool's unit tests in
``alerts.test.yml``), and each with its labels, annotations and runbook section."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.support.runtime_fixtures import ROOT

RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts.test.yml"
RUNBOOKS = ROOT / "docs" / "operations" / "alerts.md"
# The names operators search for.
REQUIRED = {
    "AiJobsBreakerOpen",
    "AiJobsPlatformBudgetNearlySpent",
    "AiJobsNoRuntimes",
    "AiJobsQueueBacklog",
    "AiJobsFailureRate",
    "AiJobsLeasesLapsing",
    "AiJobsServerErrors",
    "AsynchQueueBacklog",
    "AsynchModelErrors",
    "AiJobsTargetDown",
}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip("needs Debian's prometheus package for promtool (make test installs it: make prometheus)")
    return subprocess.run([binary, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def alerts() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_promtool_checks_the_rules():
    run = promtool("check", "rules", str(RULES))
    assert run.returncode == 0, run.stdout + run.stderr


def test_promtool_unit_tests_of_every_alert_pass():
    run = promtool("test", "rules", str(RULE_TESTS))
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_alert_is_unit_tested():
    tested = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in alerts()} <= tested


def test_every_alert_has_its_severity_summary_description_and_runbook_section():
    rules = alerts()
    assert {rule["alert"] for rule in rules} >= REQUIRED
    headings = set(re.findall(r"^## (\S+)\s*$", RUNBOOKS.read_text(), flags=re.MULTILINE))
    for rule in rules:
        name = rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        notes = rule["annotations"]
        assert notes["summary"] and notes["description"], name
        assert "{{" in notes["description"], f"{name}: the description names no figure"
        # The page's anchor is the heading lowercased, with the docs site's base URL before it.
        assert notes["runbook_url"].endswith(f"#{name.lower()}"), name
        assert "$externalLabels.docs_url" in notes["runbook_url"], name
        assert name in headings, f"{name} has no section in {RUNBOOKS.relative_to(ROOT)}"
