"""The example's PostgreSQL -> DuckDB (Parquet) check on planted drift, and DuckDB's refusals.

The Parquet files are written by the test, one hive partition per local day, and must
yield exactly the planted missing, extra, mismatched and duplicated keys over a Berlin
day that springs forward (23 hours). Config errors name their field before counting, and
a query past the timeout is interrupted without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from driftgauge.config.frozen import View
from driftgauge.configfile.loader import load_text
from driftgauge.core.errors import StoreTimeout
from driftgauge.stores import open_adapter
from driftgauge.stores.base import SlotFirstPass
from driftgauge.stores.duckdb.settings import DuckDBStore, FileTable
from driftgauge.stores.preflight import verify_all
from tests.integration import lake_orders as lakes
from tests.integration.conftest import make_view
from tests.integration.kind_checks import (
    BERLIN,
    END,
    EXAMPLES,
    START,
    example_text,
    export,
    make_orders,
)
from tests.integration.runs import opened

pytestmark = pytest.mark.integration

EXAMPLE = EXAMPLES / "duckdb.yml"


def _config(orders_dsn: str, lake: Path) -> str:
    return example_text(EXAMPLE, orders_dsn, ("exports/orders/*/*.parquet", f"{lake}/*/*.parquet"))


def _lake_store(lake: Path) -> DuckDBStore:
    """Return a DuckDB store whose table `orders` is the lake's hive-partitioned Parquet files."""
    return DuckDBStore("lake", files=(FileTable("orders", "parquet", f"{lake}/*/*.parquet", True),))


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a folder of hive-partitioned Parquet files holding the planted export."""
    folder = lakes.export_folder(tmp_path_factory, "lake")
    assert len(list(folder.glob("day=*/*.parquet"))) == 2  # one partition per local day
    return folder


async def test_postgres_to_parquet_finds_the_planted_rows(orders_dsn: str, lake: Path) -> None:
    await lakes.assert_example_finds_the_planted_rows(
        _config(orders_dsn, lake), EXAMPLE, "orders_export"
    )


async def test_config_errors_name_their_field_before_counting(
    orders_dsn: str, lake: Path, tmp_path: Path
) -> None:
    text = _config(orders_dsn, lake)
    no_files = load_text(
        text.replace(f"{lake}/*/*.parquet", f"{tmp_path}/none/*.parquet"), source="no-files.yml"
    )
    assert await verify_all(no_files) == [
        f"stores.lake.files.orders.parquet: no file matches '{tmp_path}/none/*.parquet'"
    ]
    no_db = load_text(
        text.replace("# database: warehouse.duckdb", f"database: {tmp_path}/missing.duckdb"),
        source="no-db.yml",
    )
    assert await verify_all(no_db) == [
        f"stores.lake.database: no such file {tmp_path}/missing.duckdb"
    ]
    problems = await lakes.missing_column_problems(text)
    # Both sides lack it; the reader's names the field, the files' table and its columns.
    assert len(problems) == 2
    assert problems[1] == (
        "checks.orders_export.reader.fields.total: column total does not exist in table "
        "orders (it has order_id, status, amount, updated_at, day)"
    )


async def test_a_query_past_the_timeout_is_interrupted_off_the_event_loop() -> None:
    # Five billion generated rows: far longer than the half-second timeout.
    slow = (
        "SELECT CAST(i AS VARCHAR) AS id, TIMESTAMPTZ '2024-01-01 00:00:00+00' + "
        "to_microseconds(i % 1000) AS ts FROM range(5000000000) AS r(i)"
    )
    store = replace(DuckDBStore("slow"), timeout=0.5)
    adapter = await open_adapter(
        make_view(
            store,  # type: ignore[arg-type]
            key="id",
            time="ts",
            fields={},
            query=slow,
        )
    )
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.create_task(tick())
    began = time.monotonic()
    try:
        with pytest.raises(StoreTimeout, match="no answer within the timeout"):
            await adapter.bucket_digests(*lakes.QUIET_DAY, "day")
        elapsed = time.monotonic() - began
    finally:
        ticker.cancel()
        await adapter.close()
    assert elapsed < 3
    assert ticks >= 5  # the loop kept running while the engine worked


async def test_a_database_file_and_csv_files_read_as_the_parquet_export(
    lake: Path, tmp_path: Path
) -> None:
    rows = export(make_orders())
    db, csv = tmp_path / "warehouse.duckdb", tmp_path / "orders.csv"
    conn = duckdb.connect(str(db))
    try:
        conn.execute("CREATE SCHEMA sales")
        conn.execute(
            f"CREATE TABLE sales.orders AS SELECT * FROM read_parquet('{lake}/*/*.parquet')"
        )
        conn.execute(f"COPY sales.orders TO '{csv}' (HEADER)")
    finally:
        conn.close()
    fields = {"status": ("status", "string"), "amount": ("amount", "decimal")}

    def orders(store: DuckDBStore, **where: str) -> View:
        """Return the view of the orders in `store` (its table or query), in Berlin days."""
        return make_view(
            store,  # type: ignore[arg-type]
            key="order_id",
            time="updated_at",
            fields=fields,
            tz=BERLIN.key,
            **where,
        )

    views = {
        "parquet": orders(_lake_store(lake), table="orders"),
        "database": orders(DuckDBStore("wh", str(db)), table="sales.orders"),
        # A CSV's amount is sniffed as DOUBLE: the query casts it, as docs/duckdb.md says.
        "csv": orders(
            DuckDBStore("csv", files=(FileTable("raw", "csv", str(csv)),)),
            query="SELECT order_id, status, updated_at, CAST(amount AS "
            f"DECIMAL(10,2)) AS amount FROM read_csv('{csv}')",
        ),
    }
    got = {}
    for name, view in views.items():
        async with opened(view) as adapter:
            got[name] = await adapter.bucket_digests(START, END, "day")
    assert sum(b.agg.count for b in got["parquet"]) == len(rows)
    assert got["database"] == got["parquet"]
    assert got["csv"] == got["parquet"]


def test_the_zero_setup_try_finds_its_planted_rows() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE.parent / "try" / "run.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    for line in (
        "missing    o00042",
        "missing    o02718",
        "extra      x00001",
        "mismatched o01500",
    ):
        assert line in out.stdout
    assert (
        "total           3000         0     2999        2      1           1  drift" in out.stdout
    )


async def test_the_pipeline_can_write_the_database_file_between_queries(tmp_path: Path) -> None:
    db = tmp_path / "warehouse.duckdb"
    conn = duckdb.connect(str(db))
    conn.execute("CREATE TABLE t AS SELECT 'a' AS k, TIMESTAMPTZ '2026-01-01 12:00:00+00' AS ts")
    conn.close()
    day = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))
    adapter = await open_adapter(
        make_view(
            DuckDBStore("wh", str(db)),  # type: ignore[arg-type]
            key="k",
            time="ts",
            fields={},
            table="t",
        )
    )
    try:
        (before,) = await adapter.bucket_digests(*day, "day")
        # Another process (the pipeline) writes the file while the store is open: DuckDB
        # refuses it while any other process holds the file open.
        writer = (
            "import duckdb; c = duckdb.connect(" + repr(str(db)) + '); c.execute("INSERT'
            " INTO t VALUES ('b', TIMESTAMPTZ '2026-01-01 13:00:00+00')\"); c.close()"
        )
        out = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", writer],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        (after,) = await adapter.bucket_digests(*day, "day")
    finally:
        await adapter.close()
    assert (before.agg.count, after.agg.count) == (1, 2)


async def test_measure_totals_are_exact_decimals(lake: Path) -> None:
    rows = export(make_orders())
    view = make_view(
        _lake_store(lake),  # type: ignore[arg-type]
        key="order_id",
        time="updated_at",
        fields={"amount": ("amount", "decimal")},
        tz=BERLIN.key,
        table="orders",
        measures=("amount",),
    )
    async with opened(view) as adapter:
        got = {b.start: b.agg.measures for b in await adapter.bucket_digests(START, END, "day")}
        assert isinstance(adapter, SlotFirstPass)
        first = await adapter.day_and_slot_digests(START.astimezone(UTC), END, 600)
    want: dict[datetime, dict[str, Decimal]] = {}
    for _, _, amount, at in rows:
        day = datetime.combine(
            at.astimezone(BERLIN).date(), datetime.min.time(), BERLIN
        ).astimezone(UTC)
        day_totals = want.setdefault(day, {"amount": Decimal(0)})
        day_totals["amount"] += amount
    assert got == want
    assert {b.start: b.agg.measures for b in first.days} == want  # the one-scan first pass
    assert sum(s.agg.count for day in first.slots for s in first.slots[day]) == len(rows)
