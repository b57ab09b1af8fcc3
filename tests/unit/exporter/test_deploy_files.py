"""What users plug in (deploy/): the Prometheus rules pass promtool (syntax and their unit
tests), and the Grafana dashboard parses, its queries are valid PromQL, and it names only
metrics that exist: node_exporter's (checked against a real node_exporter's output), the
recording rules', and the exporter's."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.system import require_tools

from iogauge.exporter.metrics import ALL_METRICS

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "iogauge-rules.yml"
RULES_TESTS = ROOT / "deploy" / "prometheus" / "iogauge-rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "iogauge-disks.json"
NODE_EXPORTER_OUTPUT = (ROOT / "tests" / "fixtures" / "node_exporter"
                        / "node-exporter-1.5.0-diskstats.prom")
FLEET_DOC = ROOT / "docs" / "fleet.md"

METRIC_NAME = re.compile(r"\b(?:node_[a-z_]+|iogauge_[a-z_]+|instance_device:[a-z0-9_:]+)")


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    exe = require_tools("promtool")["promtool"]
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def _node_exporter_names() -> set[str]:
    return {line.split()[2] for line in NODE_EXPORTER_OUTPUT.read_text().splitlines()
            if line.startswith("# TYPE ")}


def _recorded_names() -> set[str]:
    return set(re.findall(r"^\s*- record: (\S+)", RULES.read_text(), re.M))


def _rule_exprs() -> list[str]:
    """Every rule's expression (one-line and folded ``>-`` forms)."""
    out: list[str] = []
    lines = RULES.read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)expr: ?(.*)$", line)
        if not m:
            continue
        if m.group(2) not in (">-", ">", "|"):
            out.append(m.group(2))
            continue
        body = []
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= len(m.group(1)):
                break
            body.append(nxt.strip())
        out.append(" ".join(body))
    return out


def _dashboard_exprs(doc: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in doc["templating"]["list"] if "definition" in v]
    return exprs


def _check_names(exprs: list[str]) -> list[str]:
    known = _node_exporter_names() | _recorded_names() | set(ALL_METRICS)
    return [f"{name} (in {e!r})" for e in exprs for name in METRIC_NAME.findall(e)
            if name not in known]


def test_promtool_checks_the_rules() -> None:
    res = _promtool("check", "rules", str(RULES))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_vmalert_reads_the_rules() -> None:
    """VictoriaMetrics' rule evaluator (package victoria-metrics) parses them too."""
    exe = require_tools("vmalert")["vmalert"]
    res = subprocess.run([exe, "-dryRun", f"-rule={RULES}"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


def test_promtool_checks_the_scrape_config() -> None:
    res = _promtool("check", "config", str(RULES.parent / "prometheus.yml"))
    assert res.returncode == 0, res.stdout + res.stderr


def test_promtool_unit_tests_of_the_rules() -> None:
    """The recording rules give sysstat's figures and the alerts fire after their `for`
    (deploy/prometheus/iogauge-rules.test.yml)."""
    res = _promtool("test", "rules", str(RULES_TESTS))
    assert res.returncode == 0, res.stdout + res.stderr


def test_rules_name_only_metrics_that_exist() -> None:
    assert _check_names(_rule_exprs()) == []
    # every recording rule the alerts or the dashboard could use is a sysstat figure
    assert len(_recorded_names()) == 11


def test_dashboard_names_only_metrics_that_exist(tmp_path: Path) -> None:
    doc = json.loads(DASHBOARD.read_text())
    exprs = _dashboard_exprs(doc)
    assert _check_names(exprs) == []
    used = {n for e in exprs for n in METRIC_NAME.findall(e)}
    # the verdict and headroom panels beside the raw rates
    assert {"iogauge_device_verdict", "iogauge_device_headroom_ratio",
            "instance_device:node_disk_reads_completed:rate1m",
            "instance_device:node_disk_util:ratio_rate1m"} <= used
    assert {p["datasource"]["uid"] for p in doc["panels"] if "datasource" in p} == {
        "${datasource}"}


def test_dashboard_queries_are_promql(tmp_path: Path) -> None:
    """promtool parses every panel query (Grafana's variables replaced by what they expand
    to) as the expression of a recording rule."""
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}",
         "expr": e.replace("$instance", ".*").replace("$device", ".*")}
        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    res = _promtool("check", "rules", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout


def test_fleet_doc_lists_every_metric() -> None:
    text = FLEET_DOC.read_text()
    missing = [name for name in ALL_METRICS if f"`{name}`" not in text]
    assert missing == []
    assert "iogauge-rules.yml" in text and "iogauge-disks.json" in text


@pytest.mark.parametrize("name", sorted(ALL_METRICS))
def test_metric_names_follow_the_exporter_rules(name: str) -> None:
    """Base units and ratios, never percents or milliseconds
    (prometheus.io/docs/practices/naming)."""
    assert name.startswith("iogauge_")
    assert not re.search(r"_(pct|percent|ms|milliseconds|kb|kbps)(_|$)", name)
