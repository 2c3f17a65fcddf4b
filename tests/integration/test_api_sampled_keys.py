"""The keys endpoint counts a bucket's keys, not its stored sample (api.sample_keys: 50)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from driftgauge.stores.memory import MemoryAdapter

from .app_helpers import AUTH
from .service_helpers import DAY0, day_rows, planted
from .test_api import _run, _serve
from .test_ticks import sides

pytestmark = pytest.mark.integration
BIG = DAY0.date().isoformat()
SMALL = (DAY0 + timedelta(days=1)).date().isoformat()
GONE = 58
"""Keys of the first day the reader lacks: more than the 50 a run stores."""


@pytest.fixture(scope="module")
async def client(pg_database: str) -> AsyncIterator[httpx.AsyncClient]:
    adapters, _ = sides()
    rows = [r for d in range(3) for r in day_rows(DAY0 + timedelta(days=d), 60)]
    first = DAY0.date()
    reader, _ = planted([r for r in rows if r.event_time.date() != first])
    kept = [r for r in rows if r.event_time.date() == first][GONE:]
    adapters[("src", "reviews")] = MemoryAdapter(rows)
    adapters[("dst", "reviews")] = MemoryAdapter(kept + reader)
    async for c in _serve(pg_database, adapters):
        run = await _run(c, "reviews")
        assert run["status"] == "drift" and run["complete"], run
        yield c


async def _keys(client: httpx.AsyncClient, day: str, **params: Any) -> dict[str, Any]:
    resp = await client.get(f"/api/v1/checks/reviews/days/{day}/keys", params=params, headers=AUTH)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


async def test_a_day_with_more_keys_than_stored_counts_them_all_and_says_sampled(
    client: httpx.AsyncClient,
) -> None:
    day = (await client.get(f"/api/v1/checks/reviews/days/{BIG}")).json()["bucket"]
    assert day["missing"] == GONE
    missing = await _keys(client, BIG, kind="missing", limit=500)
    assert (missing["total"], missing["sampled"], len(missing["keys"])) == (GONE, True, 50)
    every = await _keys(client, BIG, limit=500)
    assert every["total"] == GONE and every["sampled"] is True
    # No extra key was found that day: that kind's list is whole.
    extra = await _keys(client, BIG, kind="extra")
    assert (extra["total"], extra["sampled"], extra["keys"]) == (0, False, [])


async def test_a_filter_on_a_sampled_day_gives_no_total(client: httpx.AsyncClient) -> None:
    by_hour = await _keys(client, BIG, kind="missing", hour="3")
    assert by_hour["total"] is None and by_hour["sampled"] is True
    assert by_hour["keys"] and all(k["event_time"].startswith(f"{BIG}T03") for k in by_hour["keys"])
    prefix = by_hour["keys"][0]["key_hash"][:1]
    by_prefix = await _keys(client, BIG, prefix=prefix)
    assert by_prefix["total"] is None and by_prefix["sampled"] is True


async def test_a_day_whose_keys_were_all_stored_is_not_sampled(client: httpx.AsyncClient) -> None:
    missing = await _keys(client, SMALL, kind="missing")
    assert (missing["total"], missing["sampled"], len(missing["keys"])) == (2, False, 2)
    every = await _keys(client, SMALL)
    assert (every["total"], every["sampled"]) == (4, False)
    prefix = every["keys"][0]["key_hash"][:2]
    by_prefix = await _keys(client, SMALL, prefix=prefix)
    assert by_prefix["sampled"] is False
    assert by_prefix["total"] == len(by_prefix["keys"]) >= 1
