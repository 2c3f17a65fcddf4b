"""The hour endpoints address both 02:00 hours of a day that falls back, on the real state DB."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from driftgauge.app.service import create_app
from driftgauge.configfile.loader import load_text
from driftgauge.stores.base import RowHash
from driftgauge.stores.memory import MemoryAdapter

from .app_client import app_client, finished_run
from .service_helpers import CONFIG, TOKEN, hashed, key_of, memory_opener, schema_name

pytestmark = pytest.mark.integration
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BERLIN = "Europe/Berlin"
DAY = "2026-10-25"
DAY_START = datetime(2026, 10, 24, 22, tzinfo=UTC)  # local midnight, +02:00
NOW = datetime(2026, 10, 26, 12, tzinfo=UTC)
WINTER_TWO = datetime(2026, 10, 25, 1, tzinfo=UTC)  # the second 02:00, +01:00


def _rows() -> tuple[list[RowHash], list[RowHash]]:
    src = [
        hashed(f"t{i:04d}", "ok", DAY_START + timedelta(seconds=i * 90_000 // 500))
        for i in range(500)
    ]
    # Drift only inside the repeated hour: one row changed, one gone.
    inside = [r for r in src if WINTER_TWO <= r.event_time < WINTER_TWO + timedelta(hours=1)]
    changed, gone = inside[3], inside[9]
    rdr = [
        hashed(key_of(r), "changed", r.event_time) if r is changed else r
        for r in src
        if r is not gone
    ]
    return src, rdr


@pytest.fixture(scope="module")
async def client(pg_database: str) -> AsyncIterator[httpx.AsyncClient]:
    text = (
        CONFIG.replace("<DSN>", pg_database)
        .replace("<SCHEMA>", schema_name())
        .replace("<TOKEN>", TOKEN)
        .replace("<PUBLIC>", "true")
        .replace("    settle: 2h\n", f"    settle: 2h\n    timezone: {BERLIN}\n", 1)
    )
    config = load_text(text)
    src, rdr = _rows()
    tz = config.checks["reviews"].timezone
    adapters = {
        ("src", "reviews"): MemoryAdapter(src, tz),
        ("dst", "reviews"): MemoryAdapter(rdr, tz),
        ("src", "orders"): MemoryAdapter([]),
        ("dst", "orders"): MemoryAdapter([]),
    }
    app = create_app(
        config,
        start_scheduler=False,
        opener=memory_opener(adapters),
        clock=lambda: NOW,
        refresh_every=3600,
    )
    async with app_client(app) as c:
        run = await finished_run(c, "reviews", AUTH)
        assert run["status"] == "drift", run
        yield c


async def test_day_lists_25_distinct_hours(client: httpx.AsyncClient) -> None:
    day = (await client.get(f"/api/v1/checks/reviews/days/{DAY}")).json()
    assert day["bucket"]["status"] == "drift"
    assert (day["bucket"]["missing"], day["bucket"]["mismatched"]) == (1, 1)
    differing = [h["label"] for h in day["hours"] if h["differs"]]
    assert differing == ["2026-10-25T02:00:00+01:00"]


@pytest.mark.parametrize("live", [False, True])
async def test_both_two_oclock_hours_are_addressable(client: httpx.AsyncClient, live: bool) -> None:
    base = f"/api/v1/checks/reviews/days/{DAY}/hours"
    params = {"live": "true"} if live else {}

    async def get(path: str) -> httpx.Response:
        return await client.get(f"{base}/{path}", params=params, headers=AUTH)

    summer, winter, by_utc = [
        (await get(h)).json() for h in ("02:00+02:00", "02:00+01:00", "2026-10-25T01:00:00Z")
    ]
    assert summer["start"] == "2026-10-25T02:00:00+02:00" and summer["differs"] is False
    assert winter["start"] == "2026-10-25T02:00:00+01:00" and winter["differs"] is True
    assert by_utc["start"] == winter["start"] and by_utc["label"] == "02:00+01:00"
    assert winter["end"] == "2026-10-25T03:00:00+01:00"
    three = (await get("3")).json()
    assert three["start"] == "2026-10-25T03:00:00+01:00"
    ambiguous = await get("2")
    assert ambiguous.status_code == 422
    assert "02:00+02:00 or 02:00+01:00" in ambiguous.text


async def test_keys_of_one_repeated_hour(client: httpx.AsyncClient) -> None:
    url = f"/api/v1/checks/reviews/days/{DAY}/keys"
    winter = (await client.get(url, params={"hour": "02:00+01:00"}, headers=AUTH)).json()
    summer = (await client.get(url, params={"hour": "02:00+02:00"}, headers=AUTH)).json()
    assert winter["total"] == 2 and summer["total"] == 0
    bad = await client.get(url, params={"hour": "2"}, headers=AUTH)
    assert bad.status_code == 422 and "hour" in bad.text
