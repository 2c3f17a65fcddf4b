"""A peeled day's hours over the API: stored, they are empty; only a token holder asks live."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from driftgauge.core.errors import StoreUnavailable
from driftgauge.stores.memory import DigestMemoryAdapter

from .service_helpers import DAY0, day_rows, planted
from .test_api import AUTH, DAY, _run, _serve
from .test_ticks import sides

pytestmark = pytest.mark.integration
URL = f"/api/v1/checks/reviews/days/{DAY}"


async def test_a_peeled_day_lists_its_hours_only_live_with_a_token(pg_database: str) -> None:
    adapters, _ = sides()
    rows = [r for d in range(3) for r in day_rows(DAY0 + timedelta(days=d), 60)]
    reader, _ = planted(rows)
    # Both sides give difference digests, so the run peels each day and keeps no hours.
    src, dst = DigestMemoryAdapter(rows), DigestMemoryAdapter(reader)
    adapters[("src", "reviews")], adapters[("dst", "reviews")] = src, dst
    async for c in _serve(pg_database, adapters):
        run = await _run(c, "reviews")
        assert run["status"] == "drift" and run["complete"]
        asked = (len(src.calls), len(dst.calls))

        stored = await c.get(URL)
        assert stored.status_code == 200, stored.text
        day = stored.json()
        assert (day["bucket"]["missing"], day["bucket"]["extra"]) == (2, 1)
        # The planner's choice is stored with the verdict and served with it.
        assert day["bucket"]["strategy"] in ("digests", "day_digests")
        assert "difference digests" in day["bucket"]["strategy_reason"]
        assert day["hours"] == [] and day["prefixes"] == []
        assert day["hours_live_only"] is True and day["live"] is False
        for token in ({}, {"Authorization": "Bearer nope"}):
            anon = await c.get(URL, params={"live": "true"}, headers=token)
            assert anon.status_code == 401, anon.text
        assert (len(src.calls), len(dst.calls)) == asked, "a read without live queried a store"

        live = await c.get(URL, params={"live": "true"}, headers=AUTH)
        assert live.status_code == 200, live.text
        body = live.json()
        assert body["live"] is True and body["hours_live_only"] is False
        assert body["bucket"] == day["bucket"]
        differing = {datetime.fromisoformat(h["label"]).hour for h in body["hours"] if h["differs"]}
        # Rows 3 and 40 missing, 7 changed, an extra beside 10: 24 minutes apart from 00:00.
        assert differing == {1, 2, 4, 16}
        assert len(src.calls) > asked[0] and len(dst.calls) > asked[1]

        # With both stores down the stored day still answers; asking live says 502.
        src.fail_with = dst.fail_with = StoreUnavailable("src", "connection refused")
        down = await c.get(URL)
        assert down.status_code == 200 and down.json()["hours_live_only"] is True
        failed = await c.get(URL, params={"live": "true"}, headers=AUTH)
        assert failed.status_code == 502 and "connection refused" in failed.text


async def test_a_day_that_agrees_or_kept_its_hours_is_not_live_only(pg_database: str) -> None:
    adapters, _ = sides()
    async for c in _serve(pg_database, adapters):
        for check in ("reviews", "orders"):
            await _run(c, check)
        kept = (await c.get(URL)).json()
        assert kept["hours"] and not kept["hours_live_only"]
        agrees = (await c.get(f"/api/v1/checks/orders/days/{DAY}")).json()
        assert agrees["bucket"]["status"] == "ok" and not agrees["hours_live_only"]


async def test_the_schema_says_a_day_is_live_with_a_token(pg_database: str) -> None:
    adapters, _ = sides()
    async for c in _serve(pg_database, adapters):
        schema = (await c.get("/openapi.json")).json()
    op = schema["paths"]["/api/v1/checks/{check}/days/{day}"]["get"]
    live = next(p for p in op["parameters"] if p["name"] == "live")
    assert live["in"] == "query" and "bearer token" in live["description"]
    assert {"401", "403", "429", "502", "504"} <= set(op["responses"])
    day = schema["components"]["schemas"]["DayOut"]
    assert "hours_live_only" in day["required"]
    assert "live=true" in day["properties"]["hours_live_only"]["description"]
