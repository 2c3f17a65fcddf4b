"""Both sides of one check, opened for a command and closed when it is done."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from driftgauge.config.frozen import Check
from driftgauge.jobs.adapters import Adapters
from driftgauge.stores import open_adapter


@asynccontextmanager
async def opened_sides(check: Check) -> AsyncIterator[Adapters]:
    """Yield the check's source and reader adapters; close both after, the reader first."""
    source = await open_adapter(check.source)
    try:
        reader = await open_adapter(check.reader)
        try:
            yield Adapters(source, reader)
        finally:
            await reader.close()
    finally:
        await source.close()
