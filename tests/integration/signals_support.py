"""Helpers for the ledger, canary, vocabulary and volume tests on the real stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import asyncpg
from fastapi import FastAPI
from opensearchpy import AsyncOpenSearch
from prometheus_client.registry import CollectorRegistry

from driftgauge.api.auth import TokenCheck
from driftgauge.ledger.router import ledger_router
from driftgauge.ledger.service import LedgerService
from driftgauge.metrics.collector import CollectorPart, build_registry
from driftgauge.state import migrate
from tests.integration.conftest import OS_URL, TIMEOUT, unique_name

TOKEN = "ledger-test-token"
SYNC_STORE = {"kind": "opensearch", "url": OS_URL, "timeout_seconds": 10}
"""The sync job's own client of the reader's cluster, which the canary writes through."""
NOT_CANARY = {"bool": {"must_not": [{"exists": {"field": "driftgauge_canary"}}]}}
"""A reader filter that hides the canary's sentinel documents."""
TIERS_NOT_CANARY = {
    "bool": {
        "filter": [{"terms": {"review_tier": ["first_tier", "second_tier"]}}],
        "must_not": [{"exists": {"field": "driftgauge_canary"}}],
    }
}
"""A reader filter that shows the first two review tiers and hides canary sentinels."""


@asynccontextmanager
async def migrated_schema(dsn: str) -> AsyncIterator[str]:
    """Yield the name of a fresh state schema with every migration applied; drop it after."""
    schema = unique_name("dg_state")
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        await migrate.apply(conn, schema)
        yield schema
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', timeout=TIMEOUT)
        await conn.close()


@asynccontextmanager
async def state_pool(dsn: str) -> AsyncIterator[Any]:
    """Yield a pool on a fresh, migrated state schema."""
    async with migrated_schema(dsn) as schema:
        pool = await asyncpg.create_pool(
            dsn,
            min_size=1,
            max_size=3,
            timeout=TIMEOUT,
            command_timeout=TIMEOUT,
            server_settings={"search_path": f'"{schema}"'},
        )
        try:
            yield pool
        finally:
            await pool.close()


def ledger_app(service: LedgerService) -> FastAPI:
    """Return an app serving only the ledger routes, with bearer auth on writes."""
    tokens = TokenCheck([TOKEN.encode()], public_read=True)
    app = FastAPI()
    app.include_router(ledger_router(tokens.require, tokens.require_read), prefix="/api/v1")
    app.state.ledger = service
    return app


def registry_of(*parts: CollectorPart) -> CollectorRegistry:
    """Return a private registry holding the given collector parts."""
    return build_registry(list(parts))


def reviews_raw(
    dsn: str,
    index: str,
    *,
    table: str = "tasks",
    db: str = "tasks_db",
    timeout: float = TIMEOUT,
    reader: dict[str, Any] | None = None,
    stores: dict[str, Any] | None = None,
    state: dict[str, Any] | None = None,
    **check: Any,
) -> dict[str, Any]:
    """Return the raw config of a `reviews` check: PostgreSQL `table` synced to `index`."""
    return {
        "stores": {
            db: {"kind": "postgres", "dsn": dsn, "timeout_seconds": timeout},
            "search": {"kind": "opensearch", "url": OS_URL, "timeout_seconds": timeout},
            **(stores or {}),
        },
        "state": state or {"dsn": dsn},
        "checks": {
            "reviews": {
                "source": {"store": db, "table": table, "key": "task_id", "time": "completed_at"},
                "reader": {
                    "store": "search",
                    "index": index,
                    "key": "task_id",
                    "time": "completed_at",
                    **(reader or {}),
                },
                "fields": {"label": "string"},
                **check,
            }
        },
    }


async def insert_tasks(dsn: str, label: str, rows: Iterable[tuple[str, datetime]]) -> None:
    """Create the `tasks` table if it is missing and add (task_id, completed_at) rows."""
    conn = await asyncpg.connect(dsn, timeout=TIMEOUT)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS tasks (task_id text, label text, completed_at timestamptz)"
        )
        await conn.executemany(
            "INSERT INTO tasks VALUES ($1, $2, $3)", [(k, label, t) for k, t in rows]
        )
    finally:
        await conn.close()


async def create_canary_index(client: AsyncOpenSearch, index: str, label: str) -> None:
    """Create a one-shard reader index of tasks: keywords for the key, `label` and the sentinel."""
    properties: dict[str, Any] = {
        name: {"type": "keyword"} for name in ("task_id", label, "driftgauge_canary")
    }
    properties["completed_at"] = {"type": "date"}
    settings = {"number_of_shards": 1, "number_of_replicas": 0}
    await client.indices.create(
        index=index, body={"settings": settings, "mappings": {"properties": properties}}
    )
