"""Extract the PromQL of every panel of the driftgauge dashboard, variables substituted.

Used by the static dashboard test (syntax via promtool) and by any test that runs the
dashboard's queries against a real Prometheus:

    from dashboard_queries import panel_queries
    for q in panel_queries(check="reviews"):
        prometheus.query(q.expr)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "grafana" / "dashboards" / "driftgauge-drift.json"

# $name, ${name}, ${name:format} and the deprecated [[name]].
_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)\]\]")


@dataclass(frozen=True)
class PanelQuery:
    """One target of one panel, ready to send to Prometheus."""

    panel_id: int
    panel_title: str
    ref_id: str
    expr: str
    instant: bool


def load_dashboard(path: Path = DASHBOARD) -> dict[str, Any]:
    """Return the dashboard JSON as a dict."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def iter_panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield every panel, including those nested in collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Replace Grafana variables in `text`; raise KeyError naming an unknown one."""

    def repl(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        if name not in values:
            raise KeyError(f"no value for dashboard variable ${name}")
        return values[name]

    return _VARIABLE.sub(repl, text)


def panel_queries(
    dashboard: Mapping[str, Any] | None = None,
    *,
    check: str = "reviews",
    datasource: str = "prometheus",
    rate_interval: str = "5m",
    range_: str = "1h",
    extra: Mapping[str, str] | None = None,
) -> list[PanelQuery]:
    """Return every panel target's expression with the dashboard variables filled in."""
    board = load_dashboard() if dashboard is None else dashboard
    seconds = _seconds(range_)
    values = {
        # The selector variables' "All" (what a fresh dashboard shows).
        "job": ".+",
        "namespace": ".*",
        "cluster": ".*",
        "check": check,
        "instance": ".+",
        "datasource": datasource,
        "api": "http://127.0.0.1:8080",
        "__rate_interval": rate_interval,
        "__interval": rate_interval,
        "__range": range_,
        "__range_s": str(seconds),
        "__range_ms": str(seconds * 1000),
        **(extra or {}),
    }
    queries = []
    for panel in iter_panels(board):
        if panel.get("type") == "row":
            continue
        for target in panel.get("targets", []):
            expr = target.get("expr", "")
            if not expr:
                continue
            queries.append(
                PanelQuery(
                    panel_id=int(panel["id"]),
                    panel_title=substitute(panel.get("title", ""), values),
                    ref_id=str(target.get("refId", "")),
                    expr=substitute(expr, values),
                    instant=bool(target.get("instant", False)),
                )
            )
    return queries


def _seconds(duration: str) -> int:
    """Return the seconds in a Prometheus duration such as `90s`, `15m`, `1h`, `7d`."""
    match = re.fullmatch(r"(\d+)([smhdw])", duration)
    if not match:
        raise ValueError(f"range {duration!r} is not a duration like 1h")
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]
    return int(match.group(1)) * unit
