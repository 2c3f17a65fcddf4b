"""The example's PostgreSQL -> Spark (Parquet table) check on planted drift, and its refusals.

The Parquet files are written by the test and put under a Spark table on the local Spark
Connect server (deploy/local/spark.sh); the check must yield exactly the planted missing,
extra, mismatched and duplicated keys over a Berlin day that springs forward (23 hours).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, timedelta

import pytest

from driftgauge.core.errors import StoreTimeout, StoreUnavailable
from driftgauge.stores import open_adapter
from driftgauge.stores.spark.settings import SparkStore
from tests.conformance.kind_spark import SPARK_URL, quote, run
from tests.integration import lake_orders as lakes
from tests.integration.conftest import unique_name
from tests.integration.kind_checks import BERLIN, END, EXAMPLES, START, example_text
from tests.integration.runs import opened

pytestmark = pytest.mark.integration

EXAMPLE = EXAMPLES / "spark.yml"


def _config(orders_dsn: str, table: str) -> str:
    return example_text(
        EXAMPLE,
        orders_dsn,
        ("sc://127.0.0.1:55002", SPARK_URL),
        ("table: default.orders", f"table: default.{table}"),
    )


@pytest.fixture(scope="module")
async def lake(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """Yield a Spark table over hive-partitioned Parquet files holding the planted export."""
    folder = lakes.export_folder(tmp_path_factory, "spark_lake")
    table = unique_name("dg_orders")
    await run(f"CREATE TABLE {table} USING parquet LOCATION {quote(folder)}")
    # The day=... folders are partitions the catalog learns of only when asked.
    await run(f"MSCK REPAIR TABLE {table}")
    try:
        yield table
    finally:
        await run(f"DROP TABLE IF EXISTS {table}")


async def test_postgres_to_spark_finds_the_planted_rows(orders_dsn: str, lake: str) -> None:
    await lakes.assert_example_finds_the_planted_rows(
        _config(orders_dsn, lake), EXAMPLE, "orders_lake"
    )


async def test_a_missing_column_is_named_before_counting(orders_dsn: str, lake: str) -> None:
    text = _config(orders_dsn, lake)
    await lakes.assert_the_missing_column_is_named(text, "orders_lake", f"default.{lake}")


async def test_a_query_past_the_timeout_interrupts_its_spark_job() -> None:
    slow = (
        "SELECT CAST(id AS STRING) AS id, timestamp_micros(1704067200000000 + id % 1000) AS ts "
        "FROM range(50000000000)"
    )
    store = SparkStore("slow", SPARK_URL, None, 1.0)
    adapter = await open_adapter(lakes.id_view(store, query=slow))
    began = time.monotonic()
    try:
        with pytest.raises(StoreTimeout, match="no answer within the timeout"):
            await adapter.bucket_digests(*lakes.QUIET_DAY, "day")
        elapsed = time.monotonic() - began
        # The session still answers at once: the job was interrupted, not left running.
        fast = lakes.id_view(store, query="SELECT 'a' AS id, TIMESTAMP '2024-01-01 00:00:00' AS ts")
        async with opened(fast) as quick:
            (bucket,) = await quick.bucket_digests(*lakes.QUIET_DAY, "day")
    finally:
        await adapter.close()
    assert elapsed < 8
    assert bucket.agg.count == 1


async def test_an_unreachable_server_is_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match=r"spark: connect to sc://127\.0\.0\.1:1"):
        await open_adapter(lakes.id_view(SparkStore("spark", "sc://127.0.0.1:1"), table="t"))


def test_berlin_fixture_is_the_spring_forward_day() -> None:
    assert timedelta(hours=47) == END.astimezone(UTC) - START.astimezone(UTC)
    assert START.tzinfo is BERLIN
