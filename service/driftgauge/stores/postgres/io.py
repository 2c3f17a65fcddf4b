"""A PostgreSQL data store's pool: opened on its DSN, its encoding checked (UTF8)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import asyncpg

from driftgauge.core.errors import StoreQueryError
from driftgauge.pg.calls import pooled
from driftgauge.pg.errors import DRIVER_ERRORS, store_error, store_errors, translate_error
from driftgauge.stores.postgres.settings import PostgresStore

# The kind's error map: registry.StoreKind.error_map looks it up in the kind's io module.
__all__ = ["store_pool", "translate_error"]


async def store_pool(store: PostgresStore) -> Any:
    """Open the pool of a data store after checking its encoding; failures are StoreErrors."""
    try:
        pool = await asyncio.wait_for(
            asyncpg.create_pool(
                store.dsn.reveal(),
                min_size=1,
                max_size=store.pool_max,
                timeout=store.timeout,
                command_timeout=store.timeout,
                server_settings={
                    # UTC sessions make a timestamp without time zone read as UTC everywhere.
                    "TimeZone": "UTC",
                    "application_name": "driftgauge",
                    # The server's own deadline: a replica killed mid-query leaves nobody
                    # to cancel it, and the source would carry the scan on alone.
                    "statement_timeout": f"{math.ceil(store.timeout * 1000)}ms",
                },
            ),
            timeout=store.timeout,
        )
    except ValueError as exc:  # a DSN the driver cannot parse
        raise StoreQueryError(store.name, f"connect: ValueError: {exc}") from exc
    except DRIVER_ERRORS as exc:
        raise store_error(store.name, "connect", exc) from exc
    try:
        with store_errors(store.name, "check the encoding"):
            async with pooled(pool, store.timeout) as conn:
                encoding = await conn.fetchval("SHOW server_encoding", timeout=store.timeout)
    except BaseException:
        await pool.close()
        raise
    if encoding != "UTF8":
        await pool.close()
        # md5(text) hashes the database encoding's bytes, not UTF-8.
        raise StoreQueryError(
            store.name,
            (
                f"server_encoding is {encoding}; driftgauge needs a UTF8 database "
                "so that md5() sees UTF-8 bytes"
            ),
        )
    return pool
