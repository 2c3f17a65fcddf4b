"""The example's PostgreSQL -> Trino (Hive Parquet table) check on planted drift, its refusals.

The Parquet files are written by the test in `day=...` partition folders and put under an
external Hive table on the local Trino server (deploy/local/trino.sh); the check must
yield exactly the planted missing, extra, mismatched and duplicated keys over a Berlin day
that springs forward (23 hours). The same check then reads the source through Trino's
postgresql catalog: PostgreSQL rows digested by Trino agree with PostgreSQL's own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, timedelta

import pytest

from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import StoreQueryError, StoreTimeout, StoreUnavailable
from driftgauge.stores import open_adapter
from driftgauge.stores.trino.settings import TrinoStore
from tests.conformance.kind_trino import SCHEMA, TRINO_URL, quote, run
from tests.integration import lake_orders as lakes
from tests.integration.conftest import PG_DSN, unique_name
from tests.integration.kind_checks import (
    BERLIN,
    END,
    EXAMPLES,
    ORDERS_COLUMNS,
    START,
    example_text,
    make_orders,
    run_check,
)
from tests.store_fixtures import pg_execute, pg_table

pytestmark = pytest.mark.integration

EXAMPLE = EXAMPLES / "trino.yml"


def _config(orders_dsn: str, table: str) -> str:
    return example_text(
        EXAMPLE,
        orders_dsn,
        ("http://127.0.0.1:58080", TRINO_URL),
        ("table: hive.sales.orders", f"table: {SCHEMA}.{table}"),
    )


@pytest.fixture(scope="module")
async def lake(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """Yield an external Hive table over day-partitioned Parquet files: the planted export."""
    folder = lakes.export_folder(tmp_path_factory, "trino_lake")
    table = unique_name("dg_orders")
    await run(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    await run(
        f"CREATE TABLE {SCHEMA}.{table} (order_id varchar, status varchar, "
        "amount decimal(10,2), updated_at timestamp(6), day varchar) WITH (format = 'PARQUET', "
        f"partitioned_by = ARRAY['day'], external_location = {quote('local://' + str(folder))})"
    )
    # The day=... folders are partitions the metastore learns of only when asked.
    schema = SCHEMA.split(".")[1]
    await run(f"CALL hive.system.sync_partition_metadata({quote(schema)}, {quote(table)}, 'ADD')")
    try:
        yield table
    finally:
        await run(f"DROP TABLE IF EXISTS {SCHEMA}.{table}")


async def test_postgres_to_trino_finds_the_planted_rows(orders_dsn: str, lake: str) -> None:
    text = _config(orders_dsn, lake)
    await lakes.assert_example_finds_the_planted_rows(text, EXAMPLE, "orders_lakehouse")


async def test_postgres_read_through_trino_agrees_with_postgres(orders_dsn: str, lake: str) -> None:
    # The source read by Trino's postgresql catalog (JDBC, the local server's `postgres`
    # database holds no orders: a view of the test database is made there).
    table = unique_name("dg_pg_orders")
    await pg_table(PG_DSN, table, ORDERS_COLUMNS, make_orders(), schema="public")
    try:
        text = _config(orders_dsn, lake).replace(
            f"table: {SCHEMA}.{lake}", f"table: postgresql.public.{table}"
        )
        result = await run_check(load_text(text, source="pg-through-trino.yml"), "orders_lakehouse")
    finally:
        await pg_execute(PG_DSN, f"DROP TABLE IF EXISTS public.{table}")
    assert result.error is None, result.error
    assert {b.status for b in result.buckets} == {"ok"}, [b.status for b in result.buckets]
    assert sum(b.expected for b in result.buckets) == len(make_orders())


async def test_a_missing_column_is_named_before_counting(orders_dsn: str, lake: str) -> None:
    text = _config(orders_dsn, lake)
    await lakes.assert_the_missing_column_is_named(text, "orders_lakehouse", f"{SCHEMA}.{lake}")


SLOW = (
    "SELECT CAST(l.orderkey AS varchar) || '-' || CAST(l.linenumber AS varchar) AS id, "
    "TIMESTAMP '2024-01-01 00:00:00' AS ts FROM tpch.sf1000.lineitem AS l"
)


async def test_a_query_past_the_timeout_is_cancelled_on_the_cluster() -> None:
    store = TrinoStore("slow", TRINO_URL, timeout=2.0)
    adapter = await open_adapter(lakes.id_view(store, query=SLOW))
    began = time.monotonic()
    try:
        with pytest.raises(StoreTimeout, match="no answer within the timeout"):
            await adapter.bucket_digests(*lakes.QUIET_DAY, "day")
    finally:
        await adapter.close()
    assert time.monotonic() - began < 10

    async def still_running() -> list[object]:
        rows = await run(
            "SELECT query_id FROM system.runtime.queries WHERE state NOT IN "
            "('FINISHED', 'FAILED') AND query LIKE '%tpch.sf1000.lineitem%' "
            "AND query NOT LIKE '%system.runtime.queries%'"
        )
        return [r["query_id"] for r in rows]

    # The cancel reached the coordinator: no query of ours is left running on it.
    for _ in range(20):
        if not await still_running():
            break
        await asyncio.sleep(0.5)
    assert await still_running() == []


async def test_an_unreachable_server_is_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match=r"trino: connect to http://127\.0\.0\.1:1"):
        await open_adapter(lakes.id_view(TrinoStore("trino", "http://127.0.0.1:1"), table="t"))


async def test_a_refused_table_names_the_store() -> None:
    # The memory catalog has no such schema: a query error, not unavailable nor a pass.
    adapter = await open_adapter(
        lakes.id_view(TrinoStore("trino", TRINO_URL), table="memory.no_schema.t")
    )
    try:
        with pytest.raises(StoreQueryError, match=r"trino: bucket digests on memory\.no_schema"):
            await adapter.bucket_digests(START, END, "day")
    finally:
        await adapter.close()


def test_berlin_fixture_is_the_spring_forward_day() -> None:
    assert timedelta(hours=47) == END.astimezone(UTC) - START.astimezone(UTC)
    assert START.tzinfo is BERLIN
