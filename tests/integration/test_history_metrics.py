"""What the full-history pass finds before the recent window stays on /metrics until repaired.

Real state database and the app's real /metrics exposition; the stores are in memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI

from driftgauge.stores.base import RowHash
from driftgauge.stores.memory import MemoryAdapter

from .app_helpers import Samples, finished_run, memory_app, samples, serving
from .service_helpers import Clock, day_rows, hashed, key_of, make_config, schema_name

pytestmark = pytest.mark.integration
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
"""Recent window (3 days): 03-08 .. 03-10; full-history window (30 days): 02-09 .. 03-10."""
FIRST = datetime(2026, 2, 20, tzinfo=UTC)
TTL_DAYS = 11
"""The source dropped its first 11 days (a TTL); the reader still shows them."""
LOST_UPDATE = datetime(2026, 3, 5, tzinfo=UTC)


def _days(n: int) -> list[RowHash]:
    return [r for d in range(n) for r in day_rows(FIRST + timedelta(days=d), 20)]


def _sides(source: list[RowHash], reader: list[RowHash]) -> dict[tuple[str, str], MemoryAdapter]:
    return {
        ("src", "reviews"): MemoryAdapter(source),
        ("dst", "reviews"): MemoryAdapter(reader),
        ("src", "orders"): MemoryAdapter([]),
        ("dst", "orders"): MemoryAdapter([]),
    }


async def _serve(
    dsn: str, sides: dict[tuple[str, str], MemoryAdapter], clock: Clock
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    app = memory_app(make_config(dsn, schema_name()), sides, clock, refresh_every=3600)
    async with serving(app) as client:
        yield client, app


async def _scrape(client: httpx.AsyncClient, app: FastAPI) -> Samples:
    # A run reads "finished" a moment before its tick reloads the snapshot: reload it now.
    await app.state.runtime.snapshots.refresh()
    return samples((await client.get("/metrics")).text)


def _v(got: Samples, name: str, **labels: str) -> float | None:
    return got.get((name, tuple(sorted({"check": "reviews", **labels}.items()))))


def _midnight(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


async def test_a_source_ttl_and_a_lost_update_found_by_the_full_pass_stay_until_repaired(
    pg_database: str,
) -> None:
    full = _days(19)
    ttl_end = FIRST + timedelta(days=TTL_DAYS)
    source = [r for r in full if r.event_time >= ttl_end]
    stale = next(r for r in full if r.event_time.date() == LOST_UPDATE.date())
    reader = [hashed(key_of(r), "old", r.event_time) if r.key == stale.key else r for r in full]
    sides = _sides(source, reader)
    async for client, app in _serve(pg_database, sides, Clock(NOW)):
        assert (await finished_run(client, "full"))["status"] == "drift"
        # A later recent run leaves the old days as the full pass judged them.
        assert (await finished_run(client, "recent"))["status"] == "ok"
        s = await _scrape(client, app)
        assert _v(s, "driftgauge_history_buckets_in_drift", direction="extra") == TTL_DAYS
        assert _v(s, "driftgauge_history_buckets_in_drift", direction="mismatched") == 1
        assert _v(s, "driftgauge_history_buckets_in_drift", direction="missing") == 0
        assert _v(s, "driftgauge_history_rows", kind="extra") == TTL_DAYS * 20
        assert _v(s, "driftgauge_history_rows", kind="mismatched") == 1
        assert (
            _v(s, "driftgauge_history_oldest_drift_day_timestamp_seconds", direction="extra")
            == FIRST.timestamp()
        )
        assert (
            _v(s, "driftgauge_history_oldest_drift_day_timestamp_seconds", direction="mismatched")
            == LOST_UPDATE.timestamp()
        )
        assert (
            _v(s, "driftgauge_history_oldest_drift_day_timestamp_seconds", direction="missing")
            is None
        )
        # The recent window is clean, as its own series say.
        assert _v(s, "driftgauge_buckets_in_drift", direction="extra") == 0
        assert _v(s, "driftgauge_bucket_rows", day=FIRST.date().isoformat(), kind="extra") is None

        # Repair: the reader drops what the source expired and takes the lost update.
        sides[("dst", "reviews")].rows = list(source)
        assert (await finished_run(client, "full"))["status"] == "ok"
        s = await _scrape(client, app)
        for direction in ("missing", "extra", "mismatched"):
            assert _v(s, "driftgauge_history_buckets_in_drift", direction=direction) == 0
            assert (
                _v(s, "driftgauge_history_oldest_drift_day_timestamp_seconds", direction=direction)
                is None
            )
        assert _v(s, "driftgauge_history_rows", kind="extra") == 0


async def test_a_drifting_day_that_ages_out_of_the_recent_window_stays_exported(
    pg_database: str,
) -> None:
    full = _days(19)
    gone = next(r for r in full if r.event_time.date() == date(2026, 3, 8))
    sides = _sides(full, [r for r in full if r.key != gone.key])
    clock = Clock(NOW)
    async for client, app in _serve(pg_database, sides, clock):
        assert (await finished_run(client, "recent"))["status"] == "drift"
        s = await _scrape(client, app)
        assert _v(s, "driftgauge_bucket_rows", day="2026-03-08", kind="missing") == 1
        # No day before the recent window was judged yet: nothing, not zeros.
        assert _v(s, "driftgauge_history_buckets_in_drift", direction="missing") is None
        clock.now = NOW + timedelta(days=1)
        assert (await finished_run(client, "recent"))["status"] == "ok"
        s = await _scrape(client, app)
        assert _v(s, "driftgauge_bucket_rows", day="2026-03-08", kind="missing") is None
        assert _v(s, "driftgauge_history_buckets_in_drift", direction="missing") == 1
        assert _v(s, "driftgauge_history_rows", kind="missing") == 1
        assert _v(
            s, "driftgauge_history_oldest_drift_day_timestamp_seconds", direction="missing"
        ) == _midnight(date(2026, 3, 8))
