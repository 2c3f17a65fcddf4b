"""Pick a real key from the previous day's source, so a key-format change fails the canary."""

from __future__ import annotations

from datetime import datetime

from driftgauge.canary.probe import KeyPicker
from driftgauge.stores.base import KeyQuery, StoreAdapter


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


def query_key_picker(adapter: KeyQuery, query: str) -> KeyPicker:
    """Return a picker running the operator's `query` ($1, $2 = the day's bounds) on the source."""

    async def pick(start: datetime, end: datetime) -> str | None:
        return await adapter.query_key(query, start, end)

    return pick
