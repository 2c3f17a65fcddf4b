"""The alert rules: promtool check + promtool unit tests, and the conventions every alert keeps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import (
    CHART_RULES,
    ROOT,
    RULES,
    RUNBOOKS,
    documented_metrics,
    markdown_anchors,
    promtool_check_rules,
    referenced_metrics,
    require_promtool,
    run,
)

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
    "missing_summary", "duplicate_summary", "failed_writes", "nothing_written",
    "no_match_rate", "outcomes_mismatch", "status_mismatch", "written_exceeds_handed",
}


def _alerts() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


ALERTS = _alerts()


def test_rule_file_is_a_relative_symlink_to_the_chart_copy() -> None:
    assert RULES.is_symlink()
    target = os.readlink(RULES)
    assert not os.path.isabs(target), f"absolute symlink {target} breaks in other checkouts"
    assert RULES.resolve() == CHART_RULES.resolve()
    assert CHART_RULES.is_file() and not CHART_RULES.is_symlink()


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
        for a in ALERTS if "driftgauge_ledger_breach" in a["expr"]
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
def test_runbook_url_points_at_a_runbook_section(alert: dict[str, Any]) -> None:
    url = alert["annotations"]["runbook_url"]
    page, _, anchor = url.partition("#")
    assert page == "docs/runbooks.md", url
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
