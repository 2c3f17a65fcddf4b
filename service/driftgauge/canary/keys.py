"""Pick a real key from the previous day's source, so a key-format change fails the canary."""

from __future__ import annotations

import asyncio
from datetime import datetime

from driftgauge.canary.probe import KeyPicker
from driftgauge.config.runtime import PostgresStore
from driftgauge.core.errors import StoreError
from driftgauge.stores.base import StoreAdapter


def adapter_key_picker(adapter: StoreAdapter) -> KeyPicker:
    """Return a picker taking the first expected source row of the day (a streamed export)."""
    async def pick(start: datetime, end: datetime) -> str | None:
        rows = adapter.iter_rows(start, end, None)
        try:
            async for row in rows:
                return row.key
            return None
        finally:
            # Stop the export after the first row: close the cursor or point-in-time now.
            close = getattr(rows, "aclose", None)
            if close is not None:
                await close()
    return pick


def sql_key_picker(store: PostgresStore, query: str) -> KeyPicker:
    """Return a picker running `query` ($1, $2 = the day's start and end) on a postgres source."""
    async def pick(start: datetime, end: datetime) -> str | None:
        import asyncpg

        from driftgauge.stores.postgres.adapter import translate_error

        try:
            async with asyncio.timeout(store.timeout):
                conn = await asyncpg.connect(store.dsn.reveal(), timeout=store.timeout,
                                             server_settings={"TimeZone": "UTC",
                                                              "application_name":
                                                              "driftgauge-canary"})
                try:
                    value = await conn.fetchval(query, start, end, timeout=store.timeout)
                finally:
                    await conn.close(timeout=store.timeout)
        except StoreError:
            raise
        except Exception as exc:
            raise translate_error(store.name, "pick a canary key", exc) from exc
        return None if value is None else str(value)
    return pick
