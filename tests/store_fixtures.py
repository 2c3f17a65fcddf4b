"""Loaders that fill a real store for a test: a PostgreSQL table, an OpenSearch index."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk
from tools.local_stores import address

PG_DSN = address("DRIFTGAUGE_TEST_PG_DSN")
OS_URL = address("DRIFTGAUGE_TEST_OS_URL")
TIMEOUT = 30.0
"""Seconds a loader waits on a store before giving up."""

PG_OS_STORES = """stores:
  pg: {{kind: postgres, dsn: "{dsn}"}}
  os: {{kind: opensearch, url: "{os}"}}
state: {{dsn: "{dsn}"}}
checks:
"""
"""The head of a config whose checks read PostgreSQL (store pg) and OpenSearch (store os).

Add the checks, then format with `dsn` and `os` (and whatever the checks name)."""


def tasks_and_search(dsn: str) -> dict[str, Any]:
    """Return a raw config's stores, tasks_db (PostgreSQL at `dsn`) and search, and its state."""
    return {
        "stores": {
            "tasks_db": {"kind": "postgres", "dsn": dsn, "timeout_seconds": TIMEOUT},
            "search": {"kind": "opensearch", "url": OS_URL, "timeout_seconds": TIMEOUT},
        },
        "state": {"dsn": dsn},
    }


def task_sides(table: str, index: str, **reader: Any) -> dict[str, Any]:
    """Return a raw check's source (`table` of tasks_db) and reader (`index` of search).

    Both sides key tasks by task_id and time them by completed_at; `reader` adds to the
    reader's side (its fields, its filter)."""
    keyed = {"key": "task_id", "time": "completed_at"}
    return {
        "source": {"store": "tasks_db", "table": table, **keyed},
        "reader": {"store": "search", "index": index, **keyed, **reader},
    }


@dataclass(frozen=True)
class Scratch:
    """A fresh PostgreSQL database and an OpenSearch index name of the same name."""

    dsn: str
    index: str
    client: AsyncOpenSearch


@asynccontextmanager
async def scratch_stores(prefix: str, *, utf8: bool = False) -> AsyncIterator[Scratch]:
    """Yield a fresh database, an index name and an OpenSearch client; drop both after."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    # Some tests store text the server's default template might not encode.
    encoding = " ENCODING 'UTF8' TEMPLATE template0" if utf8 else ""
    await admin.execute(f'CREATE DATABASE "{name}"{encoding}')
    client = AsyncOpenSearch(OS_URL)
    try:
        yield Scratch(PG_DSN.rsplit("/", 1)[0] + "/" + name, name, client)
    finally:
        await client.indices.delete(index=name, ignore_unavailable=True)
        await client.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def pg_table(
    dsn: str,
    table: str,
    columns: str,
    records: Iterable[Sequence[Any]],
    *,
    replace: bool = False,
    schema: str | None = None,
) -> None:
    """Create `table` with these column definitions at `dsn` and copy the records into it."""
    name = table if schema is None else f"{schema}.{table}"
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        if replace:  # a module fixture run once per parameter fills the same database again
            await conn.execute(f"DROP TABLE IF EXISTS {name}")
        await conn.execute(f"CREATE TABLE {name} ({columns})")
        await conn.copy_records_to_table(
            table, records=records, schema_name=schema, timeout=TIMEOUT
        )
    finally:
        await conn.close()


async def pg_execute(dsn: str, *statements: str) -> None:
    """Run each statement at `dsn`, in order."""
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        for statement in statements:
            await conn.execute(statement)
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
    fields: Mapping[str, str | Mapping[str, Any]],
    *,
    shards: int | None = None,
    replicas: int | None = None,
) -> None:
    """Create `index` mapping each field to its type (or whole mapping), with these counts."""
    # A count left out is left to the cluster's default, as the tests written before this
    # helper did; some of them rely on that (one shard, say, or several).
    settings = {
        name: count
        for name, count in (("number_of_shards", shards), ("number_of_replicas", replicas))
        if count is not None
    }
    body: dict[str, Any] = {
        "mappings": {
            "properties": {
                name: {"type": kind} if isinstance(kind, str) else kind
                for name, kind in fields.items()
            }
        }
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
    fields: Mapping[str, str | Mapping[str, Any]],
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
