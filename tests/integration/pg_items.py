"""The conformance items in a real PostgreSQL table, for the adapter tests that read it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tests.conformance import kind_postgres
from tests.conformance.items import ITEMS
from tests.conformance.kind_postgres import PostgresSource


@asynccontextmanager
async def items_table() -> AsyncIterator[PostgresSource]:
    """Yield the items in a PG table with a time index; drop it after."""
    source = await kind_postgres.PostgresFixtures().load(ITEMS)
    try:
        yield source
    finally:
        await source.drop()
