"""The volume band on a source with ten days of history: real PostgreSQL source and state DB."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI

from driftgauge.api.auth import TokenCheck
from driftgauge.config.frozen import Check
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import ConfigError
from driftgauge.signals.metrics import SignalsMetrics
from driftgauge.signals.router import signals_router
from driftgauge.signals.run import evaluate_signals
from driftgauge.signals.service import SignalsService
from driftgauge.signals.store import SignalsStore
from tests.integration.runs import opened
from tests.integration.signals_support import registry_of, state_pool
from tests.store_fixtures import pg_table, task_sides, tasks_and_search

pytestmark = pytest.mark.integration

BORN = datetime(2024, 6, 1, tzinfo=UTC)
"""The source's first row: nothing exists before this day."""
DAYS = 10
LOST = 8
"""The source lost this day: a real anomaly once there is history enough to see it."""
NOW = BORN + timedelta(days=DAYS, hours=3)


def raw_config(dsn: str, volume: dict[str, Any]) -> dict[str, Any]:
    return {
        **tasks_and_search(dsn),
        "checks": {
            "reviews": {
                **task_sides("vh_tasks", "vh_unused"),
                "settle": "2h",
                "schedule": {"recent": {"every": "1h", "days": 7}},
                "volume": volume,
            }
        },
    }


def check_config(dsn: str, **volume: Any) -> Check:
    return load_text(yaml.safe_dump(raw_config(dsn, volume))).checks["reviews"]


@pytest.fixture(scope="module")
async def source(pg_database: str) -> AsyncIterator[str]:
    rows = [
        (f"t{d:02d}-{i:03d}", BORN + timedelta(days=d, minutes=13 * i))
        for d in range(DAYS)
        if d != LOST
        for i in range(40 + (d * 7) % 21)
    ]
    await pg_table(pg_database, "vh_tasks", "task_id text, completed_at timestamptz", rows)
    yield pg_database


async def _judge(check: Check, dsn: str) -> tuple[list[Any], Any, list[Any], httpx.Response]:
    async with opened(check.source) as adapter, state_pool(dsn) as pool:
        store = SignalsStore(pool)
        found = await evaluate_signals(check, adapter, store, BORN, NOW, now=NOW)
        part = SignalsMetrics(store, ["reviews"])
        await part.refresh()
        service = SignalsService(
            {"reviews": check},
            store,
            lambda c: None,  # type: ignore[arg-type,return-value]
            clock=lambda: NOW,
        )
        app = FastAPI()
        app.include_router(
            signals_router(
                TokenCheck([], public_read=True).require_read, get_service=lambda: service
            ),
            prefix="/api/v1",
        )
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://dg"
        ) as client:
            resp = await client.get("/api/v1/checks/reviews/volume")
            missing = await client.get("/api/v1/checks/nope/volume")
        assert missing.status_code == 404 and "nope" in missing.json()["detail"]
        stored = await store.volume("reviews")
    return found.volume, registry_of(part).get_sample_value, stored, resp


def _day(d: int) -> str:
    return (BORN + timedelta(days=d)).date().isoformat()


async def test_days_with_too_little_history_are_not_judged(source: str) -> None:
    found, v, stored, resp = await _judge(check_config(source), source)
    # Ten settled days, none with the default 14 days of history: not one verdict.
    assert [d.day.isoformat() for d in found] == [_day(d) for d in range(DAYS)]
    assert {d.status for d in found} == {"insufficient_history"}
    assert not any(d.anomaly for d in found)
    assert [d.history_days for d in found] == list(range(DAYS))
    for d in range(DAYS):
        labels = {"check": "reviews", "day": _day(d)}
        # No anomaly series (neither 1 nor a 0 that would read as a judged day).
        assert v("driftgauge_volume_anomaly", labels) is None
        assert v("driftgauge_volume_status", {**labels, "status": "insufficient_history"}) == 1
        assert v("driftgauge_volume_status", {**labels, "status": "anomaly"}) == 0
        assert v("driftgauge_volume_history_buckets", labels) == d
    assert [(d.status, d.history_days) for d in stored] == [
        (d.status, d.history_days) for d in found
    ]
    assert resp.status_code == 200
    body = resp.json()
    assert body["needed_history_days"] == 14
    assert [d["status"] for d in body["days"]] == ["insufficient_history"] * DAYS


async def test_enough_history_judges_against_the_days_the_source_existed(source: str) -> None:
    found, v, _, resp = await _judge(check_config(source, min_history=5), source)
    by = {d.day.isoformat(): d for d in found}
    assert [by[_day(d)].status for d in range(5)] == ["insufficient_history"] * 5
    # Days before BORN are not zeros: the band is built from the days the source existed.
    assert by[_day(5)].status == "ok" and by[_day(5)].history_days == 5
    assert by[_day(5)].mean == sum(40 + (d * 7) % 21 for d in range(5)) / 5
    assert by[_day(LOST)].status == "anomaly" and by[_day(LOST)].distinct_keys == 0
    assert [d.day.isoformat() for d in found if d.anomaly] == [_day(LOST)]
    assert v("driftgauge_volume_anomaly", {"check": "reviews", "day": _day(LOST)}) == 1
    assert v("driftgauge_volume_anomaly", {"check": "reviews", "day": _day(5)}) == 0
    assert v("driftgauge_volume_anomaly", {"check": "reviews", "day": _day(4)}) is None
    assert resp.json()["needed_history_days"] == 5


def test_min_history_beyond_trailing_is_refused_naming_both() -> None:
    dsn = "postgresql://unused@127.0.0.1:1/unused"
    with pytest.raises(ConfigError) as err:
        load_text(yaml.safe_dump(raw_config(dsn, {"trailing": 10, "min_history": 20})))
    text = "\n".join(err.value.problems)
    assert "checks.reviews.volume" in text and "min_history (20)" in text
    assert "trailing (10)" in text
