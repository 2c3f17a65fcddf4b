"""The elasticsearch kind's point in time through a fault proxy in front of the real node.

Elasticsearch 7.10 opens a PIT at /<index>/_pit and answers {"id"} with no _shards, so the
only completeness check left is every page's: a page missing a shard must fail the export.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from driftgauge.core.errors import StoreQueryError
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from tests.conformance.kind_elasticsearch import ES_URL
from tests.faults.proxy import Fault, HttpFaultProxy
from tests.integration.conftest import TIMEOUT, make_view, os_store, unique_name

pytestmark = pytest.mark.integration

AT = datetime(2026, 3, 2, 12, tzinfo=UTC)
ROWS = 30


@pytest.fixture(scope="module")
async def proxied() -> AsyncIterator[tuple[HttpFaultProxy, StoreAdapter, str]]:
    """Yield a proxy in front of the node, an elasticsearch adapter through it, the index."""
    client = AsyncOpenSearch(hosts=[ES_URL], timeout=TIMEOUT)
    index = unique_name("dg_es_pit")
    parts = urlsplit(ES_URL)
    proxy = HttpFaultProxy((parts.hostname or "127.0.0.1", parts.port or 9260))
    try:
        await client.indices.create(
            index=index,
            body={
                "settings": {"number_of_shards": 3, "number_of_replicas": 0},
                "mappings": {"properties": {"k": {"type": "keyword"}, "t": {"type": "date"}}},
            },
        )
        docs = (
            {"_index": index, "_source": {"k": f"k{i:02d}", "t": AT.isoformat()}}
            for i in range(ROWS)
        )
        await async_bulk(client, docs, refresh=True)
        await proxy.start()
        store = replace(os_store(proxy.url), kind="elasticsearch")
        adapter = await open_adapter(make_view(store, key="k", time="t", fields={}, index=index))
        try:
            yield proxy, adapter, index
        finally:
            await adapter.close()
    finally:
        await proxy.stop()
        await client.indices.delete(index=index, ignore_unavailable=True)
        await client.close()


async def _export(adapter: StoreAdapter) -> list[str]:
    day = timedelta(days=1)
    return [str(row.key) async for row in adapter.iter_rows(AT - day, AT + day)]


async def test_the_export_opens_and_frees_elasticsearch_s_point_in_time(
    proxied: tuple[HttpFaultProxy, StoreAdapter, str],
) -> None:
    proxy, adapter, index = proxied
    proxy.arm()
    assert sorted(await _export(adapter)) == [f"k{i:02d}" for i in range(ROWS)]
    lines = [s.line for s in proxy.seen]
    assert [line for line in lines if "_pit" in line] == [
        f"POST /{index}/_pit?keep_alive=2m",
        "DELETE /_pit",
    ]


async def test_a_page_missing_a_shard_fails_the_export(
    proxied: tuple[HttpFaultProxy, StoreAdapter, str],
) -> None:
    proxy, adapter, _ = proxied
    # PIT pages are searches without an index in the path.
    proxy.arm(Fault("failed_shard", match=r"^POST /_search\?"))
    with pytest.raises(StoreQueryError, match=r"export rows.*1 of 3 shards failed"):
        await _export(adapter)
    assert proxy.injected("failed_shard") == 1
