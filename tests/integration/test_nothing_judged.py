"""A run that judged no bucket says so: its own status, exit code and metric, never ok."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from driftgauge.configfile.loader import load_file
from driftgauge.metrics.collector import build_registry, reconciliation_part
from driftgauge.metrics.snapshot import load_check
from driftgauge.state.store import StateStore

from .test_cli import check_reviews, config

pytestmark = pytest.mark.integration
__all__ = ["config"]


def _value(registry: object, name: str, labels: dict[str, str]) -> float | None:
    from prometheus_client import CollectorRegistry

    assert isinstance(registry, CollectorRegistry)
    return registry.get_sample_value(name, labels)


async def test_a_future_window_is_nothing_judged(config: Path) -> None:
    done = check_reviews(config, "2030-01-01", "2030-01-02", "--json")
    assert done.returncode == 4, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["status"] == "nothing_judged"
    assert all(b["status"] == "settling" for b in out["buckets"])
    table = check_reviews(config, "2030-01-01", "2030-01-02")
    assert table.returncode == 4
    assert "nothing_judged" in table.stdout and "not a pass" in table.stdout

    # Recorded as such: not a success, and /metrics names the status.
    cfg = load_file(str(config))
    check = cfg.checks["reviews"]
    state = await StateStore.open(cfg.state)
    try:
        last = await state.latest_finished_run("reviews")
        assert last is not None and last.status == "nothing_judged" and last.complete
        assert await state.latest_success("reviews") is None
        snap = await load_check(state, check, datetime.now(UTC))
    finally:
        await state.close()
    registry = build_registry([reconciliation_part(lambda: {"reviews": snap})])
    status = {
        s: _value(registry, "driftgauge_check_run_status", {"check": "reviews", "status": s})
        for s in ("ok", "drift", "error", "nothing_judged")
    }
    assert status == {"ok": 0, "drift": 0, "error": 0, "nothing_judged": 1}
    assert (
        _value(
            registry,
            "driftgauge_check_runs_total",
            {"check": "reviews", "status": "nothing_judged"},
        )
        == 2
    )  # both runs above
    assert (
        _value(registry, "driftgauge_check_last_success_timestamp_seconds", {"check": "reviews"})
        is None
    )


def test_a_window_that_is_all_settling_is_nothing_judged(config: Path) -> None:
    today = datetime.now(UTC).date().isoformat()
    done = check_reviews(config, today, today, "--no-store", "--json")
    assert done.returncode == 4, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["status"] == "nothing_judged"
    assert [b["status"] for b in out["buckets"]] == ["settling"]


def test_a_judged_day_beside_settling_ones_is_still_judged(config: Path) -> None:
    today = datetime.now(UTC).date().isoformat()
    done = check_reviews(
        config, "2026-04-03", today, "--no-store", "--first-pass", "days", "--json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["status"] == "ok"
