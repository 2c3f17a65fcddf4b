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
from tests.conformance.spec import (
    DESCRIBES_FIELDS,
    ENGINE_ENCODING,
    ROW_CHANGES,
    STORE_ERRORS,
    ColumnType,
    Failures,
    Hung,
    Spec,
    Table,
)
from tests.conformance.sql_views import (
    cast_literal,
    golden_view,
    one_row_select,
    spec_view,
    sql_quote,
)
from tests.integration.conftest import make_view

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
"""`analyzed` has no column here: DuckDB has no analyzed text a row could be read from."""
GOLDEN_TYPES = {
    "string": "VARCHAR",
    "integer": "BIGINT",
    "decimal": "DECIMAL(38,18)",
    "boolean": "BOOLEAN",
}


def write_parquet(
    path: Path, columns: Sequence[tuple[str, str]], rows: Sequence[tuple[Any, ...]]
) -> None:
    """Write rows to one Parquet file with the given DuckDB column types."""
    conn = duckdb.connect(":memory:")
    try:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute(f"CREATE TABLE t ({', '.join(f'{n} {t}' for n, t in columns)})")
        if rows:
            lists = [list(col) for col in zip(*rows, strict=True)]
            picks = ", ".join(f"unnest(${i + 1})" for i in range(len(columns)))
            conn.execute(f"INSERT INTO t SELECT {picks}", lists)
        conn.execute(f"COPY t TO {sql_quote(path)} (FORMAT parquet)")
    finally:
        conn.close()


def store_on(path: Path, table: str, timeout: float = 30.0) -> DuckDBStore:
    """Return a store whose one file table `table` reads `path`."""
    return DuckDBStore("duck", None, (FileTable(table, "parquet", str(path)),), timeout)


class DuckDBSource:
    """A table as one Parquet file in a directory of its own."""

    def __init__(self, table: Table, folder: Path) -> None:
        self.table = table
        self.folder = folder
        self.path = folder / f"{table.name}.parquet"
        self.columns = [(name, TYPES[type_]) for name, type_ in table.columns]
        self.rows = list(table.rows)
        write_parquet(self.path, self.columns, self.rows)

    def view(self, spec: Spec, timeout: float = 30.0) -> View:
        """Return the View a check would have on the file as `spec` says."""
        store = store_on(self.path, self.table.name, timeout)
        scan = f"read_parquet({sql_quote(self.path)})"
        return spec_view(store, spec, self.table.name, scan=scan)

    async def open(self, spec: Spec) -> StoreAdapter:
        """Return a DuckDB adapter on the file."""
        return await open_adapter(self.view(spec))

    async def replace_rows(self, row_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rewrite the file without the rows of that id and with `rows` (a new export)."""
        at = [n for n, _ in self.table.columns].index(str(self.table.id_column))
        self.rows = [r for r in self.rows if r[at] != row_id] + list(rows)
        fresh = self.path.with_suffix(".new")
        write_parquet(fresh, self.columns, self.rows)
        fresh.replace(self.path)

    async def open_hung(self, spec: Spec, store_timeout: float) -> Hung:
        """An embedded engine has no connection to hold (tests/integration/test_duckdb.py)."""
        raise NotImplementedError

    async def drop(self) -> None:
        """Remove the directory."""
        shutil.rmtree(self.folder, ignore_errors=True)


def _golden_type(type_: str, value: Any) -> str:
    if type_ != "timestamp":
        return GOLDEN_TYPES[type_]
    if value is not None and datetime.fromisoformat(value).tzinfo is None:
        return "TIMESTAMP"  # without time zone: must read as UTC
    return "TIMESTAMPTZ"


def _literal(value: Any, type_: str) -> str:
    typ = _golden_type(type_, value)
    return cast_literal(value, type_, typ)


class DuckDBGolden:
    """One-row queries holding each vector with real column types, in an in-memory engine."""

    def __init__(self, vectors: Sequence[dict[str, Any]], at: datetime) -> None:
        self.vectors = vectors
        self.at = at

    def view(self, n: int) -> View:
        """Return a view over vector n's one-row query."""
        vector = self.vectors[n]
        cols = [
            _literal(vector["key"], vector["key_type"]),
            f"CAST({sql_quote(self.at.isoformat())} AS TIMESTAMPTZ)",
        ]
        cols += [_literal(f["value"], f["type"]) for f in vector["fields"]]
        return golden_view(DuckDBStore("duck"), vector, query=one_row_select(cols, vector))

    async def open(self, n: int, *, double: bool) -> StoreAdapter:
        """Return an adapter on vector n's query (DuckDB keeps decimals as DECIMAL)."""
        assert not double
        return await open_adapter(self.view(n))

    async def encoding(self, n: int) -> str:
        """Return what the dialect's encoding SQL computes for vector n's row."""
        view_ = self.view(n)
        conn = duckdb.connect(":memory:")
        try:
            conn.execute("SET TimeZone = 'UTC'")
            row = conn.execute(
                f"SELECT {DUCKDB.row_encoding_sql(view_)} FROM {DUCKDB.relation(view_)}"
            ).fetchone()
        finally:
            conn.close()
        assert row is not None
        return str(row[0])

    async def drop(self) -> None:
        """Nothing stored outside the queries."""


class DuckDBFixtures:
    """Fixtures of the duckdb kind."""

    capabilities = frozenset({ENGINE_ENCODING, STORE_ERRORS, ROW_CHANGES, DESCRIBES_FIELDS})
    failures: Failures | None = Failures(
        unreachable_match="not a valid DuckDB database",
        missing_relation="no_such_table",
        missing_match=("no_such_table", "no_such_table"),
    )

    async def load(self, table: Table) -> DuckDBSource:
        """Write the table to a Parquet file in a fresh directory."""
        return DuckDBSource(table, Path(tempfile.mkdtemp(prefix="dg_duck_")))

    async def golden(self, vectors: Sequence[dict[str, Any]], at: datetime) -> DuckDBGolden:
        """Return one-row queries per vector."""
        return DuckDBGolden(vectors, at)

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
