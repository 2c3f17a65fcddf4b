"""What only the OpenSearch and PostgreSQL adapters do, on real stores.

What every kind answers alike is in tests/conformance/.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import UTC, timedelta
from typing import Any

import asyncpg
import pytest
from opensearchpy import AsyncOpenSearch

from driftgauge.core.errors import StoreQueryError
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.opensearch import requests as rq
from driftgauge.stores.opensearch.adapter import OpenSearchAdapter
from tests.conformance import kind_opensearch
from tests.conformance.items import ITEMS, ROWS, SPEC
from tests.integration import dataset as ds
from tests.integration.conftest import (
    PG_DSN,
    TIMEOUT,
    dsn_for,
    make_view,
    os_store,
    pg_store,
    unique_name,
)
from tests.integration.dataset import ODD, python_slots
from tests.store_fixtures import load_index

pytestmark = pytest.mark.integration

WINDOW = (ds.START, ds.END)


@dataclass
class Loaded:
    """The data set in an OpenSearch index (3 shards), with an adapter on it."""

    index: str
    os: OpenSearchAdapter


@pytest.fixture(scope="module")
async def loaded() -> AsyncIterator[Loaded]:
    """Load the items into an index and open an adapter."""
    source = await kind_opensearch.OpenSearchFixtures().load(ITEMS)
    try:
        adapter = await source.open(SPEC)
        assert isinstance(adapter, OpenSearchAdapter)
        try:
            yield Loaded(source.index, adapter)
        finally:
            await adapter.close()
    finally:
        await source.drop()


def _chunked(loaded: Loaded, max_chunk_rows: int) -> OpenSearchAdapter:
    return OpenSearchAdapter(
        kind_opensearch.view(loaded.index, SPEC), loaded.os._client, max_chunk_rows=max_chunk_rows
    )


async def _rows(adapter: StoreAdapter, prefixes: list[str] | None = None) -> list[Any]:
    return sorted(
        [
            (r.key, r.key_hash, r.row_hash, r.event_time)
            async for r in adapter.iter_rows(*WINDOW, prefixes)
        ]
    )


async def test_opensearch_chunked_window_equals_python(loaded: Loaded) -> None:
    chunked = _chunked(loaded, 1500)
    counts = [
        (int(b.start.timestamp() * 1000), b.agg.count) for b in ds.python_buckets(ROWS, "day")
    ]
    assert len(rq.plan_chunks(rq.DayCounts(*WINDOW, counts), 1500, 1000)) == 6
    assert await chunked.bucket_digests(*WINDOW, "hour") == ds.python_buckets(ROWS, "hour")


async def test_opensearch_pages_never_split_a_duplicated_key(
    os_client: AsyncOpenSearch, os_index: Callable[[str], str]
) -> None:
    index = os_index("dg_pages")
    # Key i has i + 1 copies; pages of 4 must grow to hold the 12 copies of k11.
    rows = [replace(ROWS[i], id=f"k{i:02d}") for i in range(12) for _ in range(i + 1)]
    docs = (r.doc() for r in rows)
    await load_index(os_client, index, ds.OS_TYPES, docs, shards=3, replicas=0)
    view = make_view(os_store(), key="id", time="ts", fields=ds.FIELDS, tz=ds.TZ.key, index=index)
    adapter = await OpenSearchAdapter.open(view)
    adapter.page_size = 4
    try:
        got = await _rows(adapter)
    finally:
        await adapter.close()
    assert got == ds.python_rows(rows)
    assert len(got) == 78


async def test_opensearch_slot_chunks_cut_on_slot_bounds(loaded: Loaded) -> None:
    chunked = _chunked(loaded, 500)
    counts = [
        (int(b.start.timestamp() * 1000), b.agg.count) for b in ds.python_buckets(ROWS, "day")
    ]
    for seconds in (240, 60):
        chunks = rq.plan_slot_chunks(rq.DayCounts(*ODD, counts), 500, seconds)
        # Local midnights are off the grid of ODD's start; 60 s slots exceed a request's cap.
        assert len(chunks) >= (3 if seconds == 240 else 4)
        for chunk in chunks:
            offset = chunk.start.astimezone(UTC) - ODD[0].astimezone(UTC)
            assert offset % timedelta(seconds=seconds) == timedelta(0)
            assert chunk.end - chunk.start <= timedelta(seconds=seconds * 1000)
        assert await chunked.slot_digests(*ODD, seconds) == python_slots(ROWS, *ODD, seconds)


async def test_opensearch_first_pass_in_chunks_and_without_rules(loaded: Loaded) -> None:
    chunked = _chunked(loaded, 500)
    window = (ODD[0].replace(second=0, microsecond=0), ds.END)
    first = await chunked.day_and_slot_digests(*window, 60)
    # The unchunked adapter's days: the conformance suite holds them equal to Python's.
    assert first.days == await loaded.os.bucket_digests(*window, "day")
    want = python_slots(ROWS, *window, 60)
    got = sorted((s for day in first.slots for s in first.slots[day]), key=lambda b: b.start)
    assert got == want


async def test_postgres_refuses_a_non_utf8_database() -> None:
    name = unique_name("dg_ascii")
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    try:
        await admin.execute(
            f"CREATE DATABASE \"{name}\" ENCODING 'SQL_ASCII' "
            "LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        )
        view = make_view(pg_store(dsn_for(name)), key="id", time="ts", fields={}, table="t")
        with pytest.raises(StoreQueryError, match="server_encoding is SQL_ASCII"):
            await open_adapter(view)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
