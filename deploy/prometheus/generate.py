#!/usr/bin/env python3
"""Generate driftgauge's alert rules from deploy/prometheus/alerts.yml.

    python deploy/prometheus/generate.py            # rewrite the committed outputs
    python deploy/prometheus/generate.py --check    # exit 1 when they are stale
    python deploy/prometheus/generate.py --values my-values.yaml -o my-rules.yml

The committed outputs are deploy/prometheus/driftgauge-rules.yml (plain Prometheus, the
source's defaults), helm/driftgauge/files/driftgauge-rules.yml (the template the chart's
PrometheusRule renders with its values) and the chart's copy of the Grafana dashboard.
`--values` takes the keys of the chart's `prometheusRule` values (a whole chart values file
works too): selectors, runbookBaseUrl, additionalLabels and rules (per-alert enabled, for,
labels).
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCE = HERE / "alerts.yml"
PLAIN = HERE / "driftgauge-rules.yml"
CHART_TEMPLATE = ROOT / "helm" / "driftgauge" / "files" / "driftgauge-rules.yml"
DASHBOARD = ROOT / "grafana" / "dashboards" / "driftgauge-drift.json"
CHART_DASHBOARD = ROOT / "helm" / "driftgauge" / "files" / "driftgauge-drift.json"

# Stands for the configured matchers, in the chart template's exprs and in annotations.
PLACEHOLDER = "__SELECTOR__"
REQUIRED = ("alert", "expr", "for", "severity", "summary", "description")
OPTIONAL = ("keep_firing_for", "runbook")
SEVERITIES = ("critical", "warning", "info")
OVERRIDE_KEYS = ("enabled", "for", "labels")

_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
_MATCHER = re.compile(r'^([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"$')
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# PromQL tokens that are not series: string literals, [durations], label lists of
# by/without/on/ignoring/group_left/group_right, and numbers; then a name with its optional
# {matchers}, or a bare {matchers}. A name is a series unless it is a keyword, an
# aggregation or followed by "(" (a function).
_TOKEN = re.compile(
    r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"""
    r"|\[[^\]]*\]"
    r"|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"
    r"|(?<![\w:.])(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?:[a-zA-Z]+\d*)*)"
    r"|(?i:\b(?:and|or|unless|bool|offset)\b)"  # binary keywords (a bare {...} may follow)
    r"|(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?P<braces>\s*\{(?P<matchers>[^}]*)\})?"
    r"|(?P<bare>\{(?P<bare_matchers>[^}]*)\})"
)
_NOT_SERIES = frozenset(
    {
        "inf",
        "nan",
        "atan2",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    }
)


class RulesError(ValueError):
    """A source entry or an option the generator refuses, with the field it names."""


@dataclass(frozen=True)
class Options:
    """What one rendering of the rules is configured with."""

    selectors: tuple[str, ...]
    runbook_base_url: str
    additional_labels: Mapping[str, str] = field(default_factory=dict)
    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def load_source(path: Path = SOURCE) -> dict[str, Any]:
    """Return the parsed source, every entry checked."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for group in doc["groups"]:
        for entry in group["rules"]:
            _check_entry(entry, names)
    return dict(doc)


def default_options(source: Mapping[str, Any]) -> Options:
    """Return the options the committed plain rule file is generated with."""
    return options_from_values(source["defaults"], source)


def options_from_values(values: Mapping[str, Any], source: Mapping[str, Any]) -> Options:
    """Return Options from chart-style values (`prometheusRule` keys), checked."""
    if "prometheusRule" in values:
        values = values["prometheusRule"] or {}
    defaults = source["defaults"]
    selectors = tuple(values.get("selectors") or defaults["selectors"])
    for i, matcher in enumerate(selectors):
        if not isinstance(matcher, str) or not _MATCHER.match(matcher):
            raise RulesError(f'selectors[{i}]: {matcher!r} is not a matcher like job="driftgauge"')
    base = values.get("runbookBaseUrl") or defaults["runbookBaseUrl"]
    if not re.match(r"^https?://[^/\s]+", str(base)) or "#" in str(base):
        raise RulesError(f"runbookBaseUrl: {base!r} is not an absolute http(s) URL without #")
    labels = dict(values.get("additionalLabels") or {})
    for name, value in labels.items():
        _check_label(f"additionalLabels.{name}", name, value)
    known = alert_names(source)
    rules = dict(values.get("rules") or {})
    for name, override in rules.items():
        where = f"rules.{name}"
        if name not in known:
            raise RulesError(f"{where}: no such alert; the alerts are {', '.join(known)}")
        if not isinstance(override, Mapping) or set(override) - set(OVERRIDE_KEYS):
            raise RulesError(f"{where}: takes only {', '.join(OVERRIDE_KEYS)}")
        if "enabled" in override and not isinstance(override["enabled"], bool):
            raise RulesError(f"{where}.enabled: must be true or false")
        if "for" in override and not _DURATION.match(str(override["for"])):
            raise RulesError(f"{where}.for: {override['for']!r} is not a duration like 15m")
        for label, value in (override.get("labels") or {}).items():
            _check_label(f"{where}.labels.{label}", label, value)
    return Options(selectors, str(base), labels, rules)


def alert_names(source: Mapping[str, Any]) -> list[str]:
    """Return every alert name of the source, in order."""
    return [e["alert"] for g in source["groups"] for e in g["rules"]]


def chart_template(source: Mapping[str, Any]) -> dict[str, Any]:
    """Return the rules with the selector placeholder in every selector and bare anchors."""
    groups = []
    for group in source["groups"]:
        rules = []
        for entry in group["rules"]:
            rule: dict[str, Any] = {
                "alert": entry["alert"],
                "expr": inject(entry["expr"], PLACEHOLDER),
                "for": entry["for"],
            }
            if "keep_firing_for" in entry:
                rule["keep_firing_for"] = entry["keep_firing_for"]
            rule["labels"] = {"severity": entry["severity"]}
            rule["annotations"] = {
                "summary": entry["summary"],
                "description": entry["description"],
                "runbook_url": "#" + entry.get("runbook", entry["alert"].lower()),
            }
            rules.append(rule)
        groups.append({"name": group["name"], "rules": rules})
    return {"groups": groups}


def render(template: Mapping[str, Any], options: Options) -> dict[str, Any]:
    """Return plain Prometheus rules: the template with the options applied.

    The chart's templates/prometheusrule.yaml does the same with the chart values; a test
    renders both with the same options and compares them.
    """
    selector = ", ".join(options.selectors)
    groups = []
    for group in template["groups"]:
        rules = []
        for rule in group["rules"]:
            override = options.rules.get(rule["alert"], {})
            if not override.get("enabled", True):
                continue
            out = copy.deepcopy(dict(rule))
            out["expr"] = rule["expr"].replace(PLACEHOLDER, selector)
            out["for"] = override.get("for", rule["for"])
            out["labels"] = {
                **rule["labels"],
                **options.additional_labels,
                **override.get("labels", {}),
            }
            notes = {k: v.replace(PLACEHOLDER, selector) for k, v in rule["annotations"].items()}
            notes["runbook_url"] = options.runbook_base_url + rule["annotations"]["runbook_url"]
            out["annotations"] = notes
            rules.append(out)
        if rules:
            groups.append({"name": group["name"], "rules": rules})
    return {"groups": groups}


def inject(expr: str, selector: str) -> str:
    """Return `expr` with `selector` added to every series selector in it."""

    def add(match: re.Match[str]) -> str:
        if match.group("bare") is not None:
            inner = match.group("bare_matchers").strip()
            return f"{{{selector}, {inner}}}" if inner else f"{{{selector}}}"
        name = match.group("name")
        if name is None or name.lower() in _NOT_SERIES:
            return match.group(0)  # a literal, a duration, a label list, a keyword
        if match.group("braces") is None and expr[match.end() :].lstrip().startswith("("):
            return match.group(0)  # a function call
        inner = (match.group("matchers") or "").strip()
        return f"{name}{{{selector}, {inner}}}" if inner else f"{name}{{{selector}}}"

    return _TOKEN.sub(add, expr)


def series_matchers(expr: str) -> list[str]:
    """Return the matchers text of every series selector in `expr` ('' for a bare name)."""
    found = []
    for match in _TOKEN.finditer(expr):
        if match.group("bare") is not None:
            found.append(match.group("bare_matchers"))
        elif match.group("name") and inject(match.group(0), PLACEHOLDER) != match.group(0):
            found.append(match.group("matchers") or "")
    return found


def dump(rules: Mapping[str, Any], *, what: str) -> str:
    """Return rules as YAML text under a header saying where they come from."""
    header = (
        f"# GENERATED by deploy/prometheus/generate.py from deploy/prometheus/alerts.yml: do\n"
        f"# not edit; change alerts.yml and run the generator. {what}\n"
    )
    return header + yaml.dump(
        dict(rules), Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True
    )


def outputs(source: Mapping[str, Any]) -> dict[Path, str]:
    """Return each committed output file with the text it must hold."""
    template = chart_template(source)
    return {
        PLAIN: dump(
            render(template, default_options(source)),
            what="Defaults: selectors and runbookBaseUrl\n# of alerts.yml.",
        ),
        CHART_TEMPLATE: dump(
            template,
            what="The chart's PrometheusRule\n# renders it "
            "with its prometheusRule values (templates/prometheusrule.yaml).",
        ),
        CHART_DASHBOARD: DASHBOARD.read_text(encoding="utf-8"),
    }


def main(argv: list[str] | None = None) -> int:
    """Write, check or render the rules; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if a committed output differs from what would be written",
    )
    parser.add_argument(
        "--values",
        type=Path,
        help="render with these chart-style values instead of writing outputs",
    )
    parser.add_argument(
        "-o", "--output", type=Path, help="with --values: write here instead of stdout"
    )
    args = parser.parse_args(argv)
    try:
        source = load_source()
        if args.values:
            values = yaml.safe_load(args.values.read_text(encoding="utf-8")) or {}
            text = dump(
                render(chart_template(source), options_from_values(values, source)),
                what=f"Rendered with {args.values.name}.",
            )
            if args.output:
                args.output.write_text(text, encoding="utf-8")
            else:
                sys.stdout.write(text)
            return 0
    except RulesError as exc:
        print(f"generate.py: {exc}", file=sys.stderr)
        return 2
    stale = []
    for path, text in outputs(source).items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not args.check:
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(
            "stale (run python deploy/prometheus/generate.py): " + ", ".join(map(str, stale)),
            file=sys.stderr,
        )
        return 1
    return 0


def _check_entry(entry: Mapping[str, Any], names: set[str]) -> None:
    name = entry.get("alert", "?")
    missing = [k for k in REQUIRED if not entry.get(k)]
    unknown = set(entry) - set(REQUIRED) - set(OPTIONAL)
    if missing or unknown:
        raise RulesError(f"{name}: missing {missing}, unknown {sorted(unknown)}")
    if name in names:
        raise RulesError(f"{name}: defined twice")
    names.add(name)
    if entry["severity"] not in SEVERITIES:
        raise RulesError(f"{name}.severity: {entry['severity']!r} is not one of {SEVERITIES}")
    for key in ("for", "keep_firing_for"):
        if key in entry and not _DURATION.match(str(entry[key])):
            raise RulesError(f"{name}.{key}: {entry[key]!r} is not a duration")
    for matchers in series_matchers(entry["expr"]):
        for label in ("job", "namespace", "cluster", "instance"):
            if re.search(rf"\b{label}\s*(=|!=|=~|!~)", matchers):
                raise RulesError(
                    f"{name}.expr: {label} is matched in the source; the generator injects "
                    "the configured selectors into every series selector"
                )


def _check_label(where: str, name: Any, value: Any) -> None:
    if not isinstance(name, str) or not _LABEL_NAME.match(name):
        raise RulesError(f"{where}: {name!r} is not a label name")
    if not isinstance(value, str):
        raise RulesError(f"{where}: the value must be a string, not {value!r}")


class _Dumper(yaml.SafeDumper):
    """Write multi-line strings (the exprs) as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # Exprs keep their lines; long annotations fold, so the file reads like a hand-written one.
    style = "|" if "\n" in value else (">" if len(value) > 80 else None)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


if __name__ == "__main__":
    raise SystemExit(main())
