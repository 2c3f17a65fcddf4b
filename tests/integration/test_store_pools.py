"""One pool or client per configured store, shared by every check and side that uses it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from driftgauge.stores.opensearch.adapter import OpenSearchAdapter
from driftgauge.stores.pools import StorePools
from driftgauge.stores.postgres.adapter import PostgresAdapter
from tests.integration.conftest import make_view, os_store, pg_store

pytestmark = pytest.mark.integration
DAY = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))
FIELDS = {"v": ("v", "string")}


async def test_views_on_one_postgres_store_share_its_pool(pg_database: str) -> None:
    store = pg_store(pg_database)
    a = make_view(
        store,
        key="k",
        time="ts",
        fields=FIELDS,
        query="SELECT 'x'::text AS k, now() AS ts, 'y'::text AS v",
    )
    b = make_view(store, key="k", time="ts", fields={}, query="SELECT 1 AS k, now() AS ts")
    pools = StorePools()
    try:
        first, second = await pools.adapter(a), await pools.adapter(b)
        assert isinstance(first, PostgresAdapter) and isinstance(second, PostgresAdapter)
        assert first._pool is second._pool
        await first.close()  # a side's close leaves the shared pool to the others
        assert await second.bucket_digests(*DAY, "day") == []
        assert await pools.connection(store) is second._pool
    finally:
        await pools.close()


async def test_views_on_one_opensearch_store_share_its_client() -> None:
    store = os_store()
    pools = StorePools()
    try:
        views = [
            make_view(store, key="k", time="ts", fields=FIELDS, index=f"dg_no_such_{i}")
            for i in range(2)
        ]
        first, second = [await pools.adapter(v) for v in views]
        assert isinstance(first, OpenSearchAdapter) and isinstance(second, OpenSearchAdapter)
        assert first._client is second._client is await pools.connection(store)
        await first.close()
        assert await pools.connection(store) is second._client
    finally:
        await pools.close()


async def test_one_store_name_configured_twice_differently_is_refused(pg_database: str) -> None:
    pools = StorePools()
    try:
        await pools.connection(pg_store(pg_database))
        with pytest.raises(ValueError, match="configured twice"):
            await pools.connection(pg_store(pg_database + "_other"))
    finally:
        await pools.close()
