"""The Grafana dashboard (``deploy/grafana/aijobs.json``) and the alert rules name only
metrics that ``/metrics`` exports, and exports from the first scrape of a fresh server:
an expression over a metric that appears later, or never, would show nothing, or alert on
nothing, without a word. And the JSON is a dashboard current Grafana imports: panels
with targets, the data source a variable."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.asynch_fixtures import make_model
from tests.support.ops import Scrape, gunicorn
from tests.support.runtime_fixtures import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "aijobs.json"
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
# What Prometheus itself records for each target, not the platform.
PROMETHEUS_OWN = {"up"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(\s*\()?")
KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "atan2", "inf", "nan", "Inf", "NaN",
}  # fmt: skip
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers not called as functions or
    aggregations, outside strings, label matchers, groupings and range brackets."""
    text = _STRING.sub('""', expr)
    text = _VARIABLE.sub("5m", text)
    text = re.sub(r"\{[^}]*\}", "{}", text)  # label matchers: label names and values
    text = re.sub(r"\[[^\]]*\]", "[]", text)  # ranges and subqueries' durations
    text = _GROUPING.sub(" ", text)
    return {
        name for name, call in _IDENTIFIER.findall(text) if not call and name not in KEYWORDS
    }  # fmt: skip


def test_the_name_reader_finds_metrics_and_nothing_else():
    expr = (
        'histogram_quantile(0.95, sum by (api, le) (rate(aijobs_http_request_duration_seconds_bucket{api=~"u.+"}'
        "[$__rate_interval]))) > ignoring (job_type) group_left () (5 * aijobs_job_lock_seconds) "
        'and on() sum without (status) (aijobs_queue_jobs{status="pending"} offset 5m) > 1e+07 '
        'or label_replace(up, "budget", "tokens", "", "") unless max(x_total[10m:1m]) by (state)'
    )
    assert metric_names(expr) == {
        "aijobs_http_request_duration_seconds_bucket",
        "aijobs_job_lock_seconds",
        "aijobs_queue_jobs",
        "up",
        "x_total",
    }


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(board: dict) -> list[dict]:
    found = []
    for panel in board["panels"]:
        if panel["type"] == "row":
            found.extend(panel.get("panels", []))
        else:
            found.append(panel)
    return found


def dashboard_expressions() -> list[str]:
    return [target["expr"] for panel in panels(dashboard()) for target in panel["targets"]]


def rule_expressions() -> list[str]:
    rules = yaml.safe_load(RULES.read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def test_the_dashboard_is_a_current_grafana_dashboard_with_the_data_source_as_a_variable():
    board = dashboard()
    assert 39 <= board["schemaVersion"] <= 41  # Grafana 11 and 12
    assert board["title"] and board["uid"]
    [variable] = [v for v in board["templating"]["list"] if v["name"] == "datasource"]
    assert variable["type"] == "datasource" and variable["query"] == "prometheus"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    shown = panels(board)
    assert len(shown) >= 15
    for panel in shown:
        assert panel["title"] and panel["type"] in {"timeseries", "stat", "gauge", "bargauge", "table"}, panel
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"} and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["refId"] and target["expr"].strip(), panel["title"]
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]


def test_the_dashboard_shows_what_an_operator_watches():
    exprs = "\n".join(dashboard_expressions())
    for needed in (
        'aijobs_queue_jobs{status="pending"}',  # queue depth by job type
        "aijobs_queue_oldest_pending_seconds",  # and its age
        "aijobs_jobs_finished_total",  # finished and failed per minute
        'status="failed"',
        "aijobs_breaker_state",
        "aijobs_platform_tokens_today) / max(aijobs_platform_token_budget)",  # spend against budget
        "aijobs_platform_cost_cents_today) / max(aijobs_platform_cost_budget_cents)",
        "rate(aijobs_http_requests_total",  # request rate and errors by API
        'status=~"5.."',
        "histogram_quantile(0.95, sum by (api, le) (rate(aijobs_http_request_duration_seconds_bucket",
        "aijobs_runtimes_active",
        "asynch_tasks",  # model-asynch by model
        "asynch_model_calls_total",
    ):
        assert needed in exprs, needed


def test_every_expression_of_the_dashboard_and_the_rules_is_valid_promql(tmp_path: Path):
    """promtool checks each as a recording rule (Grafana's ``$__rate_interval`` made a duration)."""
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip("needs Debian's prometheus package for promtool (make test installs it: make prometheus)")
    exprs = [_VARIABLE.sub("5m", expr) for expr in dashboard_expressions()] + rule_expressions()
    rules = {"groups": [{"name": "expressions", "rules": [
        {"record": f"check:expression_{n}", "expr": expr} for n, expr in enumerate(exprs)]}]}  # fmt: skip
    (tmp_path / "expressions.yml").write_text(yaml.safe_dump(rules))
    run = subprocess.run([binary, "check", "rules", str(tmp_path / "expressions.yml")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_every_metric_the_dashboard_and_the_rules_read_is_in_the_first_scrape_of_a_fresh_server(tmp_path, settings):
    exprs = dashboard_expressions() + rule_expressions()
    read = set().union(*(metric_names(expr) for expr in exprs)) - PROMETHEUS_OWN
    assert len(read) >= 20 and "aijobs_http_request_duration_seconds_bucket" in read
    make_model("echo", queue_limit=20)  # a configured model, no task yet: its series are known
    env = {"REDIS_URL": "<unset>", "METRICS_REDIS_URL": "<unset>", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "mp")}
    with gunicorn(tmp_path / "gunicorn.log", workers=1, env=env) as server:
        response = server.get("/metrics")
    assert response.status_code == 200
    scrape = Scrape.parse(response.text)
    exported = {name for name, _, _ in scrape.samples}
    missing = sorted(read - exported)
    assert not missing, f"read by the dashboard or the rules, not in the first scrape: {missing}"
    for name in read:  # a histogram's series are read through its family's
        if name.endswith(HISTOGRAM_SUFFIXES):
            family = name.rsplit("_", 1)[0]
            assert scrape.types.get(family) == "histogram", name
