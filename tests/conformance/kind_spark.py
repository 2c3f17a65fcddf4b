"""The spark kind's fixtures: each table Parquet files under a Spark table on Spark Connect.

The server is the local one of deploy/local/spark.sh (`make services` starts it), at
DRIFTGAUGE_TEST_SPARK_URL or the address stack.sh derives.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tools.local_stores import address

from driftgauge.config.frozen import View
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.spark import io
from driftgauge.stores.spark.dialect import SPARK
from driftgauge.stores.spark.settings import SparkStore
from tests.conformance.kind_duckdb import write_parquet
from tests.conformance.spec import (
    DESCRIBES_FIELDS,
    ENGINE_ENCODING,
    FIELD_ERRORS,
    ROW_CHANGES,
    STORE_ERRORS,
    ColumnType,
    Failures,
    Hung,
    Spec,
    Table,
)
from tests.conformance.sql_views import (
    QueryGolden,
    cast_literal,
    spec_view,
    unreachable_view,
)
from tests.integration.conftest import TIMEOUT, unique_name

SPARK_URL = address("DRIFTGAUGE_TEST_SPARK_URL")
TYPES: dict[ColumnType, str] = {
    "key": "VARCHAR",
    "text": "VARCHAR",
    "instant": "TIMESTAMPTZ",
    "instant_ms": "TIMESTAMPTZ",
    "naive_ms": "TIMESTAMP_MS",
    "decimal": "DECIMAL(12,2)",
    "integer": "BIGINT",
    "boolean": "BOOLEAN",
}
"""DuckDB's types of the Parquet files; `analyzed` has no column (no analyzed text here)."""
GOLDEN_TYPES = {
    "string": "STRING",
    "integer": "BIGINT",
    "decimal": "DECIMAL(38,18)",
    "boolean": "BOOLEAN",
}


def store(url: str = SPARK_URL, timeout: float = TIMEOUT) -> SparkStore:
    """Return a SparkStore on the test server."""
    return SparkStore("spark", url, None, timeout)


def quote(value: Any) -> str:
    """Return a Spark SQL string literal (backslashes are escapes there)."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


async def run(sql: str) -> list[dict[str, Any]]:
    """Run one statement on a session of its own."""
    session = await io.store_pool(store())
    try:
        return await session.fetch(sql)
    finally:
        await session.close()


class SparkSource:
    """A table over one Parquet file in a directory of its own."""

    def __init__(self, table: Table, folder: Path, name: str) -> None:
        self.table = table
        self.folder = folder
        self.name = name
        self.path = folder / "data" / "part-0.parquet"
        self.columns = [(n, TYPES[type_]) for n, type_ in table.columns]
        self.rows = list(table.rows)

    async def create(self) -> None:
        """Write the file and create the Spark table over its folder."""
        self.path.parent.mkdir(parents=True)
        write_parquet(self.path, self.columns, self.rows)
        await run(f"CREATE TABLE {self.name} USING parquet LOCATION {quote(self.path.parent)}")

    def view(self, spec: Spec, timeout: float = TIMEOUT) -> View:
        """Return the View a check would have on the table as `spec` says."""
        return spec_view(store(timeout=timeout), spec, self.name, quote=quote)

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return a Spark adapter on the table."""
        return await open_adapter(self.view(spec))

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rewrite the file without the rows of that id and with `rows` (a new export)."""
        at = [n for n, _ in self.table.columns].index(str(self.table.id_column))
        self.rows = [r for r in self.rows if r[at] != row_id] + list(rows)
        fresh = self.folder / "part-0.parquet.new"
        write_parquet(fresh, self.columns, self.rows)
        fresh.replace(self.path)

    async def open_hung(self, spec: Spec, store_timeout: float) -> Hung:
        """No fault proxy speaks gRPC here (TIMEOUTS is not claimed)."""
        raise NotImplementedError

    async def drop(self) -> None:
        """Drop the table and remove the directory."""
        try:
            await run(f"DROP TABLE IF EXISTS {self.name}")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def _golden_type(type_: str, value: Any) -> str:
    if type_ != "timestamp":
        return GOLDEN_TYPES[type_]
    if value is not None and datetime.fromisoformat(value).tzinfo is None:
        return "TIMESTAMP_NTZ"  # without time zone: must read as UTC
    return "TIMESTAMP"


def _literal(value: Any, type_: str) -> str:
    typ = _golden_type(type_, value)
    return cast_literal(value, type_, typ, quote)


class SparkFixtures:
    """Fixtures of the spark kind."""

    capabilities = frozenset(
        {ENGINE_ENCODING, STORE_ERRORS, FIELD_ERRORS, ROW_CHANGES, DESCRIBES_FIELDS}
    )
    failures: Failures | None = Failures(
        unreachable_match="connect to sc://127.0.0.1:1",
        missing_relation="no_such_table",
        missing_match=("no_such_table", "no_such_table"),
        unusable_field="label_text",
    )

    async def load(self, table: Table) -> SparkSource:
        """Write the table to Parquet and create a Spark table over it."""
        folder = Path(tempfile.mkdtemp(prefix="dg_spark_"))
        source = SparkSource(table, folder, unique_name(f"dg_{table.name}"))
        await source.create()
        return source

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> QueryGolden:
        """Return one-row queries per vector."""
        return QueryGolden(
            vectors,
            store=store(),
            dialect=SPARK,
            run=run,
            literal=_literal,
            time_literal=f"CAST({quote(at.isoformat())} AS TIMESTAMP)",
        )

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """Open an adapter on a port nothing listens at (the session connects when opened)."""
        return await open_adapter(unreachable_view(store("sc://127.0.0.1:1"), spec))
