"""The lake checks' orders, their planted export, and running one check over a window.

The PostgreSQL -> DuckDB, -> Trino and -> Spark checks and the Trino -> Spark one share
them: 120 orders spread evenly over two Berlin days, and a copy with known damage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import duckdb

from driftgauge.config.frozen import Config
from driftgauge.engine.reconcile import reconcile
from driftgauge.engine.result import RunResult
from driftgauge.stores import open_adapter
from tests.integration.conftest import PG_DSN, TIMEOUT, dsn_for, unique_name

BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2026, 3, 28, tzinfo=BERLIN)
END = datetime(2026, 3, 30, tzinfo=BERLIN)  # the 29th has 23 hours
Order = tuple[str, str, Decimal, datetime]

PLANTED = {
    "missing": {"o003", "o050"},
    "extra": {"x001"},
    "mismatched": {"o010", "o011", "o070", "o020"},
}
"""The keys `export` damages; a key held twice is a duplicate and, its copies differing in
count, mismatched."""
PLANTED_TOTALS = (2, 1, 4, 1)
"""`export`'s (missing, extra, mismatched, duplicates)."""


def make_orders(start: datetime = START, end: datetime = END) -> list[Order]:
    """Return orders o000..o119 at even steps over [start, end), whole seconds."""
    first = start.astimezone(UTC)
    step = (end.astimezone(UTC) - first) / 120
    return [
        (
            f"o{i:03d}",
            ("paid", "shipped", "open")[i % 3],
            Decimal(f"{i}.50"),
            (first + step * i).replace(microsecond=0),
        )
        for i in range(120)
    ]


def export(orders: list[Order]) -> list[Order]:
    """The copy: o003, o050 missing; x001 extra; 3 amounts changed; o020 twice."""
    by = {o[0]: o for o in orders}
    rows = [o for o in orders if o[0] not in ("o003", "o050")]
    rows = [(k, s, a + 1 if k in ("o010", "o011", "o070") else a, t) for k, s, a, t in rows]
    return [*rows, ("x001", "paid", Decimal("9.99"), by["o004"][3]), by["o020"]]


def write_export(folder: Path, rows: list[Order]) -> None:
    """Write the rows as Parquet files (DuckDB), one `day=YYYY-MM-DD` folder per Berlin day."""
    conn = duckdb.connect(":memory:")
    try:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute(
            "CREATE TABLE orders (order_id VARCHAR, status VARCHAR, "
            "amount DECIMAL(10,2), updated_at TIMESTAMPTZ, day VARCHAR)"
        )
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
            [(*r, r[3].astimezone(BERLIN).date().isoformat()) for r in rows],
        )
        conn.execute(f"COPY orders TO '{folder}' (FORMAT parquet, PARTITION_BY (day))")
    finally:
        conn.close()


@asynccontextmanager
async def orders_database(orders: list[Order]) -> AsyncIterator[str]:
    """Yield the DSN of a fresh PostgreSQL database whose `orders` table holds the orders."""
    name = unique_name("dg_orders")
    admin = await asyncpg.connect(PG_DSN, timeout=TIMEOUT)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        conn = await asyncpg.connect(dsn_for(name), timeout=TIMEOUT)
        try:
            await conn.execute(
                "CREATE TABLE orders (order_id text, status text, "
                "amount numeric(10,2), updated_at timestamptz)"
            )
            await conn.copy_records_to_table("orders", records=orders)
        finally:
            await conn.close()
        yield dsn_for(name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def run_check(
    config: Config, name: str, start: datetime = START, end: datetime = END
) -> RunResult:
    """Reconcile one check of the config over [start, end), a day after it ended."""
    check = config.checks[name]
    source = await open_adapter(check.source)
    try:
        reader = await open_adapter(check.reader)
        try:
            return await reconcile(
                check, source, reader, start, end, now=end + timedelta(days=1), sample_keys=50
            )
        finally:
            await reader.close()
    finally:
        await source.close()


def found(result: RunResult) -> dict[str, set[str | None]]:
    """Return the drilled-down keys by kind (missing, extra, mismatched)."""
    keys: dict[str, set[str | None]] = {}
    for bucket in result.buckets:
        for key in bucket.samples:
            keys.setdefault(key.kind, set()).add(key.key)
    return keys


def totals(result: RunResult) -> tuple[int, int, int, int]:
    """Return the run's (missing, extra, mismatched, duplicates) over all its buckets."""
    m, e, x, d = (
        sum(getattr(b, f) for b in result.buckets)
        for f in ("missing", "extra", "mismatched", "duplicates")
    )
    return m, e, x, d
