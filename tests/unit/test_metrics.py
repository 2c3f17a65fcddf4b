"""The /metrics collector on hand-built snapshots: the contract in docs/metrics.md."""

from __future__ import annotations

import platform
import shutil
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from driftgauge.core.aggregate import Aggregate
from driftgauge.engine.result import BucketResult
from driftgauge.metrics.collector import build_registry, process_part, reconciliation_part
from driftgauge.metrics.history import history_part
from driftgauge.metrics.leader import exporter_part, stored_parts
from driftgauge.metrics.snapshot import CheckSnapshot
from driftgauge.state.payloads import CheckRun, RunStatus

from .metrics_doc import documented_rows, exposed, ticked

DAY = datetime(2026, 3, 8, tzinfo=UTC)
T_OK = datetime(2026, 3, 10, 10, 0, tzinfo=UTC)
T_FAIL = T_OK + timedelta(hours=1)


def run(run_id: int, status: RunStatus, finished: datetime, error: str | None = None) -> CheckRun:
    return CheckRun(
        run_id,
        "reviews",
        "recent",
        DAY,
        finished,
        None,
        finished,
        finished,
        status,
        error is None,
        error,
        2.5,
        4,
        10,
        "r1",
    )


def buckets() -> tuple[BucketResult, ...]:
    drift = BucketResult(
        start=DAY,
        status="drift",
        expected=100,
        visible=95,
        excluded={"no_join_key": 2},
        missing=4,
        extra=1,
        mismatched=0,
        duplicates=0,
        source=Aggregate(98, 98, 1, {"amount": Decimal("10.50")}),
        reader=Aggregate(95, 95, 2, {"amount": Decimal("9.25")}),
        strategy="digests",
    )
    ok = BucketResult(
        start=DAY + timedelta(days=1),
        status="ok",
        expected=50,
        visible=49,
        excluded={"no_join_key": 1},
        strategy="aggregates",
    )
    settling = BucketResult(start=DAY + timedelta(days=2), status="settling", expected=7, visible=3)
    return drift, ok, settling


def registry(snaps: dict[str, CheckSnapshot]) -> CollectorRegistry:
    return build_registry(
        [reconciliation_part(lambda: snaps), history_part(lambda: snaps), process_part("9.9.9")]
    )


def healthy() -> CheckSnapshot:
    return CheckSnapshot(
        "reviews",
        3600.0,
        run(2, "drift", T_OK),
        run(2, "drift", T_OK),
        {"ok": 3, "drift": 1},
        buckets(),
        {"no_join_key": 0.05},
        history=old_buckets(),
    )


def failing(error: str) -> CheckSnapshot:
    """Return a check whose latest run failed with `error` after a drift run."""
    return CheckSnapshot(
        "reviews",
        3600.0,
        run(3, "error", T_FAIL, error),
        run(2, "drift", T_OK),
        {"drift": 1, "error": 1},
        buckets(),
    )


def old_buckets() -> tuple[BucketResult, ...]:
    """Return two days before the recent window as the full pass found them."""
    return tuple(replace(b, start=b.start - timedelta(days=20)) for b in buckets()[:2])


def test_latest_results_become_per_bucket_and_window_series() -> None:
    reg = registry({"reviews": healthy()})
    v = reg.get_sample_value
    assert v("driftgauge_check_up", {"check": "reviews"}) == 1
    assert (
        v("driftgauge_check_last_success_timestamp_seconds", {"check": "reviews"})
        == T_OK.timestamp()
    )
    assert v("driftgauge_check_run_duration_seconds", {"check": "reviews"}) == 2.5
    assert v("driftgauge_check_runs_total", {"check": "reviews", "status": "ok"}) == 3
    assert v("driftgauge_check_runs_total", {"check": "reviews", "status": "error"}) == 0
    assert v("driftgauge_check_schedule_seconds", {"check": "reviews"}) == 3600
    day = {"check": "reviews", "day": "2026-03-08"}
    assert v("driftgauge_bucket_rows", {**day, "kind": "missing"}) == 4
    assert v("driftgauge_bucket_rows", {**day, "kind": "excluded"}) == 2
    assert v("driftgauge_bucket_excluded_rows", {**day, "reason": "no_join_key"}) == 2
    assert v("driftgauge_bucket_status", {**day, "status": "drift"}) == 1
    assert v("driftgauge_bucket_status", {**day, "status": "ok"}) == 0
    settling = {"check": "reviews", "day": "2026-03-10"}
    assert v("driftgauge_bucket_status", {**settling, "status": "settling"}) == 1
    # Window sums leave the settling bucket out.
    assert v("driftgauge_rows", {"check": "reviews", "kind": "expected"}) == 150
    assert v("driftgauge_rows", {"check": "reviews", "kind": "visible"}) == 144
    assert v("driftgauge_excluded_rows", {"check": "reviews", "reason": "no_join_key"}) == 3
    assert v("driftgauge_buckets_in_drift", {"check": "reviews", "direction": "missing"}) == 1
    assert v("driftgauge_buckets_in_drift", {"check": "reviews", "direction": "mismatched"}) == 0
    assert (
        v("driftgauge_exclusion_rate_limit", {"check": "reviews", "reason": "no_join_key"}) == 0.05
    )
    assert (
        v("driftgauge_build_info", {"version": "9.9.9", "python": platform.python_version()}) == 1
    )


def test_a_failed_run_flips_up_and_keeps_the_last_rows() -> None:
    failed = failing("StoreUnavailable")
    v = registry({"reviews": failed}).get_sample_value
    assert v("driftgauge_check_up", {"check": "reviews"}) == 0
    assert (
        v("driftgauge_check_last_run_timestamp_seconds", {"check": "reviews"}) == T_FAIL.timestamp()
    )
    assert (
        v("driftgauge_check_last_success_timestamp_seconds", {"check": "reviews"})
        == T_OK.timestamp()
    )
    assert (
        v("driftgauge_bucket_rows", {"check": "reviews", "day": "2026-03-08", "kind": "missing"})
        == 4
    )
    assert v("driftgauge_rows", {"check": "reviews", "kind": "expected"}) == 150
    assert v("driftgauge_check_runs_total", {"check": "reviews", "status": "error"}) == 1


def test_a_check_that_never_ran_publishes_no_health_and_no_zero_rows() -> None:
    v = registry({"orders": CheckSnapshot("orders", 900.0)}).get_sample_value
    assert v("driftgauge_check_up", {"check": "orders"}) is None
    assert v("driftgauge_rows", {"check": "orders", "kind": "missing"}) is None
    assert v("driftgauge_check_runs_total", {"check": "orders", "status": "ok"}) == 0


def test_the_registry_is_private_and_parts_compose() -> None:
    def canary() -> list[Metric]:
        fam = GaugeMetricFamily("driftgauge_canary_up", "Canary.", labels=["check"])
        fam.add_metric(["reviews"], 1)
        return [fam]

    reg = build_registry([process_part("1"), canary])
    assert reg.get_sample_value("driftgauge_canary_up", {"check": "reviews"}) == 1
    assert (
        REGISTRY.get_sample_value(
            "driftgauge_build_info", {"version": "1", "python": platform.python_version()}
        )
        is None
    )


def _documented(sections: tuple[str, ...]) -> dict[str, tuple[str, set[str]]]:
    keep = {"check", "day", "kind", "status", "reason", "direction", "version", "python"}
    return {
        name: (kind, set(ticked(cell.split("(")[0])) | {lab for lab in ticked(cell) if lab in keep})
        for name, kind, cell in documented_rows(sections)
    }


def test_exposition_matches_the_documented_names_types_and_labels() -> None:
    text = generate_latest(registry({"reviews": healthy()})).decode()
    assert exposed(text) == _documented(("Reconciliation", "Full history", "Process"))


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_exposition() -> None:
    failed = failing("x")
    text = generate_latest(registry({"reviews": failed, "orders": CheckSnapshot("orders")}))
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


def test_only_the_exporter_serves_the_stored_series() -> None:
    snaps = {"reviews": healthy()}
    leader = {"now": True}

    def is_leader() -> bool:
        return leader["now"]

    stored = stored_parts(is_leader, [reconciliation_part(lambda: snaps)])
    reg = build_registry([stored, exporter_part(is_leader), process_part("9.9.9")])
    runs = {"check": "reviews", "status": "drift"}
    info = {"version": "9.9.9", "python": platform.python_version()}
    assert reg.get_sample_value("driftgauge_check_runs_total", runs) == 1
    assert reg.get_sample_value("driftgauge_exporter_leader") == 1
    leader["now"] = False
    assert reg.get_sample_value("driftgauge_check_runs_total", runs) is None
    assert "driftgauge_buckets_in_drift" not in generate_latest(reg).decode()
    assert reg.get_sample_value("driftgauge_exporter_leader") == 0
    # The process's own series stay on every replica.
    assert reg.get_sample_value("driftgauge_build_info", info) == 1


def test_the_exporter_gauge_matches_its_documented_section() -> None:
    text = generate_latest(build_registry([exporter_part(lambda: False)])).decode()
    assert exposed(text) == _documented(("Replicas",))


def test_buckets_are_counted_by_the_strategy_that_judged_them() -> None:
    drift, ok, settling = buckets()
    judged = (
        drift,
        ok,
        replace(ok, start=ok.start + timedelta(days=5)),
        # A bucket stored before strategies were kept counts in none; settling in none.
        replace(ok, start=ok.start + timedelta(days=6), strategy=None),
        replace(settling, strategy="aggregates"),
    )
    snap = replace(healthy(), buckets=judged)
    v = registry({"reviews": snap}).get_sample_value
    by = {"check": "reviews"}
    assert v("driftgauge_buckets_by_strategy", {**by, "strategy": "digests"}) == 1
    assert v("driftgauge_buckets_by_strategy", {**by, "strategy": "aggregates"}) == 2
    assert v("driftgauge_buckets_by_strategy", {**by, "strategy": "drill"}) is None
