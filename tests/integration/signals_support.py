"""Helpers for the ledger, canary, vocabulary and volume tests on the real stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from fastapi import FastAPI
from prometheus_client.registry import CollectorRegistry

from driftgauge.api.auth import TokenCheck
from driftgauge.ledger.router import ledger_router
from driftgauge.ledger.service import LedgerService
from driftgauge.metrics.collector import CollectorPart, build_registry
from driftgauge.state import migrate
from tests.integration.conftest import TIMEOUT, unique_name

TOKEN = "ledger-test-token"


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
