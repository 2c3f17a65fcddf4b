"""Static checks of the Grafana dashboard and its provisioning."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from dashboard_queries import DASHBOARD, iter_panels, load_dashboard, panel_queries, substitute
from deploy_support import (
    ROOT,
    documented_metrics,
    promtool_check_rules,
    referenced_metrics,
    require_promtool,
)

PROVISIONING = ROOT / "grafana" / "provisioning"
SELECTOR_VARIABLES = ("job", "namespace", "cluster")
# A series selector: a driftgauge metric name and its optional {...}, outside string literals.
_SERIES = re.compile(r'"(?:[^"\\]|\\.)*"|\b(driftgauge_[a-z0-9_]+)\b(\{[^}]*\})?')


@pytest.fixture(scope="module")
def board() -> dict[str, Any]:
    """Load the dashboard once per module."""
    return load_dashboard()


def _panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in iter_panels(board) if p.get("type") != "row"]


def _variable(board: dict[str, Any], name: str) -> dict[str, Any]:
    for var in board["templating"]["list"]:
        if var["name"] == name:
            return dict(var)
    raise AssertionError(f"dashboard has no ${name} variable")


def test_dashboard_is_valid_json_with_stable_uid() -> None:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert board["uid"] == "driftgauge-drift"
    assert board["title"]
    assert isinstance(board["schemaVersion"], int)


def test_dashboard_has_no_import_placeholders() -> None:
    text = DASHBOARD.read_text(encoding="utf-8")
    assert "${DS_" not in text
    board = json.loads(text)
    assert "__inputs" not in board
    assert "__requires" not in board


def test_datasource_and_check_variables(board: dict[str, Any]) -> None:
    ds = _variable(board, "datasource")
    assert ds["type"] == "datasource"
    assert ds["query"] == "prometheus"
    check = _variable(board, "check")
    assert check["type"] == "query"
    assert check["datasource"]["uid"] == "${datasource}"
    assert "label_values(driftgauge_" in json.dumps(check["query"])
    assert check["multi"] and check["includeAll"]


def test_job_namespace_and_cluster_variables_match_every_target(board: dict[str, Any]) -> None:
    names = [v["name"] for v in board["templating"]["list"]]
    # Each variable's query is filtered by those before it, so they come first, in order.
    assert names.index("cluster") < names.index("namespace") < names.index("job")
    assert names.index("job") < names.index("check")
    for name in SELECTOR_VARIABLES:
        var = _variable(board, name)
        assert var["type"] == "query" and var["datasource"]["uid"] == "${datasource}", name
        assert var["includeAll"] and var["multi"], name
        assert "label_values(driftgauge_check_up" in json.dumps(var["query"]), name
        assert var["query"]["query"].endswith(f", {name})"), name
        # "All" must match series without the label too (no cluster label in one-cluster setups).
        assert re.fullmatch(var["allValue"], "") or name == "job", name
    assert _variable(board, "job")["allValue"] == ".+"


def _unfiltered(expr: str, variables: tuple[str, ...]) -> list[str]:
    """Return the series selectors of expr that lack a `name=~"$name"` for a variable."""
    missing = []
    for match in _SERIES.finditer(expr):
        if match.group(1) is None:
            continue  # a string literal
        matchers = match.group(2) or ""
        if any(f'{v}=~"${v}"' not in matchers for v in variables):
            missing.append(match.group(0))
    return missing


def test_every_query_selects_by_job_namespace_and_cluster(board: dict[str, Any]) -> None:
    checked = 0
    for panel in _panels(board):
        for target in panel["targets"]:
            missing = _unfiltered(target["expr"], SELECTOR_VARIABLES)
            assert not missing, f"panel {panel['title']!r} {target['refId']}: {missing}"
            checked += 1
    assert checked >= len(_panels(board))
    # The variables' own queries: check by all three, each selector variable by those above.
    assert not _unfiltered(_variable(board, "check")["query"]["query"], SELECTOR_VARIABLES)
    assert not _unfiltered(_variable(board, "job")["query"]["query"], ("namespace", "cluster"))
    assert not _unfiltered(_variable(board, "namespace")["query"]["query"], ("cluster",))
    # The helper itself notices a selector without them.
    assert _unfiltered('sum(driftgauge_rows{check=~"$check"})', SELECTOR_VARIABLES) == [
        'driftgauge_rows{check=~"$check"}'
    ]
    assert _unfiltered('"driftgauge_rows" and driftgauge_rows', ("job",)) == ["driftgauge_rows"]


def test_every_panel_has_targets_on_the_datasource_variable(board: dict[str, Any]) -> None:
    panels = _panels(board)
    assert len(panels) >= 10
    for panel in panels:
        where = f"panel {panel['id']} ({panel['title']})"
        assert panel.get("targets"), f"{where}: no targets"
        assert panel["datasource"]["uid"] == "${datasource}", f"{where}: fixed datasource"
        for target in panel["targets"]:
            assert target.get("expr", "").strip(), f"{where} {target.get('refId')}: empty expr"
            assert target["datasource"]["uid"] == "${datasource}", f"{where}: fixed datasource"


def test_panel_ids_unique_and_grid_fits(board: dict[str, Any]) -> None:
    ids = [p["id"] for p in iter_panels(board)]
    assert len(ids) == len(set(ids))
    for panel in iter_panels(board):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert grid["h"] > 0


def test_every_metric_is_documented(board: dict[str, Any]) -> None:
    documented = documented_metrics()
    used: set[str] = set()
    for panel in _panels(board):
        for target in panel["targets"]:
            names = referenced_metrics(target["expr"])
            unknown = names - documented.keys()
            assert not unknown, f"panel {panel['title']!r} uses undocumented metrics {unknown}"
            used |= names
    for var in board["templating"]["list"]:
        assert referenced_metrics(json.dumps(var.get("query", ""))) <= documented.keys()
    # The views the dashboard promises.
    for metric in (
        "driftgauge_bucket_status",
        "driftgauge_rows",
        "driftgauge_bucket_rows",
        "driftgauge_excluded_rows",
        "driftgauge_ledger_breach",
        "driftgauge_canary_up",
    ):
        assert metric in used, f"no panel shows {metric}"


def test_drift_status_has_one_square_per_day_bucket(board: dict[str, Any]) -> None:
    status_panels = [
        p
        for p in _panels(board)
        if p["type"] in ("status-history", "state-timeline")
        and any("driftgauge_bucket_status" in t["expr"] for t in p["targets"])
    ]
    assert status_panels, "no status-history/state-timeline panel on driftgauge_bucket_status"
    for panel in status_panels:
        assert all("{{day}}" in t["legendFormat"] for t in panel["targets"])
        mapped = {
            opt["text"]
            for m in panel["fieldConfig"]["defaults"]["mappings"]
            for opt in m["options"].values()
        }
        assert mapped == {"ok", "settling", "drift", "error"}


def test_check_rows_repeat_and_link_to_the_drill_down_api(board: dict[str, Any]) -> None:
    repeated = [p for p in board["panels"] if p.get("type") == "row" and p.get("repeat")]
    assert [r["repeat"] for r in repeated] == ["check"]
    links = json.dumps([p.get("links", []) for p in _panels(board)])
    links += json.dumps([p["fieldConfig"]["defaults"].get("links", []) for p in _panels(board)])
    assert "/api/v1/checks/${check}/days/${__field.labels.day}" in links
    # The page first: it opens the day people clicked, in the drill-down page at `/`.
    assert '"${api}/#/checks/${check}/days/${__field.labels.day}"' in links
    assert '/api/v1/checks/${check}/days"' in links


def test_panel_queries_substitute_every_variable(board: dict[str, Any]) -> None:
    queries = panel_queries(board, check="reviews")
    assert len(queries) >= len(_panels(board))
    for q in queries:
        assert "$" not in q.expr, f"panel {q.panel_title!r} {q.ref_id}: {q.expr}"
    assert any('check=~"reviews"' in q.expr for q in queries)
    assert all('job=~".+", namespace=~".*", cluster=~".*"' in q.expr for q in queries)
    assert any("[5m]" in q.expr for q in queries)
    with pytest.raises(KeyError, match=r"\$nope"):
        substitute('up{x="$nope"}', {})


def test_panel_queries_are_valid_promql(board: dict[str, Any], tmp_path: Path) -> None:
    promtool = require_promtool()
    # promtool parses every expression of a rule file: wrap each query in a recording rule.
    rules = [
        {"record": f"dashboard:panel_{q.panel_id}_{q.ref_id}", "expr": q.expr}
        for q in panel_queries(board)
    ]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = promtool_check_rules(promtool, path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_provisioning_points_at_the_dashboard_and_a_prometheus() -> None:
    datasources = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    [ds] = datasources["datasources"]
    assert ds["type"] == "prometheus"
    assert ds["url"].startswith("http")
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "driftgauge.yml").read_text())
    [provider] = providers["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"].startswith("/")


def test_the_chart_ships_this_dashboard() -> None:
    # helm/driftgauge/files/ holds a copy (a chart cannot read outside its directory).
    copy = ROOT / "helm" / "driftgauge" / "files" / DASHBOARD.name
    assert copy.read_text(encoding="utf-8") == DASHBOARD.read_text(encoding="utf-8"), (
        f"{copy.relative_to(ROOT)} is stale: run `make rules` "
        "(python deploy/prometheus/generate.py)"
    )
