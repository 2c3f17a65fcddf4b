"""The lake checks' planted export as Parquet files (a folder a Berlin day), shared checks."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from driftgauge.config.frozen import View
from driftgauge.configfile.loader import load_text
from driftgauge.stores.preflight import verify_all
from tests.integration.conftest import make_view

# test_trino_to_spark_checks.py imports the shared orders and findings from here.
from tests.integration.kind_checks import (
    BERLIN,
    PLANTED,
    Order,
    assert_planted,
    export,
    found,
    make_orders,
    run_check,
    totals,
)

__all__ = [
    "BERLIN",
    "PLANTED",
    "QUIET_DAY",
    "Order",
    "assert_example_finds_the_planted_rows",
    "assert_the_missing_column_is_named",
    "export",
    "export_folder",
    "found",
    "id_view",
    "make_orders",
    "missing_column_problems",
    "run_check",
    "totals",
    "write_export",
]

QUIET_DAY = (datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC))
"""A UTC day the timeout tests ask their slow and quick queries about."""


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


def export_folder(tmp_path_factory: pytest.TempPathFactory, prefix: str) -> Path:
    """Return a new folder `orders` holding the planted export of the 120 orders."""
    folder = tmp_path_factory.mktemp(prefix) / "orders"
    write_export(folder, export(make_orders()))
    return folder


async def missing_column_problems(text: str) -> list[str]:
    """Return the preflight's problems once a field `total` neither side has joins the check."""
    text = text.replace("amount: decimal", "amount: decimal\n      total: decimal")
    return await verify_all(load_text(text, source="no-column.yml"))


async def assert_the_missing_column_is_named(text: str, check: str, table: str) -> None:
    """Assert a field `total` neither side has is refused on both, the reader's naming `table`."""
    problems = await missing_column_problems(text)
    assert len(problems) == 2  # both sides lack it
    assert problems[1].startswith(
        f"checks.{check}.reader.fields.total: column total does not exist in table {table}"
    )


async def assert_example_finds_the_planted_rows(text: str, example: Path, check: str) -> None:
    """Assert the example passes the preflight and its check finds exactly the planted rows."""
    config = load_text(text, source=str(example))
    assert await verify_all(config) == []
    assert_planted(await run_check(config, check))


def id_view(store: object, **where: object) -> View:
    """Return a view of a store's `id` keys and `ts` times with no fields (its query or table)."""
    return make_view(store, key="id", time="ts", fields={}, **where)  # type: ignore[arg-type]
