"""A real Prometheus for the alerting tests: Debian's ``prometheus`` on a free port of
localhost, its own storage directory, scraping one live server every second and
evaluating ``deploy/prometheus/alerts.yml`` with every ``for:`` shortened. It
scrapes nothing but that server and sends its alerts nowhere."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
import yaml

from tests.support.runtime_fixtures import ROOT, free_port, wait_for

RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
PROMETHEUS = "/usr/bin/prometheus"
DOCS_URL = "http://docs.invalid"


def shortened_rules(target: Path, *, for_: str) -> Path:
    """A copy of the rules with every ``for:`` set to ``for_``: the alerts as shipped, sooner."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = for_
    target.write_text(yaml.safe_dump(rules, sort_keys=False))
    return target


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, **params: Any) -> Any:
        answer = requests.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """The alerts named ``name`` now, pending or firing (a resolved one is no longer listed)."""
        return [alert for alert in self.api("alerts")["alerts"] if alert["labels"]["alertname"] == name]

    def firing(self, name: str) -> list[dict[str, Any]]:
        return [alert for alert in self.alerts(name) if alert["state"] == "firing"]

    def value(self, query: str) -> float | None:
        result = self.api("query", query=query)["result"]
        return float(result[0]["value"][1]) if result else None

    def scraped_once(self) -> bool:
        targets = self.api("targets")["activeTargets"]
        return bool(targets) and all(t["health"] == "up" for t in targets)


@contextlib.contextmanager
def prometheus(directory: Path, *, target: str, token: str, for_: str = "2s") -> Iterator[Prometheus]:
    """Prometheus scraping ``target`` (a base URL) with ``token`` as the bearer token."""
    if not Path(PROMETHEUS).exists() or shutil.which("promtool") is None:
        pytest.skip("needs Debian's prometheus package (make test installs it: make prometheus)")
    directory.mkdir(parents=True, exist_ok=True)
    rules = shortened_rules(directory / "alerts.yml", for_=for_)
    address = urlsplit(target)
    config = {
        "global": {
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "evaluation_interval": "1s",
            "external_labels": {"docs_url": DOCS_URL},
        },
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": "aijobs",
                "metrics_path": "/metrics",
                "scheme": address.scheme,
                "authorization": {"type": "Bearer", "credentials": token},
                "static_configs": [{"targets": [address.netloc]}],
            }
        ],
    }
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    check = subprocess.run(
        ["promtool", "check", "config", str(directory / "prometheus.yml")], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    log = directory / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={directory / 'prometheus.yml'}", f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            cwd=directory, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Prometheus(url=f"http://127.0.0.1:{port}", process=process, log=log)

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"prometheus exited: {log.read_text()[-3000:]}")
        try:
            return requests.get(f"{server.url}/-/ready", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    try:
        wait_for(ready, timeout=60, every=0.2, what="prometheus")
        wait_for(server.scraped_once, timeout=30, every=0.2, what=f"prometheus to scrape {target}")
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
