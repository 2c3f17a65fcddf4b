"""What only the PostgreSQL adapter does with time sub-ranges, on a real store.

What every kind answers alike about slots and ranges is in tests/conformance/test_slots.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest

from driftgauge.stores.postgres.dialect import POSTGRES as pg_sql
from driftgauge.stores.sql.results import POINTS_PER_SPAN, instants, rows_query
from tests.conformance import kind_postgres
from tests.conformance.items import SPEC
from tests.conformance.kind_postgres import PostgresSource
from tests.integration import dataset as ds
from tests.integration.conftest import TIMEOUT
from tests.integration.dataset import RANGES
from tests.integration.pg_items import items_table

pytestmark = pytest.mark.integration

WINDOW = (ds.START, ds.END)


@pytest.fixture(scope="module")
async def stores() -> AsyncIterator[PostgresSource]:
    """Yield the items in a PG table with a time index."""
    async with items_table() as source:
        yield source


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


async def test_rows_at_many_instants_come_from_the_time_index(stores: PostgresSource) -> None:
    adapter = await stores.open(SPEC)
    try:
        every = [r async for r in adapter.iter_rows(*WINDOW, None)]
        named = sorted({r.event_time for r in every})[::3]
        spans = [(t, t + timedelta(microseconds=1)) for t in named]
        got = [r async for r in adapter.iter_rows(*WINDOW, None, ranges=spans)]
        wide = [(named[0], named[0] + timedelta(microseconds=2 * POINTS_PER_SPAN))]
        ranged = [r async for r in adapter.iter_rows(*WINDOW, None, ranges=wide)]
    finally:
        await adapter.close()
    assert len(named) > 3
    assert sorted(got, key=repr) == sorted(
        (r for r in every if r.event_time in set(named)), key=repr
    )
    assert instants(wide) is None  # a span too long to list its instants takes ranges
    assert {r.event_time for r in ranged} <= {r.event_time for r in every}
    assert ranged
    sql, args = rows_query(
        pg_sql, kind_postgres.view(stores.dsn, SPEC, "items"), *WINDOW, None, spans
    )
    assert args[2] == named
    conn = await asyncpg.connect(stores.dsn, timeout=TIMEOUT, server_settings={"TimeZone": "UTC"})
    try:
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {sql}", *args, timeout=TIMEOUT))
    finally:
        await conn.close()
    assert "= ANY" in plan and "items_ts_idx" in plan
