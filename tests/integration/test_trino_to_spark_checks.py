"""The example's Trino -> Spark check: planted drift found exactly over a Berlin fall-back day.

The source is a Hive Parquet table written by Trino itself (its `hive` catalog, on the local
server of deploy/local/trino.sh); the derived store is a Spark table of day-partitioned
Parquet files written by Spark itself (deploy/local/spark.sh). Over 2026-10-25 in
Europe/Berlin (25 hours: 02:00-03:00 happens twice) the check must count the planted
missing, extra, mismatched and duplicated rows per day and drill down to their keys and
hours; an undamaged copy must be all ok.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from driftgauge.configfile.loader import load_text
from driftgauge.engine.result import RunResult
from driftgauge.stores.preflight import verify_all
from tests.conformance import kind_spark, kind_trino
from tests.integration.conftest import PG_DSN, unique_name
from tests.integration.lake_orders import (
    BERLIN,
    PLANTED,
    Order,
    export,
    found,
    make_orders,
    run_check,
    totals,
)

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "deploy" / "examples" / "trino_to_spark.yml"
START = datetime(2026, 10, 24, tzinfo=BERLIN)
END = datetime(2026, 10, 26, tzinfo=BERLIN)  # the 25th has 25 hours
ORDERS = make_orders(START, END)  # every 24.5 minutes


def _damaged(orders: list[Order]) -> list[Order]:
    """The shared planted copy, and three more changes in the long day.

    o064 (02:08 CEST, the first 02:xx hour) has another status, o067 (02:21 CET, the
    second) is missing, o119 (23:35 CET, past the day's start + 24 hours) has another
    amount.
    """
    rows = []
    for key, status, amount, at in export(orders):
        if key == "o067":
            continue
        if key == "o064":
            status = "void"
        if key == "o119":
            amount += Decimal("0.01")
        rows.append((key, status, amount, at))
    return rows


def _timestamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


@pytest.fixture(scope="module")
async def warehouse() -> AsyncIterator[str]:
    """Yield a Hive schema whose managed table `orders` Trino wrote (files and all)."""
    schema = unique_name("e2e_ts_warehouse")
    q = kind_trino.quote
    # The file metastore keeps a managed table's files under its own directory: dropping
    # the table removes them.
    await kind_trino.run(f"CREATE SCHEMA hive.{schema}")
    try:
        await kind_trino.run(
            f"CREATE TABLE hive.{schema}.orders (order_id varchar, status varchar, "
            "amount decimal(10,2), updated_at timestamp(6)) WITH (format = 'PARQUET')"
        )
        # A Hive timestamp has no zone: the UTC wall clock, as the trino kind reads it.
        values = ", ".join(
            f"({q(k)}, {q(s)}, DECIMAL {q(a)}, TIMESTAMP {q(_timestamp(t))})"
            for k, s, a, t in ORDERS
        )
        await kind_trino.run(f"INSERT INTO hive.{schema}.orders VALUES {values}")
        yield schema
    finally:
        await kind_trino.run(f"DROP TABLE IF EXISTS hive.{schema}.orders")
        await kind_trino.run(f"DROP SCHEMA IF EXISTS hive.{schema}")


async def _spark_table(folder: Path, rows: list[Order]) -> str:
    """Create a Spark table over `folder` partitioned by Berlin day, and have Spark write rows."""
    table = unique_name("e2e_ts_copy")
    q = kind_spark.quote
    await kind_spark.run(
        f"CREATE TABLE {table} (order_id STRING, status STRING, amount DECIMAL(10,2), "
        f"updated_at TIMESTAMP, day STRING) USING parquet PARTITIONED BY (day) "
        f"LOCATION {q(folder)}"
    )
    # The session's time zone is UTC (io.store_pool), so a zone-less literal is UTC.
    values = ", ".join(
        f"({q(k)}, {q(s)}, {a}BD, TIMESTAMP {q(_timestamp(t))}, "
        f"{q(t.astimezone(BERLIN).date().isoformat())})"
        for k, s, a, t in rows
    )
    await kind_spark.run(f"INSERT INTO {table} VALUES {values}")
    return table


@pytest.fixture(scope="module")
async def lake(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, str]]:
    """Yield the Spark tables `drift` (the damaged copy) and `clean` (an exact one)."""
    tables: dict[str, str] = {}
    try:
        for name, rows in (("drift", _damaged(ORDERS)), ("clean", ORDERS)):
            folder = tmp_path_factory.mktemp(f"e2e_ts_{name}") / "orders"
            tables[name] = await _spark_table(folder, rows)
            assert sorted(p.name for p in folder.glob("day=*")) == [
                "day=2026-10-24",
                "day=2026-10-25",
            ]
        yield tables
    finally:
        for table in tables.values():
            await kind_spark.run(f"DROP TABLE IF EXISTS {table}")


def _config(schema: str, copy: str) -> str:
    text = EXAMPLE.read_text(encoding="utf-8")
    text = text.replace("http://127.0.0.1:58080", kind_trino.TRINO_URL)
    text = text.replace("sc://127.0.0.1:55002", kind_spark.SPARK_URL)
    text = text.replace("table: hive.sales.orders", f"table: hive.{schema}.orders")
    text = text.replace("table: default.orders_copy", f"table: default.{copy}")
    return text.replace("env:DRIFTGAUGE_STATE_DSN", PG_DSN)


async def _check(schema: str, copy: str) -> RunResult:
    config = load_text(_config(schema, copy), source=str(EXAMPLE))
    assert await verify_all(config) == []
    result = await run_check(config, "orders_copy", START, END)
    assert result.error is None, result.error
    # Berlin midnights: 22:00 UTC in summer time on both days.
    assert [b.start for b in result.buckets] == [
        datetime(2026, 10, 23, 22, tzinfo=UTC),
        datetime(2026, 10, 24, 22, tzinfo=UTC),
    ]
    # 59 orders on the 24th, 61 in the 25 hours of the 25th (o118, o119 after its 24th hour).
    assert [b.expected for b in result.buckets] == [59, 61]
    return result


async def test_trino_to_spark_finds_the_planted_rows(warehouse: str, lake: dict[str, str]) -> None:
    result = await _check(warehouse, lake["drift"])
    per_day = [(b.missing, b.extra, b.mismatched, b.duplicates) for b in result.buckets]
    assert per_day == [(2, 1, 3, 1), (1, 0, 3, 0)]
    assert totals(result) == (3, 1, 6, 1)
    assert found(result) == {
        "missing": PLANTED["missing"] | {"o067"},
        "extra": PLANTED["extra"],
        "mismatched": PLANTED["mismatched"] | {"o064", "o119"},
    }
    assert {b.status for b in result.buckets} == {"drift"}
    # The long day's hours, each labelled with its own offset: both 02:00s are told apart.
    long_day = result.buckets[1]
    hours = [n.label for n in long_day.tree if n.level == "hour"]
    assert len(hours) == 25 and len(set(hours)) == 25
    assert [n.label for n in long_day.tree if n.level == "hour" and n.differs] == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
        "2026-10-25T23:00:00+01:00",
    ]


async def test_an_exact_copy_is_ok(warehouse: str, lake: dict[str, str]) -> None:
    result = await _check(warehouse, lake["clean"])
    assert {b.status for b in result.buckets} == {"ok"}, [b.reasons for b in result.buckets]
    assert totals(result) == (0, 0, 0, 0)
    assert found(result) == {}
    assert [b.visible for b in result.buckets] == [59, 61]


def test_the_window_holds_the_fall_back_day() -> None:
    assert END.astimezone(UTC) - START.astimezone(UTC) == timedelta(hours=49)
    assert ORDERS[119][3] == datetime(2026, 10, 25, 22, 35, 30, tzinfo=UTC)
