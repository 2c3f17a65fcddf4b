"""Open a check's two adapters on the real stores and reconcile a window through them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

from driftgauge.config.frozen import Check, View
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import RunResult
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.preflight import preflight


@asynccontextmanager
async def opened(view: View) -> AsyncIterator[StoreAdapter]:
    """Yield an open adapter for the view; close it after."""
    adapter = await open_adapter(view)
    try:
        yield adapter
    finally:
        await adapter.close()


@asynccontextmanager
async def adapters(check: Check) -> AsyncIterator[tuple[StoreAdapter, StoreAdapter]]:
    """Yield the check's open source and reader adapters; close both after."""
    async with opened(check.source) as source, opened(check.reader) as reader:
        yield source, reader


async def reconcile_window(
    check: Check,
    start: datetime,
    end: datetime,
    *,
    checked: bool = False,
    now: datetime | None = None,
    **options: Any,
) -> RunResult:
    """Reconcile the check over [start, end), by default a day after it ended.

    `checked` runs the preflight first, as the runner does; `options` go to reconcile.
    """
    async with adapters(check) as (source, reader):
        if checked:
            await preflight(check, source, reader)
        when = end + timedelta(days=1) if now is None else now
        return await reconcile(check, source, reader, start, end, now=when, **options)
