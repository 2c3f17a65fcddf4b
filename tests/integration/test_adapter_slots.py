"""What only the PostgreSQL adapter does with time sub-ranges, on a real store.

What every kind answers alike about slots and ranges is in tests/conformance/test_slots.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from driftgauge.stores.postgres.dialect import POSTGRES as pg_sql
from tests.conformance import kind_postgres
from tests.conformance.items import ITEMS, SPEC
from tests.conformance.kind_postgres import PostgresSource
from tests.integration import dataset as ds
from tests.integration.conftest import TIMEOUT
from tests.integration.dataset import RANGES

pytestmark = pytest.mark.integration

WINDOW = (ds.START, ds.END)


@pytest.fixture(scope="module")
async def stores() -> AsyncIterator[PostgresSource]:
    """Yield the items in a PG table with a time index."""
    source = await kind_postgres.PostgresFixtures().load(ITEMS)
    try:
        yield source
    finally:
        await source.drop()


async def test_ranged_rows_use_the_time_index(stores: PostgresSource) -> None:
    sql = pg_sql.rows_sql(
        kind_postgres.view(stores.dsn, SPEC, "items"), within=False, ranges=len(RANGES)
    )
    conn = await asyncpg.connect(stores.dsn, timeout=TIMEOUT, server_settings={"TimeZone": "UTC"})
    try:
        plan = "\n".join(
            r[0]
            for r in await conn.fetch(
                f"EXPLAIN {sql}",
                *WINDOW,
                [lo for lo, _ in RANGES],
                [hi for _, hi in RANGES],
                timeout=TIMEOUT,
            )
        )
    finally:
        await conn.close()
    assert "Seq Scan" not in plan
    assert plan.count("items_ts_idx") >= len(RANGES)
