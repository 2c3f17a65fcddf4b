"""The alert rules: promtool check + promtool unit tests, and the conventions every alert keeps."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import (
    CHART_RULES,
    ROOT,
    RULES,
    RULES_GENERATOR,
    RUNBOOKS,
    documented_metrics,
    markdown_anchors,
    promtool_check_rules,
    referenced_metrics,
    require_promtool,
    rules_generator,
    run,
)

GEN = rules_generator()
SOURCE = GEN.load_source()
DEFAULT_BASE = SOURCE["defaults"]["runbookBaseUrl"]
# A metric name as the rules use it: driftgauge_* or up, not inside a string literal.
_SERIES = re.compile(r'"(?:[^"\\]|\\.)*"|\b(?:driftgauge_[a-z0-9_]+|up)\b(\{[^}]*\})?')

RULE_TESTS = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yml"))
SEVERITIES = {"critical", "warning", "info"}
REQUIRED = {
    "DriftgaugeMissingRows",
    "DriftgaugeExtraRows",
    "DriftgaugeMismatchedRows",
    "DriftgaugeExclusionRateHigh",
    "DriftgaugeLedgerMissingSummary",
    "DriftgaugeLedgerDuplicateSummary",
    "DriftgaugeLedgerFailedWrites",
    "DriftgaugeLedgerNothingWritten",
    "DriftgaugeLedgerNoMatchRate",
    "DriftgaugeLedgerOutcomesMismatch",
    "DriftgaugeLedgerStatusMismatch",
    "DriftgaugeLedgerWrittenExceedsHanded",
    "DriftgaugeCanaryFailing",
    "DriftgaugeCheckStale",
    "DriftgaugeCheckDown",
    "DriftgaugeNothingJudged",
    "DriftgaugeUnexplainedDifference",
    "DriftgaugeAbsent",
    "DriftgaugeTargetDown",
}
LEDGER_RULES = {
    "missing_summary",
    "duplicate_summary",
    "failed_writes",
    "nothing_written",
    "no_match_rate",
    "outcomes_mismatch",
    "status_mismatch",
    "written_exceeds_handed",
}


def _alerts() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


ALERTS = _alerts()


def test_committed_rule_files_are_the_generated_ones() -> None:
    for path, text in GEN.outputs(SOURCE).items():
        assert not path.is_symlink(), path
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is stale: run python deploy/prometheus/generate.py"
        )
    assert {RULES, CHART_RULES} <= set(GEN.outputs(SOURCE))
    check = run([sys.executable, str(RULES_GENERATOR), "--check"])
    assert check.returncode == 0, check.stderr


def test_every_series_selector_gets_the_configured_matchers(tmp_path: Path) -> None:
    options = GEN.options_from_values(
        {"selectors": ['cluster="eu-1"', 'namespace=~"obs|mon"']}, SOURCE
    )
    rendered = GEN.render(GEN.chart_template(SOURCE), options)
    exprs = [r["expr"] for g in rendered["groups"] for r in g["rules"]]
    assert len(exprs) == len(ALERTS)
    for expr in exprs:
        series = [m for m in _SERIES.finditer(expr) if not m.group(0).startswith('"')]
        assert series, expr
        for match in series:
            assert (match.group(1) or "").startswith('{cluster="eu-1", namespace=~"obs|mon"'), (
                f"{match.group(0)} in {expr}"
            )
    path = tmp_path / "rules.yml"
    path.write_text(GEN.dump(rendered, what="test"))
    result = promtool_check_rules(require_promtool(), path)
    assert result.returncode == 0, result.stdout + result.stderr
    [absent] = [
        r for g in rendered["groups"] for r in g["rules"] if r["alert"] == "DriftgaugeAbsent"
    ]
    assert absent["expr"] == 'absent(up{cluster="eu-1", namespace=~"obs|mon"})'
    assert 'up{cluster="eu-1", namespace=~"obs|mon"}' in absent["annotations"]["description"]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("absent(up)", "absent(up{S})"),
        ('time() - a{kind="x"} > 2 * b', 'time() - a{S, kind="x"} > 2 * b{S}'),
        (
            "max by (check, day) (rate(process_cpu_seconds_total[5m])) > 1e3",
            "max by (check, day) (rate(process_cpu_seconds_total{S}[5m])) > 1e3",
        ),
        (
            "sum without (instance) (increase(c_total[1h] offset 1h30m)) >= 3",
            "sum without (instance) (increase(c_total{S}[1h] offset 1h30m)) >= 3",
        ),
        (
            'a / ignoring (kind) group_left () b{kind="expected"}',
            'a{S} / ignoring (kind) group_left () b{S, kind="expected"}',
        ),
        ('1-a > bool 0.1 or {__name__="b"}', '1-a{S} > bool 0.1 or {S, __name__="b"}'),
        (
            'label_replace(a, "dst", "$1", "src", "(up)")',
            'label_replace(a{S}, "dst", "$1", "src", "(up)")',
        ),
        (
            "histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m:1m])))",
            "histogram_quantile(0.9, sum by (le) (rate(h_bucket{S}[5m:1m])))",
        ),
    ],
)
def test_inject_reaches_every_series_and_nothing_else(expr: str, expected: str) -> None:
    assert GEN.inject(expr, "S") == expected


def test_overrides_disable_retime_and_label_alerts() -> None:
    options = GEN.options_from_values(
        {
            "prometheusRule": {
                "runbookBaseUrl": "https://wiki.example/ops/driftgauge",
                "additionalLabels": {"team": "data", "severity": "page"},
                "rules": {
                    "DriftgaugeVolumeAnomaly": {"enabled": False},
                    "DriftgaugeCheckStale": {"for": "1h", "labels": {"severity": "warning"}},
                    "DriftgaugeCheckDown": {"enabled": True},
                },
            }
        },
        SOURCE,
    )
    rendered = GEN.render(GEN.chart_template(SOURCE), options)
    rules = {r["alert"]: r for g in rendered["groups"] for r in g["rules"]}
    assert set(rules) == {a["alert"] for a in ALERTS} - {"DriftgaugeVolumeAnomaly"}
    assert rules["DriftgaugeCheckStale"]["for"] == "1h"
    assert rules["DriftgaugeCheckStale"]["labels"] == {"severity": "warning", "team": "data"}
    assert rules["DriftgaugeCheckDown"]["labels"] == {"severity": "page", "team": "data"}
    assert rules["DriftgaugeCheckDown"]["for"] == "15m"
    for name, rule in rules.items():
        assert rule["annotations"]["runbook_url"] == (
            f"https://wiki.example/ops/driftgauge#{name.lower()}"
        )
    # Disabling every alert of a group drops the group (Prometheus refuses an empty one).
    ledger = {
        a["alert"]: {"enabled": False} for a in ALERTS if a["alert"].startswith("DriftgaugeLedger")
    }
    groups = GEN.render(
        GEN.chart_template(SOURCE), GEN.options_from_values({"rules": ledger}, SOURCE)
    )["groups"]
    assert [g["name"] for g in groups] == ["driftgauge-drift", "driftgauge-health"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"rules": {"DriftgaugeNope": {"enabled": False}}}, "rules.DriftgaugeNope: no such alert"),
        ({"rules": {"DriftgaugeCheckDown": {"for": "soon"}}}, "rules.DriftgaugeCheckDown.for"),
        ({"rules": {"DriftgaugeCheckDown": {"enable": False}}}, "rules.DriftgaugeCheckDown: takes"),
        ({"rules": {"DriftgaugeCheckDown": {"enabled": "no"}}}, "DriftgaugeCheckDown.enabled"),
        ({"selectors": ["job=driftgauge"]}, "selectors[0]"),
        ({"runbookBaseUrl": "docs/runbooks.md"}, "runbookBaseUrl"),
        ({"additionalLabels": {"team-name": "data"}}, "additionalLabels.team-name"),
    ],
)
def test_bad_options_are_refused_naming_the_field(values: dict[str, Any], message: str) -> None:
    with pytest.raises(GEN.RulesError, match=re.escape(message)):
        GEN.options_from_values(values, SOURCE)


def test_generator_cli_renders_values_and_refuses_bad_ones(tmp_path: Path) -> None:
    python = sys.executable
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"prometheusRule": {"selectors": ['job="recon"']}}))
    out = tmp_path / "rules.yml"
    result = run([python, str(RULES_GENERATOR), "--values", str(values), "-o", str(out)])
    assert result.returncode == 0, result.stderr
    exprs = {
        r["alert"]: r["expr"] for g in yaml.safe_load(out.read_text())["groups"] for r in g["rules"]
    }
    assert exprs["DriftgaugeAbsent"] == 'absent(up{job="recon"})'
    values.write_text(yaml.safe_dump({"rules": {"DriftgaugeNope": {}}}))
    result = run([python, str(RULES_GENERATOR), "--values", str(values)])
    assert result.returncode == 2
    assert "rules.DriftgaugeNope: no such alert" in result.stderr


def test_source_refuses_a_selector_label_written_in_an_expr(tmp_path: Path) -> None:
    text = (ROOT / "deploy" / "prometheus" / "alerts.yml").read_text()
    bad = tmp_path / "alerts.yml"
    bad.write_text(text.replace("expr: up == 0", 'expr: up{job="driftgauge"} == 0'))
    with pytest.raises(GEN.RulesError, match=r"DriftgaugeTargetDown\.expr: job is matched"):
        GEN.load_source(bad)


def test_promtool_check_rules_is_clean() -> None:
    promtool = require_promtool()
    result = promtool_check_rules(promtool, RULES)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"SUCCESS: {len(ALERTS)} rules found" in output
    assert "WARNING" not in output


@pytest.mark.parametrize("test_file", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_rule_tests_pass(test_file: Path) -> None:
    promtool = require_promtool()
    result = run([promtool, "test", "rules", str(test_file)], timeout=120)
    assert result.returncode == 0, f"promtool test rules {test_file.name}:\n{result.stdout}"
    assert "SUCCESS" in result.stdout


def test_every_required_alert_exists() -> None:
    names = [a["alert"] for a in ALERTS]
    assert len(names) == len(set(names)), "duplicate alert names"
    assert set(names) >= REQUIRED, f"missing alerts: {REQUIRED - set(names)}"
    breach_rules = {
        a["expr"].split('rule="')[1].split('"')[0]
        for a in ALERTS
        if "driftgauge_ledger_breach" in a["expr"]
    }
    assert breach_rules == LEDGER_RULES
    # Every open window counts, not only the latest one (which a clean run would hide).
    ledger = [a for a in ALERTS if a["alert"].startswith("DriftgaugeLedger")]
    assert all("driftgauge_ledger_breach_windows" in a["expr"] for a in ledger)


@pytest.mark.parametrize("alert", ALERTS, ids=lambda a: a["alert"])
def test_alert_conventions(alert: dict[str, Any]) -> None:
    name = alert["alert"]
    assert alert.get("for"), f"{name}: no for:"
    assert alert["labels"]["severity"] in SEVERITIES, name
    notes = alert["annotations"]
    assert notes["summary"] and "\n" not in notes["summary"], f"{name}: summary not one line"
    assert "{{" not in notes["summary"], f"{name}: summary is templated; use description"
    documented = documented_metrics()
    metrics = referenced_metrics(alert["expr"])
    assert metrics <= documented.keys(), f"{name}: undocumented {metrics - documented.keys()}"
    # The description names every identifying label all of the alert's metrics carry.
    if metrics:
        common = set.intersection(*(documented[m] for m in metrics))
        for label in sorted({"check", "day", "sync_job"} & common):
            assert f"$labels.{label}" in notes["description"], f"{name}: description lacks {label}"
        assert alert.get("keep_firing_for"), f"{name}: would resolve quietly if its series vanish"


@pytest.mark.parametrize("alert", ALERTS, ids=lambda a: a["alert"])
def test_runbook_url_is_absolute_and_points_at_a_runbook_section(alert: dict[str, Any]) -> None:
    url = alert["annotations"]["runbook_url"]
    page, _, anchor = url.partition("#")
    assert page == DEFAULT_BASE and re.match(r"^https://[^/]+/", page), url
    assert anchor == alert["alert"].lower()
    assert anchor in markdown_anchors(RUNBOOKS), f"docs/runbooks.md has no section #{anchor}"


def test_absence_alerts_cover_a_vanished_and_a_failing_target() -> None:
    exprs = {a["alert"]: a["expr"].strip() for a in ALERTS}
    assert exprs["DriftgaugeAbsent"] == 'absent(up{job="driftgauge"})'
    assert exprs["DriftgaugeTargetDown"] == 'up{job="driftgauge"} == 0'


def test_every_alert_has_a_firing_and_a_silent_case() -> None:
    fires: set[str] = set()
    silent: set[str] = set()
    for path in RULE_TESTS:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert doc["rule_files"] == ["../driftgauge-rules.yml"], path.name
        for case in doc["tests"]:
            for check in case.get("alert_rule_test", []):
                (fires if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {a["alert"] for a in ALERTS}
    assert names - fires == set(), f"no firing test for {names - fires}"
    assert names - silent == set(), f"no silent test for {names - silent}"
