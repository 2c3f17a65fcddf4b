"""The duckdb kind's fixtures: each table a Parquet file the test writes, read by read_parquet."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from driftgauge.config.frozen import View
from driftgauge.stores import open_adapter
from driftgauge.stores.base import StoreAdapter
from driftgauge.stores.duckdb.dialect import DUCKDB
from driftgauge.stores.duckdb.settings import DuckDBStore, FileTable
from tests.conformance.parquet import ParquetRows
from tests.conformance.spec import (
    DESCRIBES_FIELDS,
    ENGINE_ENCODING,
    ROW_CHANGES,
    STORE_ERRORS,
    Failures,
    Hung,
    Spec,
    Table,
)
from tests.conformance.sql_views import (
    QueryGolden,
    cast_literal,
    golden_type,
    spec_view,
    sql_quote,
)
from tests.integration.conftest import make_view

GOLDEN_TYPES = {
    "string": "VARCHAR",
    "integer": "BIGINT",
    "decimal": "DECIMAL(38,18)",
    "boolean": "BOOLEAN",
}


def store_on(path: Path, table: str, timeout: float = 30.0) -> DuckDBStore:
    """Return a store whose one file table `table` reads `path`."""
    return DuckDBStore("duck", None, (FileTable(table, "parquet", str(path)),), timeout)


class DuckDBSource(ParquetRows):
    """A table as one Parquet file in a directory of its own."""

    def __init__(self, table: Table, folder: Path) -> None:
        path = folder / f"{table.name}.parquet"
        super().__init__(table, path, path.with_suffix(".new"))
        self.folder = folder
        self.write()

    def view(self, spec: Spec, timeout: float = 30.0) -> View:
        """Return the View a check would have on the file as `spec` says."""
        store = store_on(self.path, self.table.name, timeout)
        scan = f"read_parquet({sql_quote(self.path)})"
        return spec_view(store, spec, self.table.name, scan=scan)

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return a DuckDB adapter on the file."""
        return await open_adapter(self.view(spec))

    async def open_hung(self, spec: Spec, store_timeout: float) -> Hung:
        """An embedded engine has no connection to hold (tests/integration/test_duckdb.py)."""
        raise NotImplementedError

    async def drop(self) -> None:
        """Remove the directory."""
        shutil.rmtree(self.folder, ignore_errors=True)


def _literal(value: Any, type_: str) -> str:
    typ = golden_type(GOLDEN_TYPES, type_, value, "TIMESTAMP", "TIMESTAMPTZ")
    return cast_literal(value, type_, typ)


async def run(sql: str) -> list[dict[str, Any]]:
    """Run one query in an in-memory engine of its own (UTC) and return its rows."""
    conn = duckdb.connect(":memory:")
    try:
        conn.execute("SET TimeZone = 'UTC'")
        cursor = conn.execute(sql)
        names = [column[0] for column in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        conn.close()


class DuckDBFixtures:
    """Fixtures of the duckdb kind."""

    capabilities = frozenset({ENGINE_ENCODING, STORE_ERRORS, ROW_CHANGES, DESCRIBES_FIELDS})
    failures: Failures | None = Failures(
        unreachable_match="not a valid DuckDB database",
        missing_match=("no_such_table", "no_such_table"),
    )

    async def load(self, table: Table) -> DuckDBSource:
        """Write the table to a Parquet file in a fresh directory."""
        return DuckDBSource(table, Path(tempfile.mkdtemp(prefix="dg_duck_")))

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> QueryGolden:
        """Return one-row queries per vector, in an in-memory engine."""
        return QueryGolden(
            vectors,
            store=DuckDBStore("duck"),
            dialect=DUCKDB,
            run=run,
            literal=_literal,
            time_literal=f"CAST({sql_quote(at.isoformat())} AS TIMESTAMPTZ)",
        )

    async def open_unreachable(self, spec: Spec) -> StoreAdapter:
        """Open an adapter on a file that is not a DuckDB database (the engine cannot use it)."""
        folder = Path(tempfile.mkdtemp(prefix="dg_duck_"))
        try:
            bad = folder / "broken.duckdb"
            bad.write_bytes(b"not a database" * 512)
            store = replace(DuckDBStore("duck", str(bad)))
            return await open_adapter(
                make_view(
                    store,  # type: ignore[arg-type]
                    key=spec.key,
                    time=spec.time,
                    fields=dict(spec.fields),
                    table="items",
                )
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
