"""Loaders that fill a real store for a test: a PostgreSQL table, an OpenSearch index."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import asyncpg
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

TIMEOUT = 30
"""Seconds a loader waits on a store before giving up."""


async def pg_table(
    dsn: str, table: str, columns: str, records: Iterable[Sequence[Any]], *, replace: bool = False
) -> None:
    """Create `table` with these column definitions at `dsn` and copy the records into it."""
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        if replace:  # a module fixture run once per parameter fills the same database again
            await conn.execute(f"DROP TABLE IF EXISTS {table}")
        await conn.execute(f"CREATE TABLE {table} ({columns})")
        await conn.copy_records_to_table(table, records=records, timeout=TIMEOUT)
    finally:
        await conn.close()


async def pg_fetch(dsn: str, query: str, *args: Any) -> list[asyncpg.Record]:
    """Return the rows `query` selects at `dsn`."""
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def create_index(
    client: AsyncOpenSearch,
    index: str,
    fields: Mapping[str, str],
    *,
    shards: int | None = None,
    replicas: int | None = None,
) -> None:
    """Create `index` mapping each field to its type, with the shard and replica counts given."""
    # A count left out is left to the cluster's default, as the tests written before this
    # helper did; some of them rely on that (one shard, say, or several).
    settings = {
        name: count
        for name, count in (("number_of_shards", shards), ("number_of_replicas", replicas))
        if count is not None
    }
    body: dict[str, Any] = {
        "mappings": {"properties": {name: {"type": kind} for name, kind in fields.items()}}
    }
    if settings:
        body["settings"] = settings
    await client.indices.create(index=index, body=body)


async def bulk_load(
    client: AsyncOpenSearch,
    index: str,
    docs: Iterable[Mapping[str, Any]],
    *,
    refresh: bool | str = True,
    chunk_size: int = 500,
) -> None:
    """Bulk-load the docs into `index`; a doc's `_id` key, if any, names it instead of a field."""
    actions = (
        {
            "_index": index,
            **({"_id": doc["_id"]} if "_id" in doc else {}),
            "_source": {k: v for k, v in doc.items() if k != "_id"},
        }
        for doc in docs
    )
    await async_bulk(client, actions, refresh=refresh, chunk_size=chunk_size)


async def load_index(
    client: AsyncOpenSearch,
    index: str,
    fields: Mapping[str, str],
    docs: Iterable[Mapping[str, Any]],
    *,
    shards: int | None = None,
    replicas: int | None = None,
    refresh: bool | str = True,
    chunk_size: int = 500,
) -> None:
    """Create `index` with these field types and shard count, then bulk-load the docs."""
    await create_index(client, index, fields, shards=shards, replicas=replicas)
    await bulk_load(client, index, docs, refresh=refresh, chunk_size=chunk_size)
