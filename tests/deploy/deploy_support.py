"""Paths and helpers shared by the deploy tests (rules, dashboard, Helm chart, compose)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
METRICS_DOC = ROOT / "docs" / "metrics.md"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RULES = ROOT / "deploy" / "prometheus" / "driftgauge-rules.yml"
CHART = ROOT / "helm" / "driftgauge"
CHART_RULES = CHART / "files" / "driftgauge-rules.yml"
RULES_GENERATOR = ROOT / "deploy" / "prometheus" / "generate.py"

# A metric row in docs/metrics.md: | `name` | type | `label`, `label` (values) | meaning |
_METRIC_ROW = re.compile(r"^\|\s*`(driftgauge_[a-z0-9_]+)`\s*\|\s*(\w+)\s*\|([^|]*)\|")
_LABEL = re.compile(r"`([a-z_]+)`")
_METRIC_REF = re.compile(r"\b(driftgauge_[a-z0-9_]+)\b")


def documented_metrics() -> dict[str, set[str]]:
    """Return each metric in docs/metrics.md with the set of its label names."""
    metrics: dict[str, set[str]] = {}
    for line in METRICS_DOC.read_text(encoding="utf-8").splitlines():
        match = _METRIC_ROW.match(line)
        if match:
            # Drop the parenthesised value lists so only label names remain.
            labels_text = re.sub(r"\([^)]*\)", "", match.group(3))
            metrics[match.group(1)] = set(_LABEL.findall(labels_text))
    return metrics


def referenced_metrics(expr: str) -> set[str]:
    """Return the driftgauge metric names a PromQL expression refers to."""
    return set(_METRIC_REF.findall(expr))


def env_references(value: Any) -> set[str]:
    """Return the NAMEs of every `env:NAME` secret reference in a parsed config."""
    if isinstance(value, str):
        return {value[4:]} if value.startswith("env:") else set()
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*(env_references(v) for v in value))
    return set()


def github_anchor(heading: str) -> str:
    """Return the anchor GitHub generates for a Markdown heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def markdown_anchors(path: Path) -> set[str]:
    """Return the heading anchors of a Markdown file."""
    anchors = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            anchors.add(github_anchor(line.lstrip("#")))
    return anchors


def run(
    cmd: list[str], *, timeout: float = 120, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run a command with a deadline and capture its output as text."""
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def require_promtool() -> str:
    """Return promtool's path, or fail the test saying how to install it."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool not found on PATH: run `make tools` "
            "(installs Debian's prometheus package, which ships promtool)",
            pytrace=False,
        )
    return path


def promtool_check_rules(promtool: str, rule_file: Path) -> subprocess.CompletedProcess[str]:
    """Run `promtool check rules` on one file."""
    return run([promtool, "check", "rules", str(rule_file)], timeout=60)


def rules_generator() -> ModuleType:
    """Return deploy/prometheus/generate.py as a module (it is a script, not a package)."""
    name = "driftgauge_rules_generate"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, RULES_GENERATOR)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it executes
        spec.loader.exec_module(module)
    return sys.modules[name]
